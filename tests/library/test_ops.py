"""The contract of gradlab's ops, checked for every op in every execution mode and dtype.

Forward values compare bit for bit; gradients compare with the definition in the README table,
with a tolerance for the dtype only where the rule does arithmetic.
"""

from __future__ import annotations

import sys

import ml_dtypes
import numpy as np
import pytest
import tensorflow as tf

import gradlab

#: Ordinary inputs: no kinks of surrogate_step, a -0.0, a round-half-to-even case (2.5).
X = [[0.3, -1.75, 2.5], [-0.0, 0.5, 1e-3]]
#: An upstream gradient with elements inside and outside [CLIP_MIN, CLIP_MAX] and L2 norm > 1.
DY = [[1.0, -2.0, 0.05], [3.0, -0.4, 0.25]]


def special_values(dtype: tf.DType) -> np.ndarray:
    """Signed zeros, infinities, NaNs, the extremes and subnormals of ``dtype``."""
    np_dtype = dtype.as_numpy_dtype
    info = ml_dtypes.finfo(np_dtype)
    tiny = float(info.tiny)  # the smallest normal number
    values = [
        0.0,
        -0.0,
        np.inf,
        -np.inf,
        np.nan,
        -np.nan,
        float(info.max),
        -float(info.max),
        tiny,
        -tiny,
        tiny / 4,
        -tiny / 4,
        2.5,
        -1.5,
        0.5,
        1.0,
    ]  # tiny / 4: a subnormal
    return np.array([np.array(v, np_dtype) for v in values], np_dtype).reshape(4, 4)


# ------------------------------------------------------------------------------------------------
# The table: every op, every mode, every dtype
# ------------------------------------------------------------------------------------------------


def test_forward_is_exact_on_special_values(op_case, mode, dtype, run_in_mode, assert_bitwise):
    x_np = special_values(dtype)
    x = tf.constant(x_np)
    reference = op_case.reference_forward

    def forward(t):
        return op_case.apply(t), (t if reference is None else reference(t))

    y, expected = run_in_mode(forward)(x)
    assert y.dtype == dtype
    if op_case.identity:
        assert_bitwise(y, x_np)  # the input's own bits, NaN payloads and subnormals included
    else:
        assert_bitwise(y, expected)


def test_forward_and_gradient_match_definition(
    op_case, mode, dtype, run_in_mode, forward_and_gradient, assert_bitwise, assert_close
):
    x, dy = tf.constant(X, dtype), tf.constant(DY, dtype)
    x_np = x.numpy()
    y, grad = run_in_mode(lambda a, b: forward_and_gradient(op_case.apply, a, b))(x, dy)

    expected_forward = x_np if op_case.forward is None else op_case.forward(x_np)
    assert_bitwise(y, expected_forward)
    assert grad.dtype == dtype and grad.shape == x.shape
    expected_grad = op_case.gradient(x_np.astype(np.float64), dy.numpy().astype(np.float64))
    assert_close(grad, expected_grad, dtype.name)


def test_accepts_tensors_arrays_and_lists(op_case, assert_bitwise):
    inputs = {
        "list": [[0.5, -1.25], [3.0, 0.0]],
        "float64 array": np.array([0.1, -2.7, 4.5]),
        "float16 array": np.array([0.1, -2.7, 4.5], np.float16),
        "tensor": tf.constant([0.1, -2.7], tf.bfloat16),
    }
    for kind, value in inputs.items():
        as_tensor = tf.convert_to_tensor(value)
        y = op_case.apply(value)
        expected = as_tensor if op_case.identity else op_case.apply(as_tensor)
        assert isinstance(y, tf.Tensor), kind
        assert_bitwise(y, expected)
        assert y.dtype == as_tensor.dtype, kind


def test_unknown_static_shape(op_case, forward_and_gradient, assert_close):
    spec = tf.TensorSpec(shape=None, dtype=tf.float32)

    @tf.function(input_signature=[spec, spec])
    def run(x, dy):
        return forward_and_gradient(op_case.apply, x, dy)

    x, dy = tf.constant(X), tf.constant(DY)
    y, grad = run(x, dy)
    assert y.shape == x.shape
    assert_close(grad, op_case.gradient(x.numpy().astype(np.float64), np.array(DY)), "float32")


