"""Shared fixtures for gradlab's tests: execution modes, dtypes, the table of ops, comparisons.

* ``mode``: ``"eager"``, ``"function"`` (``tf.function``) or ``"xla"`` (``jit_compile=True``); the
  ``run_in_mode`` fixture wraps a Python function accordingly.
* ``dtype``: float16, bfloat16, float32, float64 (as ``tf.DType``).
* ``op_case`` / ``identity_op_case``: every gradlab op as an :class:`OpCase` (how to apply it, its
  exact forward value, its gradient by definition), so each op is checked in every mode and dtype.
* ``assert_bitwise``, ``assert_close``: forward values compare bit for bit; gradients with a
  tolerance suited to the dtype when arithmetic is involved.

TensorFlow is imported lazily, so collecting the project checks alone stays fast.
"""

from __future__ import annotations

import dataclasses
import functools
import os
import sys
from pathlib import Path
from typing import Any, Callable, Dict, Optional

# Before the first `import tensorflow` in the session (subprocesses inherit it).
os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
os.environ.setdefault("TF_ENABLE_ONEDNN_OPTS", "0")

import numpy as np  # noqa: E402
import pytest  # noqa: E402
from hypothesis import HealthCheck, settings  # noqa: E402

# TensorFlow's first call of each traced function is slow, so no per-example deadline; examples
# are kept few enough that the whole unit and property suite stays well under 90 s on 2 cores.
# The exercise self-checks live beside the notebooks (notebooks/exercises/), where the notebooks'
# kernels import them from; tests/test_exercises_*.py import them the same way.
_NOTEBOOKS_DIR = str(Path(__file__).resolve().parents[1] / "notebooks")
if _NOTEBOOKS_DIR not in sys.path:
    sys.path.insert(0, _NOTEBOOKS_DIR)

settings.register_profile(
    "gradlab",
    deadline=None,
    max_examples=25,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
    print_blob=True,
)
# CI: the same examples on every run.
settings.register_profile("ci", parent=settings.get_profile("gradlab"), derandomize=True)
settings.load_profile(os.environ.get("HYPOTHESIS_PROFILE", "gradlab"))

MODES = ("eager", "function", "xla")
DTYPE_NAMES = ("float16", "bfloat16", "float32", "float64")

#: Gradient comparisons (rtol, atol) per dtype: a few units in the last place of the dtype, since
#: graph optimisers and XLA may reorder an operation or two (x / w versus x * (1 / w)).
TOLERANCES = {
    "float16": (5e-3, 2e-3),
    "bfloat16": (3e-2, 2e-2),
    "float32": (1e-5, 1e-6),
    "float64": (1e-12, 1e-14),
}


# --------------------------------------------------------------------------------------------
# Execution modes and dtypes
# --------------------------------------------------------------------------------------------


@pytest.fixture(scope="session", params=MODES)
def mode(request) -> str:
    """Each execution mode: eager, tf.function, tf.function(jit_compile=True)."""
    return request.param


def _wrap_in_mode(fn: Callable, mode_name: str) -> Callable:
    """``fn`` itself (eager), or ``fn`` as a ``tf.function`` (with XLA for ``"xla"``)."""
    import tensorflow as tf

    if mode_name == "eager":
        return fn
    return tf.function(fn, jit_compile=(mode_name == "xla"))


@pytest.fixture(scope="session")
def run_in_mode(mode) -> Callable[[Callable], Callable]:
    """``run_in_mode(fn)`` -> ``fn`` wrapped for the current mode (call the result with tensors)."""
    return functools.partial(_wrap_in_mode, mode_name=mode)


@pytest.fixture(scope="session", params=DTYPE_NAMES)
def dtype(request):
    """Each floating dtype gradlab supports, as a ``tf.DType``."""
    import tensorflow as tf

    return tf.as_dtype(request.param)


# --------------------------------------------------------------------------------------------
# Comparisons
# --------------------------------------------------------------------------------------------


def _to_numpy(value: Any) -> np.ndarray:
    return np.asarray(value.numpy() if hasattr(value, "numpy") else value)


