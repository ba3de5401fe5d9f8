"""Property tests (hypothesis) over shapes and values: forward exact, gradient as defined, no NaN.

Each property runs for every op (the ``op_case`` table in conftest.py) and every dtype, eagerly;
one property re-runs the ops in a shape-agnostic ``tf.function`` and compares with eager. The
table tests in test_ops.py cover XLA on fixed inputs (XLA compiles once per shape, too slowly for
hypothesis).
"""

from __future__ import annotations

import ml_dtypes
import numpy as np
import tensorflow as tf
from hypothesis import assume, given, settings
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp

import gradlab
from helpers import tape_gradient

SHAPES = hnp.array_shapes(min_dims=0, max_dims=3, min_side=0, max_side=4)
#: Bounds for the gradient-definition properties: large enough to exercise every branch (clipping,
#: the surrogate's flat tails), small enough that float16 sums of squares do not overflow.
X_BOUND, DY_BOUND = 100.0, 10.0


def float_arrays(dtype: tf.DType, shape, *, finite: bool, bound: float | None = None):
    """Arrays of ``dtype`` (bfloat16 drawn as float32, then rounded), optionally finite and bounded.

    Subnormal numbers are included; note that TensorFlow's CPU kernels flush them to zero in
    arithmetic, so an exact comparison with NumPy arithmetic must leave them out (``normal``).
    """
    np_dtype = np.dtype(dtype.as_numpy_dtype)
    draw_dtype = np.dtype(np.float32) if dtype == tf.bfloat16 else np_dtype
    if finite and bound is None:
        bound = float(ml_dtypes.finfo(np_dtype).max)  # for bfloat16: no rounding up to inf
    elements = st.floats(
        min_value=None if bound is None else -bound,
        max_value=bound,
        allow_nan=not finite,
        allow_infinity=not finite,
        width=8 * draw_dtype.itemsize,
    )
    return hnp.arrays(draw_dtype, shape, elements=elements).map(lambda a: a.astype(np_dtype))


@st.composite
def x_and_dy(draw, dtype: tf.DType, *, finite: bool, x_bound=None, dy_bound=None):
    shape = draw(SHAPES)
    x = draw(float_arrays(dtype, shape, finite=finite, bound=x_bound))
    dy = draw(float_arrays(dtype, shape, finite=True, bound=dy_bound))
    return x, dy


def assert_close_to_definition(grad, expected, dy, dtype, tolerances):
    """``|grad - expected| <= atol * max(1, max|dy|) + rtol * |expected|`` for the dtype."""
    rtol, atol = tolerances[dtype.name]
    grad = grad.numpy().astype(np.float64)
    scale = max(1.0, float(np.max(np.abs(dy), initial=0.0)))
    assert grad.shape == expected.shape
    np.testing.assert_array_less(
        np.abs(grad - expected), atol * scale + rtol * np.abs(expected) + 1e-300
    )


TOLERANCES = (
    {  # as conftest.TOLERANCES, with room for sums over up to 64 elements in clip_gradient_norm
        "float16": (1e-2, 4e-3),
        "bfloat16": (6e-2, 3e-2),
        "float32": (2e-5, 2e-6),
        "float64": (1e-12, 1e-14),
    }
)


# ------------------------------------------------------------------------------------------------
# Every op, every dtype
# ------------------------------------------------------------------------------------------------


@settings(max_examples=20)
@given(data=st.data())
def test_forward_is_exact_and_no_nan_is_introduced(op_case, dtype, assert_bitwise, data):
    x_np, dy_np = data.draw(x_and_dy(dtype, finite=False), label="x, dy")
    y, grad = tape_gradient(op_case.apply, x_np, dy_np)

    if op_case.identity:
        assert_bitwise(y, x_np)
    else:
        assert_bitwise(y, op_case.reference_forward(tf.constant(x_np)))
    assert grad.dtype == dtype and grad.shape == x_np.shape
    # NaN in the gradient only where x itself is NaN (surrogate_step's rule reads x); dy is finite.
    x_nan = np.isnan(x_np.astype(np.float64))
    grad_nan = np.isnan(grad.numpy().astype(np.float64))
    assert not np.any(
        grad_nan & ~x_nan
    ), f"NaN introduced at {np.argwhere(grad_nan & ~x_nan).tolist()}"


