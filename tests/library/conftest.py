"""Fixtures for gradlab's library tests: execution modes, dtypes, the table of ops, comparisons.

These tests guard the package alone: `make test-library` runs this folder from the built wheel, in a
fresh environment outside the checkout. Shared cases live in ``helpers.py`` (importable as ``helpers``).

* ``mode``: ``"eager"``, ``"function"`` (``tf.function``) or ``"xla"`` (``jit_compile=True``); the
  ``run_in_mode`` fixture wraps a Python function accordingly.
* ``dtype``: float16, bfloat16, float32, float64 (as ``tf.DType``).
* ``op_case`` / ``identity_op_case``: every gradlab op as a ``helpers.OpCase``.
* ``assert_bitwise``, ``assert_close``: the comparisons of ``helpers``, as fixtures.
"""
from __future__ import annotations

import functools
import os
from typing import Any, Callable

# Before the first `import tensorflow` in the session (subprocesses inherit it).
os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
os.environ.setdefault("TF_ENABLE_ONEDNN_OPTS", "0")

import pytest  # noqa: E402
from helpers import (  # noqa: E402
    DTYPE_NAMES, IDENTITY_OP_NAMES, MODES, OP_NAMES, OpCase, assert_bitwise as _assert_bitwise,
    assert_close as _assert_close, op_cases, tape_gradient, wrap_in_mode,
)
from hypothesis import HealthCheck, settings  # noqa: E402

# TensorFlow's first call of each traced function is slow, so no per-example deadline; examples
# are kept few enough that the whole unit and property suite stays well under 90 s on 2 cores.
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


@pytest.fixture(scope="session", params=MODES)
def mode(request) -> str:
    """Each execution mode: eager, tf.function, tf.function(jit_compile=True)."""
    return request.param


@pytest.fixture(scope="session")
def run_in_mode(mode) -> Callable[[Callable], Callable]:
    """``run_in_mode(fn)`` -> ``fn`` wrapped for the current mode (call the result with tensors)."""
    return functools.partial(wrap_in_mode, mode_name=mode)


@pytest.fixture(scope="session", params=DTYPE_NAMES)
def dtype(request):
    """Each floating dtype gradlab supports, as a ``tf.DType``."""
    import tensorflow as tf

    return tf.as_dtype(request.param)


@pytest.fixture(scope="session")
def assert_bitwise() -> Callable[[Any, Any], None]:
    """``assert_bitwise(actual, expected)``: equal dtype, shape and bit patterns."""
    return _assert_bitwise


@pytest.fixture(scope="session")
def assert_close() -> Callable[..., None]:
    """``assert_close(actual, expected, dtype_name)``: allclose with the dtype's tolerance."""
    return _assert_close


@pytest.fixture(scope="session")
def op_case(request) -> OpCase:
    """Each gradlab op (parametrized by ``pytest_generate_tests``)."""
    return op_cases()[request.param]


@pytest.fixture(scope="session")
def identity_op_case(request) -> OpCase:
    """Each op whose forward pass is the identity."""
    return op_cases()[request.param]


def pytest_generate_tests(metafunc):
    for fixture, names in (("op_case", OP_NAMES), ("identity_op_case", IDENTITY_OP_NAMES)):
        if fixture in metafunc.fixturenames:
            metafunc.parametrize(fixture, names, indirect=True, ids=names, scope="session")


@pytest.fixture(scope="session")
def forward_and_gradient() -> Callable:
    """``forward_and_gradient(apply, x, dy)`` -> ``(apply(x), d<dy, apply(x)>/dx)`` on a tape (``tape_gradient``)."""
    return tape_gradient