def test_scalar_and_empty_inputs(op_case, forward_and_gradient):
    for x in (tf.constant(0.75), tf.zeros([0, 3])):
        y, grad = forward_and_gradient(op_case.apply, x, tf.ones_like(x))
        assert y.shape == x.shape and grad.shape == x.shape
        assert not np.any(np.isnan(grad.numpy()))


# ------------------------------------------------------------------------------------------------
# Hyperparameters: Python floats at full precision, tf.Variables read without retracing
# ------------------------------------------------------------------------------------------------

X64 = tf.constant([0.05, -0.2, 0.27, 1.0], tf.float64)
DY64 = tf.constant([0.5, -0.04, 0.2, -0.7], tf.float64)

# (op with a parameter 0.1 or 0.3 that float32 cannot hold exactly, the float64 definition)
FULL_PRECISION_CASES = {
    "scale_gradient": (lambda x: gradlab.scale_gradient(x, 0.1), lambda x, dy: dy * 0.1),
    "reverse_gradient": (lambda x: gradlab.reverse_gradient(x, 0.1), lambda x, dy: -(dy * 0.1)),
    "clip_gradient": (
        lambda x: gradlab.clip_gradient(x, -0.1, 0.3),
        lambda x, dy: np.clip(dy, -0.1, 0.3),
    ),
    "clip_gradient_norm": (
        lambda x: gradlab.clip_gradient_norm(x, 0.3),
        lambda x, dy: dy * (0.3 / np.linalg.norm(dy)),
    ),
    "surrogate_step": (
        lambda x: gradlab.surrogate_step(x, 0.3),
        lambda x, dy: dy * np.maximum(0.0, 1.0 - np.abs(x) / 0.3),
    ),
}


@pytest.mark.parametrize("case", FULL_PRECISION_CASES, ids=str)
def test_python_float_parameters_keep_float64_precision(
    case, mode, run_in_mode, forward_and_gradient
):
    """A Python float parameter is rounded once to the dtype, not through float32 first."""
    apply, definition = FULL_PRECISION_CASES[case]
    _, grad = run_in_mode(lambda a, b: forward_and_gradient(apply, a, b))(X64, DY64)
    expected = definition(X64.numpy(), DY64.numpy())
    # float32 rounding of 0.1 or 0.3 would be off by ~1e-8 relative; allow only float64 round-off.
    np.testing.assert_allclose(grad.numpy(), expected, rtol=4e-16, atol=0)


# (parameter, op using the variable v, the gradient for value val, first value, second value)
VARIABLE_CASES = {
    "scale_gradient.factor": (
        lambda x, v: gradlab.scale_gradient(x, v),
        lambda dy, val: val * dy,
        0.5,
        -3.0,
    ),
    "clip_gradient.clip_max": (
        lambda x, v: gradlab.clip_gradient(x, -1.0, v),
        lambda dy, val: np.clip(dy, -1.0, val),
        0.25,
        2.0,
    ),
    "clip_gradient.clip_min": (
        lambda x, v: gradlab.clip_gradient(x, v, 1.0),
        lambda dy, val: np.clip(dy, val, 1.0),
        -0.25,
        -2.0,
    ),
    "clip_gradient_norm.max_norm": (
        lambda x, v: gradlab.clip_gradient_norm(x, v),
        lambda dy, val: dy * min(1.0, val / np.linalg.norm(dy)),
        1.0,
        0.5,
    ),
    "reverse_gradient.factor": (
        lambda x, v: gradlab.reverse_gradient(x, v),
        lambda dy, val: -val * dy,
        1.0,
        0.25,
    ),
    "surrogate_step.width": (
        lambda x, v: gradlab.surrogate_step(x, v),
        lambda dy, val: dy * np.maximum(0.0, 1.0 - np.abs([0.5, -1.0, 1.5]) / val),
        1.0,
        2.0,
    ),
    "map_gradient.fn": (
        lambda x, v: gradlab.map_gradient(x, lambda dy: dy * v),
        lambda dy, val: val * dy,
        2.0,
        -1.0,
    ),
}


@pytest.mark.parametrize("case", VARIABLE_CASES, ids=str)
def test_variable_parameter_is_honoured_without_retracing(
    case, mode, run_in_mode, forward_and_gradient
):
    apply, definition, first, second = VARIABLE_CASES[case]
    variable = tf.Variable(first, dtype=tf.float32)
    x, dy = tf.constant([0.5, -1.0, 1.5]), tf.constant([0.8, -1.5, 3.0])
    run = run_in_mode(lambda a, b: forward_and_gradient(lambda t: apply(t, variable), a, b))

    for value in (first, second, first):
        variable.assign(value)
        y, grad = run(x, dy)
        if not case.startswith("surrogate_step"):
            np.testing.assert_array_equal(y.numpy(), x.numpy())
        np.testing.assert_allclose(
            grad.numpy(), definition(dy.numpy().astype(np.float64), value), rtol=1e-6
        )
    if mode != "eager":
        assert run.experimental_get_tracing_count() == 1