@settings(max_examples=20)
@given(data=st.data())
def test_gradient_matches_the_definition(op_case, dtype, data):
    x_np, dy_np = data.draw(
        x_and_dy(dtype, finite=True, x_bound=X_BOUND, dy_bound=DY_BOUND), label="x, dy"
    )
    y, grad = tape_gradient(op_case.apply, x_np, dy_np)
    x64, dy64 = x_np.astype(np.float64), dy_np.astype(np.float64)
    if op_case.forward is not None:
        # TensorFlow's CPU kernels flush subnormals to zero (so surrogate_step(1e-310) is 0, like
        # tf.greater(1e-310, 0)); the NumPy definition is compared on the other values.
        kept = normal(x_np)
        np.testing.assert_array_equal(
            y.numpy().astype(np.float64)[kept], op_case.forward(x_np).astype(np.float64)[kept]
        )
    assert_close_to_definition(grad, op_case.gradient(x64, dy64), dy64, dtype, TOLERANCES)


_FUNCTIONS: dict = {}


def shape_agnostic_function(op_case, dtype):
    """One tf.function per (op, dtype), traced once for all shapes (a signature of unknown rank)."""
    key = (op_case.name, dtype.name)
    if key not in _FUNCTIONS:
        spec = tf.TensorSpec(shape=None, dtype=dtype)

        @tf.function(input_signature=[spec, spec])
        def run(x, dy):
            with tf.GradientTape() as tape:
                tape.watch(x)
                y = op_case.apply(x)
            return y, tape.gradient(y, x, output_gradients=dy)

        _FUNCTIONS[key] = run
    return _FUNCTIONS[key]


@settings(max_examples=10)
@given(data=st.data())
def test_tf_function_agrees_with_eager(op_case, dtype, assert_bitwise, data):
    x_np, dy_np = data.draw(
        x_and_dy(dtype, finite=True, x_bound=X_BOUND, dy_bound=DY_BOUND), label="x, dy"
    )
    run = shape_agnostic_function(op_case, dtype)
    y, grad = run(tf.constant(x_np), tf.constant(dy_np))
    y_eager, grad_eager = tape_gradient(op_case.apply, x_np, dy_np)
    assert_bitwise(y, y_eager)
    assert_close_to_definition(
        grad, grad_eager.numpy().astype(np.float64), dy_np, dtype, TOLERANCES
    )
    assert run.experimental_get_tracing_count() == 1


# ------------------------------------------------------------------------------------------------
# Exact rules with random hyperparameters
# ------------------------------------------------------------------------------------------------

FINITE_PARAMS = st.floats(min_value=-1e3, max_value=1e3, allow_nan=False, allow_infinity=False)


def rounded(value: float, dtype: tf.DType):
    return np.array(value, dtype.as_numpy_dtype)


def normal(*arrays: np.ndarray) -> np.ndarray:
    """Where every array holds a zero, an infinity or a normal number (not a subnormal)."""
    keep = True
    for array in arrays:
        a = np.abs(np.asarray(array, np.float64))
        keep = keep & ((a == 0) | (a >= float(ml_dtypes.finfo(array.dtype).tiny)))
    return np.broadcast_to(keep, np.shape(arrays[0]))


@settings(max_examples=20)
@given(data=st.data(), factor=FINITE_PARAMS)
def test_scale_and_reverse_are_exact_products(dtype, data, factor):
    # The product is formed in float32 for float16 and bfloat16, then rounded once (issue 30); a
    # factor that is neither 0 nor a normal number of that dtype is refused (tests/library/test_ops.py).
    compute = np.float64 if dtype == tf.float64 else np.float32
    assume(factor == 0 or abs(factor) >= float(np.finfo(compute).tiny))
    x_np, dy_np = data.draw(x_and_dy(dtype, finite=True), label="x, dy")
    f = compute(factor)
    with np.errstate(over="ignore"):
        in_compute = dy_np.astype(compute) * f
        product = in_compute.astype(dy_np.dtype)
    _, scaled = tape_gradient(lambda t: gradlab.scale_gradient(t, factor), x_np, dy_np)
    _, reversed_ = tape_gradient(
        lambda t: gradlab.reverse_gradient(t, factor), x_np, dy_np
    )
    # Equal values (0.0 == -0.0): one correctly rounded multiplication in the dtype, as in NumPy.
    # TensorFlow's CPU kernels flush subnormal results to zero, the float32 product of a half
    # precision dy included: where that product is subnormal (a bfloat16 dy of 2**-126 times
    # 1 - 2**-8 rounds up to 2**-126 in NumPy, to 0 in TensorFlow), it is not compared.
    kept = normal(dy_np, product, f, in_compute)
    expected = product.astype(np.float64)[kept]
    np.testing.assert_array_equal(scaled.numpy().astype(np.float64)[kept], expected)
    np.testing.assert_array_equal(reversed_.numpy().astype(np.float64)[kept], -expected)


