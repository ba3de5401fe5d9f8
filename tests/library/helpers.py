"""Shared cases and comparisons for gradlab's library tests (imported as ``helpers``).

* ``MODES`` / ``wrap_in_mode``: eager, ``tf.function`` and XLA (``jit_compile=True``).
* ``DTYPE_NAMES`` / ``TOLERANCES``: the floating dtypes gradlab supports and the gradient tolerance of each.
* ``OpCase`` / ``op_cases()``: every gradlab op with fixed hyperparameters, its exact forward value and its
  gradient by definition, so each op is checked in every mode and dtype (``OP_NAMES``, ``IDENTITY_OP_NAMES``).
* ``assert_bitwise`` / ``assert_close``: forward values compare bit for bit; gradients with a tolerance
  suited to the dtype when arithmetic is involved.
* ``tape_gradient``: a function's output and the gradient reaching its input, on a tape.
* ``ApplyOp`` / ``Shift``: the minimal Keras layers the model tests build with (an op as a layer; a
  trainable shift ``x + b`` whose update shows the gradient that reached it).

conftest.py sets TensorFlow's log settings before it imports this module (which imports TensorFlow).
test_distribute.py imports it in its subprocess too (it puts this folder on that process's path).
"""
from __future__ import annotations

import dataclasses
import functools
from typing import Any, Callable, Dict, Optional

import keras
import numpy as np
import tensorflow as tf

import gradlab
from gradlab import ops

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


def wrap_in_mode(fn: Callable, mode_name: str) -> Callable:
    """``fn`` itself (eager), or ``fn`` as a ``tf.function`` (with XLA for ``"xla"``)."""
    if mode_name == "eager":
        return fn
    return tf.function(fn, jit_compile=(mode_name == "xla"))


def _to_numpy(value: Any) -> np.ndarray:
    return np.asarray(value.numpy() if hasattr(value, "numpy") else value)


def assert_bitwise(actual: Any, expected: Any) -> None:
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


def assert_close(actual: Any, expected: Any, dtype_name: str, *, scale: float = 1.0) -> None:
    rtol, atol = TOLERANCES[dtype_name]
    a = _to_numpy(actual).astype(np.float64)
    e = np.asarray(expected, np.float64)
    assert a.shape == e.shape, f"shape {a.shape} != expected {e.shape}"
    np.testing.assert_allclose(a, e, rtol=rtol * scale, atol=atol * scale)


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

#: Every public op, in gradlab.ops' order; op_cases() asserts that its table has exactly these cases.
OP_NAMES = tuple(ops.__all__)
#: The ops whose forward pass is the identity (listed first in gradlab.ops; op_cases() checks it).
IDENTITY_OP_NAMES = OP_NAMES[:5]


def _clip_by_norm_np(dy: np.ndarray, max_norm: float) -> np.ndarray:
    norm = float(np.sqrt(np.sum(np.square(dy, dtype=np.float64))))
    return dy if norm <= max_norm else dy * (max_norm / norm)


@functools.lru_cache(maxsize=None)
def op_cases() -> Dict[str, OpCase]:
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
    # One case per public op, so that a new op is not left out of every test built on this table.
    assert tuple(c.name for c in cases) == OP_NAMES, "the op cases must be gradlab.ops.__all__, in its order"
    assert tuple(c.name for c in cases if c.identity) == IDENTITY_OP_NAMES
    return {c.name: c for c in cases}


def tape_gradient(fn: Callable, x: Any, dy: Any):
    """``(fn(x), d<dy, fn(x)>/dx)``: the output and the gradient reaching ``x`` (arrays or tensors), on a tape."""
    x = tf.convert_to_tensor(x)
    with tf.GradientTape() as tape:
        tape.watch(x)
        y = fn(x)
    return y, tape.gradient(y, x, output_gradients=dy)  # the tape converts dy; None means ones


class ApplyOp(keras.layers.Layer):
    """A minimal Keras layer around a function, e.g. a gradlab op (how a user puts an op in a model).

    The function is an ``__init__`` argument that Keras cannot put in a config.
    """

    def __init__(self, apply, **kwargs):
        super().__init__(**kwargs)
        self.apply = apply

    def call(self, inputs):
        return self.apply(inputs)

    def compute_output_shape(self, input_shape):
        return input_shape


class Shift(keras.layers.Layer):
    """``x + b`` with a trainable ``b`` (zeros at first): its update shows the gradient that reached it."""

    def build(self, input_shape):
        self.b = self.add_weight(shape=(input_shape[-1],), initializer="zeros", name="b")

    def call(self, inputs):
        return inputs + self.b