def test_variable_is_read_in_the_forward_pass():
    """Deliberately the value at the forward pass (issue 30), as TensorFlow's gradient of
    ``v * x`` uses it: reading the variable in the backward pass breaks inside tf.cond and
    tf.while_loop (tests/library/test_variables_in_control_flow.py). Between steps it is read afresh
    (test_variable_parameter_is_honoured_without_retracing)."""
    factor = tf.Variable(2.0)
    x = tf.constant([1.0, -1.0])
    with tf.GradientTape() as tape:
        tape.watch(x)
        y = gradlab.scale_gradient(x, factor)
    factor.assign(7.0)  # after the forward pass, before the backward pass
    np.testing.assert_array_equal(tape.gradient(y, x).numpy(), [2.0, 2.0])


# ------------------------------------------------------------------------------------------------
# clip_gradient_norm: the source material's table
# ------------------------------------------------------------------------------------------------


def test_clip_gradient_norm_reproduces_the_source_table(mode, run_in_mode):
    def gradients(x, y):
        with tf.GradientTape(persistent=True) as tape:
            tape.watch(x)
            plain = tf.reduce_sum(tf.matmul(x, y))
            clipped_inputs = tf.reduce_sum(
                tf.matmul(gradlab.clip_gradient_norm(x, 1.0), gradlab.clip_gradient_norm(y, 0.5))
            )
            clipped_product = tf.reduce_sum(
                tf.matmul(gradlab.clip_gradient_norm(tf.matmul(x, y), 1.0), y)
            )
        return [tape.gradient(loss, x) for loss in (plain, clipped_inputs, clipped_product)]

    x = tf.constant([[1.0, 2.0], [3.0, 4.0]])
    y = tf.constant([[1.0, 2.0], [3.0, 4.0]])  # equal values, a separate input (as in the source)
    plain, clipped_inputs, clipped_product = run_in_mode(gradients)(x, y)
    np.testing.assert_array_equal(plain.numpy(), [[3.0, 7.0], [3.0, 7.0]])
    np.testing.assert_allclose(clipped_inputs.numpy(), [[0.278543, 0.6499337]] * 2, atol=1e-6)
    np.testing.assert_allclose(clipped_product.numpy(), [[1.57841039, 3.43536377]] * 2, atol=1e-6)


def test_clip_gradient_norm_clips_the_whole_tensor_not_each_row():
    x = tf.zeros([2, 2])
    dy = tf.constant([[3.0, 4.0], [0.0, 0.0]])  # row norms 5 and 0, total norm 5
    with tf.GradientTape() as tape:
        tape.watch(x)
        y = gradlab.clip_gradient_norm(x, 1.0)
    np.testing.assert_allclose(
        tape.gradient(y, x, output_gradients=dy).numpy(), [[0.6, 0.8], [0.0, 0.0]]
    )


def test_clip_gradient_norm_large_half_precision_gradients(
    mode, run_in_mode, dtype, forward_and_gradient
):
    """In float16, 300**2 + 400**2 overflows; the clipped gradient must not collapse to zeros."""
    dy = tf.constant([[300.0, 400.0], [0.0, 0.0]], dtype)
    _, grad = run_in_mode(
        lambda x, u: forward_and_gradient(lambda t: gradlab.clip_gradient_norm(t, 1.0), x, u)
    )(tf.zeros([2, 2], dtype), dy)
    assert grad.dtype == dtype
    np.testing.assert_allclose(grad.numpy().astype(np.float64), [[0.6, 0.8], [0.0, 0.0]], rtol=1e-2)