def _assert_bitwise(actual: Any, expected: Any) -> None:
    a, e = _to_numpy(actual), _to_numpy(expected)
    assert a.dtype == e.dtype, f"dtype {a.dtype} != expected {e.dtype}"
    assert a.shape == e.shape, f"shape {a.shape} != expected {e.shape}"
    width = a.dtype.itemsize
    bits = {1: np.uint8, 2: np.uint16, 4: np.uint32, 8: np.uint64}[width]
    a_bits, e_bits = a.view(bits), e.view(bits)
    assert np.array_equal(a_bits, e_bits), (
        f"not bitwise equal:\n actual   {a!r}\n expected {e!r}\n differing bit patterns at "
        f"{np.argwhere(a_bits != e_bits).tolist()}"
    )


def _assert_close(actual: Any, expected: Any, dtype_name: str, *, scale: float = 1.0) -> None:
    rtol, atol = TOLERANCES[dtype_name]
    a = _to_numpy(actual).astype(np.float64)
    e = np.asarray(expected, np.float64)
    assert a.shape == e.shape, f"shape {a.shape} != expected {e.shape}"
    np.testing.assert_allclose(a, e, rtol=rtol * scale, atol=atol * scale)


@pytest.fixture(scope="session")
def assert_bitwise() -> Callable[[Any, Any], None]:
    """``assert_bitwise(actual, expected)``: equal dtype, shape and bit patterns."""
    return _assert_bitwise


@pytest.fixture(scope="session")
def assert_close() -> Callable[..., None]:
    """``assert_close(actual, expected, dtype_name)``: allclose with the dtype's tolerance."""
    return _assert_close


# --------------------------------------------------------------------------------------------
# The table of ops
# --------------------------------------------------------------------------------------------


@dataclasses.dataclass(frozen=True)
class OpCase:
    """One gradlab op with fixed hyperparameters and its contract.

    Attributes:
      name: the test id.
      apply: ``apply(x)`` -> the op's output (a TensorFlow function of one tensor).
      forward: ``forward(x_np)`` -> the exact expected output as a NumPy array of x's dtype, or
        None when the output is bitwise ``x`` itself (identity forward).
      gradient: ``gradient(x, dy)`` -> the gradient by definition, in float64 NumPy.
      reference_forward: for ops whose value is another TensorFlow op's (``straight_through``),
        that op, run in the same mode so the comparison can be bitwise.
    """

    name: str
    apply: Callable[[Any], Any]
    forward: Optional[Callable[[np.ndarray], np.ndarray]]
    gradient: Callable[[np.ndarray, np.ndarray], np.ndarray]
    reference_forward: Optional[Callable[[Any], Any]] = None

    @property
    def identity(self) -> bool:
        return self.forward is None and self.reference_forward is None


#: Hyperparameters used by the table; exactly representable in every dtype.
SCALE, CLIP_MIN, CLIP_MAX, MAX_NORM, REVERSE, WIDTH = -1.5, -0.25, 0.5, 1.0, 0.75, 1.5

OP_NAMES = (
    "map_gradient",
    "scale_gradient",
    "clip_gradient",
    "clip_gradient_norm",
    "reverse_gradient",
    "straight_through",
    "surrogate_step",
)
IDENTITY_OP_NAMES = OP_NAMES[:5]


def _clip_by_norm_np(dy: np.ndarray, max_norm: float) -> np.ndarray:
    norm = float(np.sqrt(np.sum(np.square(dy, dtype=np.float64))))
    return dy if norm <= max_norm else dy * (max_norm / norm)