@settings(max_examples=20)
@given(data=st.data(), bounds=st.lists(FINITE_PARAMS, min_size=2, max_size=2).map(sorted))
def test_clip_gradient_is_exactly_clip_by_value(dtype, data, bounds):
    low, high = bounds
    x_np, dy_np = data.draw(x_and_dy(dtype, finite=True, dy_bound=2e3), label="x, dy")
    _, grad = tape_gradient(lambda t: gradlab.clip_gradient(t, low, high), x_np, dy_np)
    expected = np.clip(
        dy_np.astype(np.float64), float(rounded(low, dtype)), float(rounded(high, dtype))
    )
    kept = normal(dy_np, rounded(low, dtype), rounded(high, dtype))
    np.testing.assert_array_equal(grad.numpy().astype(np.float64)[kept], expected[kept])


@settings(max_examples=20)
@given(
    data=st.data(),
    max_norm=st.floats(min_value=1e-2, max_value=1e2),
)
def test_clip_gradient_norm_bounds_the_norm_and_keeps_the_direction(dtype, data, max_norm):
    # float16: its whole finite range (the norm is taken in float32); the others: up to 2**50, so
    # that float32 sums of squares stay finite.
    dy_bound = None if dtype == tf.float16 else 2.0**50
    x_np, dy_np = data.draw(x_and_dy(dtype, finite=True, dy_bound=dy_bound), label="x, dy")
    _, grad = tape_gradient(
        lambda t: gradlab.clip_gradient_norm(t, max_norm), x_np, dy_np
    )
    g, dy = grad.numpy().astype(np.float64), dy_np.astype(np.float64)
    rtol, atol = TOLERANCES[dtype.name]
    norm, limit = np.linalg.norm(g), float(rounded(max_norm, dtype))
    assert norm <= limit * (1 + rtol) + atol
    assert np.all(g * dy >= 0)  # same direction: each element keeps its sign (or becomes zero)
    if np.linalg.norm(dy) <= limit * (1 - rtol):
        np.testing.assert_allclose(g, dy, rtol=rtol, atol=atol)  # below the bound: unchanged
    elif np.linalg.norm(dy) >= limit * (1 + rtol):
        assert abs(norm - limit) <= rtol * limit + atol  # above it: rescaled to the bound, not zeroed


@settings(max_examples=20)
@given(data=st.data())
def test_straight_through_value_is_bitwise_forward(dtype, assert_bitwise, data):
    shape = data.draw(SHAPES, label="shape")
    forward = data.draw(float_arrays(dtype, shape, finite=False), label="forward")
    backward = data.draw(float_arrays(dtype, shape, finite=False), label="backward")
    dy = data.draw(float_arrays(dtype, shape, finite=True), label="dy")
    b = tf.constant(backward)
    with tf.GradientTape() as tape:
        tape.watch(b)
        y = gradlab.straight_through(tf.constant(forward), b)
    assert_bitwise(y, forward)
    assert_bitwise(tape.gradient(y, b, output_gradients=tf.constant(dy)), dy)  # as through identity


@settings(max_examples=20)
@given(data=st.data(), width=st.floats(min_value=1e-2, max_value=1e2))
def test_surrogate_step_is_a_step_with_a_triangular_gradient(dtype, data, width):
    x_np, dy_np = data.draw(
        x_and_dy(dtype, finite=True, x_bound=X_BOUND, dy_bound=DY_BOUND), label="x, dy"
    )
    y, grad = tape_gradient(lambda t: gradlab.surrogate_step(t, width), x_np, dy_np)
    x64 = x_np.astype(np.float64)
    w = float(rounded(width, tf.float64 if dtype == tf.float64 else tf.float32))  # float32 for half (issue 30)
    kept = normal(x_np)  # TF flushes subnormals to 0: tf.greater(1e-310, 0.0) is False
    y64 = y.numpy().astype(np.float64)
    np.testing.assert_array_equal(y64[kept], (x64[kept] > 0).astype(np.float64))
    assert set(np.unique(y64)) <= {0.0, 1.0}
    g = grad.numpy().astype(np.float64)
    assert np.all(g[np.abs(x64) >= w] == 0)  # flat outside the triangle
    expected = dy_np.astype(np.float64) * np.maximum(0.0, 1.0 - np.abs(x64) / w)
    assert_close_to_definition(grad, expected, dy_np.astype(np.float64), dtype, TOLERANCES)