@pytest.mark.parametrize("max_norm", [10.0, 1.0], ids=["norm below max_norm", "clipped"])
def test_clip_gradient_norm_computes_a_float64_gradient_in_float64(
    max_norm, mode, run_in_mode, forward_and_gradient
):
    """A float64 gradient is never rounded through float32 (norm of dy ~2.29)."""
    dy = np.array([[1.0 + 2.0**-40, -2.0], [0.5, 1e-300]])  # float32 makes 1 and 0 of two of them
    _, grad = run_in_mode(
        lambda x, u: forward_and_gradient(lambda t: gradlab.clip_gradient_norm(t, max_norm), x, u)
    )(tf.zeros([2, 2], tf.float64), tf.constant(dy))
    assert grad.dtype == tf.float64
    expected = dy * min(1.0, max_norm / np.linalg.norm(dy))
    # float32 would be off by 9e-13 relative in the first element and lose the last one entirely
    np.testing.assert_allclose(grad.numpy(), expected, rtol=4e-16, atol=0)


# ------------------------------------------------------------------------------------------------
# straight_through
# ------------------------------------------------------------------------------------------------

#: Per dtype, a backward value so large that backward + (forward - backward) rounds away forward.
LARGE = {"float16": 1e4, "bfloat16": 1e4, "float32": 1e8, "float64": 1e17}


def test_straight_through_is_bitwise_where_the_stop_gradient_trick_is_not(
    mode, dtype, run_in_mode, assert_bitwise
):
    forward = tf.constant([3.0, 2.0, 0.5], dtype)
    backward = tf.constant([LARGE[dtype.name], np.inf, 0.25], dtype)

    def both(f, b):
        return b + tf.stop_gradient(f - b), gradlab.straight_through(f, b)

    trick, exact = run_in_mode(both)(forward, backward)
    assert_bitwise(exact, forward)
    trick = trick.numpy().astype(np.float64)
    # Rounded away: large + (3 - large) == 0 in this dtype. XLA before TF 2.17 may keep a bfloat16
    # intermediate in float32 and get 3 back, so the trick's failure there depends on the version;
    # straight_through's exactness (above) does not.
    if not (mode == "xla" and dtype == tf.bfloat16 and tf.__version__ < "2.17"):
        assert trick[0] != 3.0
    assert np.isnan(trick[1])  # inf + (2 - inf) = inf - inf = nan
    assert trick[2] == 0.5  # and for ordinary inputs the trick happens to be exact


def test_straight_through_gradient_flows_through_backward_only(mode, run_in_mode):
    def gradients(x1, x2, dy):
        with tf.GradientTape(persistent=True) as tape:
            tape.watch([x1, x2])
            f = 3.0 * x1
            y = gradlab.straight_through(f, x2 * x2)
            same = gradlab.straight_through(3.0 * x1, x1 * x1)  # both from one variable
        return (
            tape.gradient(y, x1, output_gradients=dy),
            tape.gradient(y, x2, output_gradients=dy),
            tape.gradient(y, f, output_gradients=dy),
            tape.gradient(same, x1, output_gradients=dy),
        )

    x1, x2, dy = tf.constant([0.5, -2.0]), tf.constant([1.5, 4.0]), tf.constant([1.0, -0.5])
    d_x1, d_x2, d_f, d_same = run_in_mode(gradients)(x1, x2, dy)
    assert d_x1 is None and d_f is None  # the forward value gets no gradient
    np.testing.assert_allclose(d_x2.numpy(), 2 * x2.numpy() * dy.numpy())  # as through x2 * x2
    np.testing.assert_allclose(d_same.numpy(), 2 * x1.numpy() * dy.numpy())  # not 3 + 2 * x1


# ------------------------------------------------------------------------------------------------
# surrogate_step, map_gradient, the chain rule
# ------------------------------------------------------------------------------------------------


def test_surrogate_step_gradient_scales_with_upstream_and_vanishes_outside_width(
    forward_and_gradient,
):
    x = tf.constant([-3.0, -2.0, -1.0, 0.0, 1.0, 2.0, 3.0])
    apply = lambda t: gradlab.surrogate_step(t, 2.0)  # noqa: E731
    _, unit = forward_and_gradient(apply, x, tf.ones_like(x))
    _, scaled = forward_and_gradient(apply, x, 5.0 * tf.ones_like(x))
    np.testing.assert_array_equal(unit.numpy(), [0.0, 0.0, 0.5, 1.0, 0.5, 0.0, 0.0])
    np.testing.assert_array_equal(
        scaled.numpy(), 5.0 * unit.numpy()
    )  # the source's example forgot dy


def test_map_gradient_returning_none_stops_the_gradient(mode, run_in_mode, forward_and_gradient):
    x = tf.constant([1.0, 2.0])
    y, grad = run_in_mode(
        lambda t: forward_and_gradient(lambda u: gradlab.map_gradient(u, lambda dy: None), t, None)
    )(x)
    np.testing.assert_array_equal(y.numpy(), x.numpy())
    assert grad is None