@functools.lru_cache(maxsize=None)
def _op_cases() -> Dict[str, OpCase]:
    import tensorflow as tf

    import gradlab

    cases = [
        OpCase(
            "map_gradient",
            lambda x: gradlab.map_gradient(x, lambda dy: dy * dy),
            None,
            lambda x, dy: dy * dy,
        ),
        OpCase(
            "scale_gradient",
            lambda x: gradlab.scale_gradient(x, SCALE),
            None,
            lambda x, dy: SCALE * dy,
        ),
        OpCase(
            "clip_gradient",
            lambda x: gradlab.clip_gradient(x, CLIP_MIN, CLIP_MAX),
            None,
            lambda x, dy: np.clip(dy, CLIP_MIN, CLIP_MAX),
        ),
        OpCase(
            "clip_gradient_norm",
            lambda x: gradlab.clip_gradient_norm(x, MAX_NORM),
            None,
            lambda x, dy: _clip_by_norm_np(dy, MAX_NORM),
        ),
        OpCase(
            "reverse_gradient",
            lambda x: gradlab.reverse_gradient(x, REVERSE),
            None,
            lambda x, dy: -REVERSE * dy,
        ),
        OpCase(
            "straight_through",
            lambda x: gradlab.straight_through(tf.round(x), x),
            lambda x: np.round(x.astype(np.float64)).astype(x.dtype),  # half to even, like tf.round
            lambda x, dy: dy,
            reference_forward=tf.round,
        ),
        OpCase(
            "surrogate_step",
            lambda x: gradlab.surrogate_step(x, WIDTH),
            lambda x: (x.astype(np.float64) > 0).astype(x.dtype),
            lambda x, dy: dy * np.maximum(0.0, 1.0 - np.abs(x) / WIDTH),
            reference_forward=lambda x: tf.cast(x > 0, x.dtype),
        ),
    ]
    assert tuple(c.name for c in cases) == OP_NAMES
    return {c.name: c for c in cases}


@pytest.fixture(scope="session")
def op_case(request) -> OpCase:
    """Each gradlab op (parametrized by ``pytest_generate_tests``)."""
    return _op_cases()[request.param]


@pytest.fixture(scope="session")
def identity_op_case(request) -> OpCase:
    """Each op whose forward pass is the identity."""
    return _op_cases()[request.param]


def pytest_generate_tests(metafunc):
    for fixture, names in (("op_case", OP_NAMES), ("identity_op_case", IDENTITY_OP_NAMES)):
        if fixture in metafunc.fixturenames:
            metafunc.parametrize(fixture, names, indirect=True, ids=names, scope="session")


@pytest.fixture(scope="session")
def forward_and_gradient() -> Callable:
    """``forward_and_gradient(apply, x, dy)`` -> ``(apply(x), d<dy, apply(x)>/dx)`` on a tape."""
    import tensorflow as tf

    def compute(apply, x, dy):
        with tf.GradientTape() as tape:
            tape.watch(x)
            y = apply(x)
        return y, tape.gradient(y, x, output_gradients=dy)

    return compute


# --------------------------------------------------------------------------------------------
# The suite leaves the checkout as it found it
# --------------------------------------------------------------------------------------------
# A notebook or test that writes into the repository (a saved model next to the notebook, a
# changed stored output) would make the next run start from a different state, so a second
# `make test` in the same environment could behave differently. Compare `git status` before and
# after the session and fail the run if anything new appeared. (`.ci/run` also runs nbval a
# second time in the same environment.)

_REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def _git_status() -> Optional[set]:
    import subprocess

    try:
        out = subprocess.run(["git", "status", "--porcelain", "--untracked-files=all"], cwd=_REPO,
                             capture_output=True, text=True, timeout=60, check=True).stdout
    except (OSError, subprocess.SubprocessError):
        return None  # not a git checkout: nothing to compare
    return set(out.splitlines())


def pytest_sessionstart(session):
    session.config._gradlab_git_status = _git_status()


def pytest_sessionfinish(session, exitstatus):
    before = getattr(session.config, "_gradlab_git_status", None)
    if before is None or exitstatus != 0 or os.environ.get("GRADLAB_ALLOW_DIRTY"):
        return
    after = _git_status()
    new = sorted((after or set()) - before)
    if new:
        reporter = session.config.pluginmanager.get_plugin("terminalreporter")
        if reporter is not None:
            reporter.write_line("The test session changed the checkout (each notebook and test must clean "
                                "up after itself, so that a second run starts from the same state):", red=True)
            for line in new:
                reporter.write_line("    " + line, red=True)
        session.exitstatus = pytest.ExitCode.TESTS_FAILED