def test_gradient_is_modified_once_and_the_chain_rule_goes_on(mode, run_in_mode):
    """Clipping mid-chain: earlier ops receive the clipped gradient, and it is not clipped again."""

    def gradient(x):
        with tf.GradientTape() as tape:
            tape.watch(x)
            loss = 10.0 * gradlab.clip_gradient(2.0 * x, -0.1, 0.1)
        return tape.gradient(loss, x)

    # d(loss)/d(2x) = 10, clipped to 0.1; then times d(2x)/dx = 2 -> 0.2 (not clipped to 0.1 again)
    np.testing.assert_allclose(run_in_mode(gradient)(tf.constant([1.0, -4.0])).numpy(), [0.2, 0.2])


def test_scale_gradient_matches_the_readme_example():
    x = tf.constant(3.0)
    with tf.GradientTape() as tape:
        tape.watch(x)
        y = gradlab.scale_gradient(x, 5.0) ** 2
    assert float(y) == 9.0 and float(tape.gradient(y, x)) == 30.0


# ------------------------------------------------------------------------------------------------
# clip_gradient_norm is dy * min(1, m / ||dy||) as written (issue 30)
# ------------------------------------------------------------------------------------------------


def _gradient(apply, x, dy, mode):
    def run(x, dy):
        with tf.GradientTape() as tape:
            tape.watch(x)
            y = apply(x)
        return tape.gradient(y, x, output_gradients=dy)

    return _wrap(run, mode)(x, dy)


def _wrap(fn, mode):
    return fn if mode == "eager" else tf.function(fn, jit_compile=(mode == "xla"))


@pytest.mark.parametrize("dtype", ["float16", "bfloat16", "float32", "float64"])
def test_clip_gradient_norm_leaves_a_gradient_within_the_bound_bitwise(dtype, mode, assert_bitwise):
    """Norm 31 with max_norm 100 changed 143 of 1,000 elements by one ulp (tf.clip_by_norm's
    dy * m / max(norm, m)); optax and PyTorch leave it alone, and so does the formula."""
    rng = np.random.default_rng(0)
    dy = rng.standard_normal(1000)
    dy = (dy * (31.0 / np.linalg.norm(dy))).astype(tf.as_dtype(dtype).as_numpy_dtype)
    x = tf.zeros([1000], dtype)
    grad = _gradient(lambda t: gradlab.clip_gradient_norm(t, 100.0), x, tf.constant(dy), mode)
    assert_bitwise(grad, dy)
    on_the_bound = tf.constant([3.0, -4.0], dtype)  # norm exactly 5
    grad = _gradient(lambda t: gradlab.clip_gradient_norm(t, 5.0), tf.zeros([2], dtype), on_the_bound, mode)
    assert_bitwise(grad, on_the_bound)


@pytest.mark.parametrize("max_norm", [1e38, 1e39, 1e300, sys.float_info.max], ids=str)
@pytest.mark.parametrize("dtype", ["float16", "float32"])
def test_clip_gradient_norm_accepts_any_finite_max_norm(max_norm, dtype, mode, assert_bitwise):
    """max_norm = 1e38 gave [3, inf] for dy = [3, 4] (tf.clip_by_norm multiplies by max_norm
    first) and 1e39 or sys.float_info.max gave NaN: the ratio is formed in float64."""
    dy = tf.constant([3.0, 4.0], dtype)
    grad = _gradient(lambda t: gradlab.clip_gradient_norm(t, max_norm), tf.zeros([2], dtype), dy, mode)
    assert_bitwise(grad, dy)


@pytest.mark.parametrize(
    "dtype, scale",
    [("float32", 1e19), ("float32", 1e-30), ("bfloat16", 1e30), ("bfloat16", 1e-30),
     ("float16", 1e3), ("float16", 1e-3), ("float64", 1e160), ("float64", 1e-170)],
    ids=str,
)
def test_clip_gradient_norm_neither_overflows_nor_underflows(dtype, scale, mode):
    """[3e19, 4e19] in float32 has norm 5e19, but its sum of squares is inf, and tf.clip_by_norm
    sent back zeros; [3e-30, 4e-30]'s squares underflow to 0, and it was not clipped at all.
    The norm is scaled by the largest element."""
    dy = tf.constant([3.0 * scale, -4.0 * scale], dtype)
    max_norm = 2.5 * scale  # half the norm: the exact result is dy / 2
    grad = _gradient(lambda t: gradlab.clip_gradient_norm(t, max_norm), tf.zeros([2], dtype), dy, mode)
    expected = np.array([1.5 * scale, -2.0 * scale])
    np.testing.assert_allclose(grad.numpy().astype(np.float64), expected, rtol=1e-2 if dtype in (
        "float16", "bfloat16") else 1e-6)


def test_clip_gradient_norm_rounds_like_the_formula():
    """Above the bound each element is dy times the factor m / ||dy|| rounded to float32."""
    rng = np.random.default_rng(1)
    dy = rng.standard_normal(1000).astype(np.float32) * 3
    grad = _gradient(lambda t: gradlab.clip_gradient_norm(t, 1.0), tf.zeros([1000]), tf.constant(dy), "eager")
    factor = np.float32(1.0 / np.linalg.norm(dy.astype(np.float64)))
    ratio = grad.numpy() / dy
    # one factor for every element, within an ulp of the exact one (the norm's own rounding)
    assert np.unique(grad.numpy() / dy).size <= 3
    np.testing.assert_allclose(ratio, factor, rtol=3e-7)


# ------------------------------------------------------------------------------------------------
# Half precision: parameters are not rounded to float16 before the arithmetic (issue 30)
# ------------------------------------------------------------------------------------------------


@pytest.mark.parametrize("dtype", ["float16", "bfloat16"])
@pytest.mark.parametrize("op, sign", [(gradlab.scale_gradient, 1.0), (gradlab.reverse_gradient, -1.0)],
                         ids=["scale_gradient", "reverse_gradient"])
def test_a_small_factor_scales_a_half_precision_gradient_in_float32(op, sign, dtype, mode, assert_bitwise):
    """scale_gradient(float16, 1e-6) rounded the factor to the float16 subnormal 1.013e-6 first
    (4.6 % off). Now the product is formed in float32 and rounded once."""
    np_dtype = tf.as_dtype(dtype).as_numpy_dtype
    dy = np.array([1000.0, -3.0, 0.5, 60000.0 if dtype == "float16" else 1e30], np_dtype)
    grad = _gradient(lambda t: op(t, 1e-6), tf.zeros([4], dtype), tf.constant(dy), mode)
    expected = (dy.astype(np.float32) * np.float32(sign * 1e-6)).astype(np_dtype)
    assert_bitwise(grad, expected)
    np.testing.assert_allclose(grad.numpy().astype(np.float64)[0], sign * 1e-3, rtol=1e-3)


def test_scaling_a_sparse_half_precision_gradient_is_rounded_once():
    x = tf.constant([1.0, 2.0, 3.0], tf.float16)
    with tf.GradientTape() as tape:
        tape.watch(x)
        y = tf.gather(gradlab.scale_gradient(x, 1e-6), [0, 2, 0])
    grad = tape.gradient(y, x, output_gradients=tf.constant([1000.0, 1000.0, 1000.0], tf.float16))
    assert isinstance(grad, tf.IndexedSlices)
    np.testing.assert_array_equal(tf.convert_to_tensor(grad).numpy(),
                                  np.array([2e-3, 0.0, 1e-3], np.float32).astype(np.float16))


@pytest.mark.parametrize("dtype", ["float16", "bfloat16"])
def test_a_narrow_surrogate_in_half_precision_is_not_nan(dtype, mode):
    """surrogate_step(float16, width=1e-8) gave NaN: the width rounded to 0 in float16."""
    x = tf.constant([0.0, 6e-8, -1e-3], dtype)
    grad = _gradient(lambda t: gradlab.surrogate_step(t, width=1e-8), x, tf.ones([3], dtype), mode)
    np.testing.assert_array_equal(grad.numpy().astype(np.float32), [1.0, 0.0, 0.0])


@pytest.mark.parametrize("dtype", ["float16", "bfloat16", "float32", "float64"])
def test_clip_gradient_with_bounds_beyond_the_dtype_is_the_exact_clip_rounded_once(dtype, mode):
    """Documented: rounding is monotone, so clipping to the rounded bounds is the exact clip
    rounded once, even for bounds the dtype cannot hold (1e5 in float16 is inf: no bound)."""
    np_dtype = tf.as_dtype(dtype).as_numpy_dtype
    rng = np.random.default_rng(2)
    dy = (rng.standard_normal(64) * 1e3).astype(np_dtype)
    for low, high in [(-1e5, 1e5), (-1e-6, 3e-7), (-0.1, 1e40), (1e-9, 1e-8)]:
        grad = _gradient(lambda t: gradlab.clip_gradient(t, low, high), tf.zeros([64], dtype),
                         tf.constant(dy), mode)
        expected = np.clip(dy.astype(np.float64), low, high).astype(np_dtype)
        np.testing.assert_array_equal(grad.numpy(), expected)


@pytest.mark.parametrize(
    "call, message",
    [
        (lambda: gradlab.scale_gradient(tf.zeros([2]), 1e-40), r"factor=1e-40 cannot be represented in float32"),
        (lambda: gradlab.scale_gradient(tf.zeros([2], tf.float16), 1e39), r"factor=1e\+39 .* float32"),
        (lambda: gradlab.reverse_gradient(tf.zeros([2], tf.bfloat16), -1e-45), r"factor=-1e-45 .* float32"),
        (lambda: gradlab.surrogate_step(tf.zeros([2]), 1e-39), r"width=1e-39 .* float32"),
        (lambda: gradlab.surrogate_step(tf.zeros([2], tf.float64), 1e-310), r"width=1e-310 .* float64"),
        (lambda: gradlab.scale_gradient(tf.zeros([2]), tf.constant(1e-40, tf.float64)), r"factor=1e-40"),
    ],
    ids=["float32 tiny", "float16 huge", "bfloat16 tiny", "width float32", "width float64", "tensor"],
)
def test_a_parameter_the_computation_cannot_represent_is_refused(call, message):
    with pytest.raises(ValueError, match=message + r".*smallest|" + message):
        call()


def test_representable_parameters_of_every_size_are_accepted():
    for dtype, factor in [(tf.float16, 1e-30), (tf.bfloat16, 1e30), (tf.float32, 2e-38),
                          (tf.float64, 1e-300), (tf.float64, 1e300), (tf.float32, 0.0)]:
        x = tf.ones([2], dtype)
        with tf.GradientTape() as tape:
            tape.watch(x)
            y = gradlab.scale_gradient(x, factor)
        grad = tape.gradient(y, x, output_gradients=tf.ones([2], dtype))
        compute = np.float64 if dtype == tf.float64 else np.float32
        expected = np.full(2, compute(factor)).astype(dtype.as_numpy_dtype)  # rounded once
        np.testing.assert_array_equal(grad.numpy(), expected)


@pytest.mark.parametrize("mode_", ["eager", "function"])
def test_a_variable_the_computation_cannot_represent_is_refused_when_the_gradient_runs(mode_):
    factor = tf.Variable(1e-40, dtype=tf.float64)
    x = tf.ones([2])
    run = _wrap(lambda x: _gradient(lambda t: gradlab.scale_gradient(t, factor), x, tf.ones([2]), "eager"),
                mode_)
    error = ValueError if mode_ == "eager" else tf.errors.InvalidArgumentError
    with pytest.raises(error, match=r"factor.*(cannot be represented in float32|normal float32 number)"):
        run(x)
    factor.assign(1e-3)
    np.testing.assert_allclose(run(x).numpy(), [1e-3, 1e-3], rtol=1e-7)


# ------------------------------------------------------------------------------------------------
# map_gradient checks fn's shape in graphs with unknown dimensions (issue 30)
# ------------------------------------------------------------------------------------------------


def _batch_sum(dy):
    return tf.reduce_sum(dy, axis=0, keepdims=True)  # shape (1, 3): not a gradient of (n, 3)


@pytest.mark.parametrize("jit_compile", [False, True], ids=["tf.function", "xla"])
def test_map_gradient_refuses_a_wrong_shape_with_an_unknown_batch_dimension(jit_compile):
    """Inside tf.function(input_signature=[None, 3]) a (1, 3) result was compatible with the
    static (None, 3) and came back as the gradient of a (4, 3) input; eagerly it raised. XLA
    drops assert ops; there a result smaller than dy fails to compile (a larger one is cut to dy's
    shape: a documented LIMITATION, tested below)."""

    @tf.function(input_signature=[tf.TensorSpec([None, 3])], jit_compile=jit_compile)
    def gradient(x):
        with tf.GradientTape() as tape:
            tape.watch(x)
            y = gradlab.map_gradient(x, _batch_sum)
        return tape.gradient(y, x)

    if jit_compile:
        with pytest.raises(tf.errors.InvalidArgumentError, match=r"Expected size\[0\]"):
            gradient(tf.ones([4, 3]))
    else:
        with pytest.raises(tf.errors.InvalidArgumentError,
                           match=r"fn must return the shape of the upstream gradient.*\[4 3\] \[1 3\]"):
            gradient(tf.ones([4, 3]))
    with pytest.raises(ValueError, match=r"fn must return the upstream gradient's shape \(4, 3\)"):
        _gradient(lambda t: gradlab.map_gradient(t, _batch_sum), tf.ones([4, 3]), tf.ones([4, 3]), "eager")


def test_under_xla_a_larger_result_with_unknown_dimensions_is_cut_to_the_upstream_shape():
    """LIMITATION (XLA drops assert ops), documented in map_gradient."""

    @tf.function(input_signature=[tf.TensorSpec([None, 3])], jit_compile=True)
    def gradient(x):
        with tf.GradientTape() as tape:
            tape.watch(x)
            y = gradlab.map_gradient(x, lambda dy: tf.concat([dy, dy], axis=0))
        return tape.gradient(y, x)

    assert gradient(tf.ones([2, 3])).shape == (2, 3)
    with pytest.raises(tf.errors.InvalidArgumentError, match=r"fn must return the shape of the upstream gradient"):
        tf.function(gradient.python_function, input_signature=[tf.TensorSpec([None, 3])])(tf.ones([2, 3]))


def test_map_gradient_shape_check_fires_before_grappler_can_fold_a_wrong_shape():
    """The check only asserts: ops downstream (a MatMul here) see the error, not a folded shape."""
    kernel, head = tf.Variable(tf.ones([3, 3])), tf.Variable(tf.ones([3, 1]))

    @tf.function(input_signature=[tf.TensorSpec([None, 3])])
    def gradients(x):
        with tf.GradientTape() as tape:
            h = gradlab.map_gradient(x @ kernel, _batch_sum)
            loss = tf.reduce_sum(h @ head)
        return tape.gradient(loss, [kernel, head])

    with pytest.raises(tf.errors.InvalidArgumentError, match=r"fn must return the shape of the upstream gradient"):
        gradients(tf.ones([4, 3]))


def test_map_gradient_refuses_a_wrong_rank_of_unknown_static_rank():
    @tf.function(input_signature=[tf.TensorSpec(None)])
    def gradient(x):
        with tf.GradientTape() as tape:
            tape.watch(x)
            y = gradlab.map_gradient(x, lambda dy: tf.reshape(dy, [-1]))
        return tape.gradient(y, x)

    with pytest.raises(tf.errors.InvalidArgumentError, match=r"fn must return the shape of the upstream gradient"):
        gradient(tf.ones([2, 3]))
    np.testing.assert_array_equal(gradient(tf.ones([6])).numpy(), np.ones(6))


def test_map_gradient_with_the_right_shape_and_an_unknown_batch_still_works():
    @tf.function(input_signature=[tf.TensorSpec([None, 3])])
    def gradient(x):
        with tf.GradientTape() as tape:
            tape.watch(x)
            y = gradlab.map_gradient(x, lambda dy: 2.0 * dy)
        return tape.gradient(y, x)

    grad = gradient(tf.ones([4, 3]))
    np.testing.assert_array_equal(grad.numpy(), np.full([4, 3], 2.0, np.float32))


@pytest.mark.parametrize("jit_compile", [False, True], ids=["tf.function", "xla"])
def test_map_gradient_with_a_wrong_shape_fails_in_keras_fit(jit_compile):
    """fit traces with an unknown batch dimension. Without XLA gradlab's check names the
    problem; under XLA (which drops it) the slice to dy's shape fails to compile."""
    import keras

    class BatchSum(keras.layers.Layer):
        def call(self, inputs):
            return gradlab.map_gradient(inputs, _batch_sum)

    model = keras.Sequential([keras.Input((3,)), keras.layers.Dense(3), BatchSum(), keras.layers.Dense(1)])
    model.compile("sgd", "mse", jit_compile=jit_compile)
    message = r"Expected size\[0\]" if jit_compile else r"fn must return the shape of the upstream gradient"
    with pytest.raises(tf.errors.InvalidArgumentError, match=message):
        model.fit(np.ones([10, 3], np.float32), np.ones([10, 1], np.float32), batch_size=4, verbose=0)
