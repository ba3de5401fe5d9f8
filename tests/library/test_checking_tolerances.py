"""check_gradient's verdict is scale-free, works in half precision, and has an O(1) fast mode.

Issue 30: a sign-flipped or zero gradient of a small function passed (the tolerance was absolute),
correct float16/bfloat16 gradients failed (finite differences were taken in half precision), and a
check costs two calls of ``fn`` per input element.
"""

from __future__ import annotations

import keras
import numpy as np
import pytest
import tensorflow as tf

import gradlab

X32 = tf.constant(np.random.default_rng(0).standard_normal(64), tf.float32)
X64 = tf.cast(X32, tf.float64)


def sin_with(kind: str):
    """sin with a custom gradient that is right, sign-flipped, zero or twice too large."""
    @tf.custom_gradient
    def op(t):
        def grad(dy):
            factor = {"right": 1.0, "flipped": -1.0, "zero": 0.0, "double": 2.0}[kind]
            return dy * factor * tf.cos(t)
        return tf.sin(t), grad
    return op


def mean_of(op):
    return lambda t: tf.reduce_mean(op(t))


def _modes(fn):
    """fn eagerly, in a tf.function and compiled with XLA."""
    return {"eager": fn, "function": tf.function(fn), "xla": tf.function(fn, jit_compile=True)}


# --- the verdict is scale-free --------------------------------------------------------------------


@pytest.mark.parametrize("mode", ["eager", "function", "xla"])
@pytest.mark.parametrize("kind", ["flipped", "zero", "double"])
def test_a_wrong_gradient_of_a_mean_fails_in_float32(kind, mode):
    """Issue 30: every element of the true gradient (~1/64) is below the float32 default atol
    (2e-2), so an absolute tolerance passed a sign-flipped or zero gradient."""
    fn = _modes(mean_of(sin_with(kind)))[mode]
    result = gradlab.check_gradient(fn, X32)
    assert not result.ok, result.message
    assert result.message.startswith("FAILED")
    assert np.abs(result.reference).max() < 2e-2  # the gradient is indeed below the old atol


@pytest.mark.parametrize("mode", ["eager", "function", "xla"])
def test_a_right_gradient_of_a_mean_passes_in_float32(mode):
    fn = _modes(mean_of(sin_with("right")))[mode]
    result = gradlab.check_gradient(fn, X32)
    assert result.ok, result.message
    assert result.evaluated_in == "float64" and "finite differences in float64" in result.message


@pytest.mark.parametrize("scale", [1e-6, 1.0, 1e6])
@pytest.mark.parametrize("kind, ok", [("right", True), ("flipped", False), ("zero", False), ("double", False)])
@pytest.mark.parametrize("dtype", [tf.float64, tf.float32])
def test_the_verdict_does_not_depend_on_the_size_of_the_gradient(scale, kind, ok, dtype):
    """Issue 30: in float64, 1e-6 * op(t) with a sign-flipped gradient passed (atol 1e-5)."""
    op = sin_with(kind)
    x = tf.cast(X64[:8], dtype)
    result = gradlab.check_gradient(lambda t: scale * op(t), x)
    assert result.ok is ok, result.message


def test_a_small_correct_gradient_passes_and_its_error_is_on_its_own_scale():
    result = gradlab.check_gradient(lambda t: 1e-9 * tf.sin(t), X64[:8])
    assert result.ok, result.message
    assert result.max_error < 1e-9 * 1e-5


def test_a_zero_autodiff_gradient_is_named():
    result = gradlab.check_gradient(sin_with("zero"), X64[:8])
    assert not result.ok and "zero everywhere" in result.message


@pytest.mark.parametrize("fn", [lambda t: tf.nn.relu(-tf.abs(t) - 1.0),    # zero value, zero gradient
                                lambda t: tf.ones_like(t) * 3.0,          # a constant
                                tf.round],                                # piecewise constant
                         ids=["relu off", "constant", "round"])
def test_an_exactly_zero_gradient_passes(fn):
    result = gradlab.check_gradient(fn, tf.constant([0.3, -1.2, 2.2], tf.float64))
    assert result.ok, result.message
    assert not result.autodiff.any() and not result.reference.any()


@pytest.mark.parametrize("kind", ["right", "flipped"])
def test_a_gradient_below_the_resolution_of_finite_differences_is_inconclusive(kind):
    """1e8 + 1e-8 sin(x): finite differences see rounding noise only, so a sign-flipped gradient
    would pass as well as the right one; the check must not say ok."""
    op = sin_with(kind)
    result = gradlab.check_gradient(lambda t: 1e8 + 1e-8 * op(t), X64[:4])
    assert not result.ok
    assert result.message.startswith("FAILED: inconclusive") and "larger delta" in result.message
    # a gradient above the noise is checked, the noise being allowed for
    resolved = gradlab.check_gradient(lambda t: 1e8 + 1e-2 * op(t), X64[:4])
    assert resolved.ok is (kind == "right"), resolved.message


def test_order_2_is_scale_free_too():
    @tf.custom_gradient
    def wrong_second(t):   # right first derivative, sign-flipped second derivative
        def grad(dy):
            return dy * (tf.cos(t) + 2.0 * tf.sin(t) * (t - tf.stop_gradient(t)))  # d/dt: +sin
        return tf.sin(t), grad

    right = gradlab.check_gradient(lambda t: 1e-7 * tf.sin(t), X64[:6], order=2)
    assert right.ok, right.message
    wrong = gradlab.check_gradient(lambda t: 1e-7 * wrong_second(t), X64[:6], order=2)
    assert gradlab.check_gradient(lambda t: 1e-7 * wrong_second(t), X64[:6]).ok
    assert not wrong.ok and wrong.message.startswith("FAILED at order 2"), wrong.message


# --- half precision -------------------------------------------------------------------------------

HALF = [tf.float16, tf.bfloat16]
POINTS = [0.5, -1.0, 2.0, 3.1, -7.25]


@pytest.mark.parametrize("dtype", HALF, ids=lambda d: d.name)
@pytest.mark.parametrize("fn", [tf.identity, lambda t: 3 * t, tf.sin, lambda t: tf.reduce_sum(t * t)],
                         ids=["identity", "3x", "sin", "sum of squares"])
def test_a_correct_half_precision_gradient_passes(dtype, fn):
    """Issue 30: tf.identity and 3 * x failed in float16 (max abs error 0.29) and bfloat16 (3.8;
    bfloat16 finite differences of 3x were all zeros)."""
    result = gradlab.check_gradient(fn, tf.constant(POINTS, dtype))
    assert result.ok, result.message
    assert result.evaluated_in == "float64"
    assert result.reference.any()


@pytest.mark.parametrize("dtype", HALF, ids=lambda d: d.name)
@pytest.mark.parametrize("kind", ["flipped", "zero", "double"])
def test_a_wrong_half_precision_gradient_fails(dtype, kind):
    result = gradlab.check_gradient(sin_with(kind), tf.constant(POINTS, dtype))
    assert not result.ok, result.message


def _stays_in(dtype):
    """3 x computed in ``dtype`` whatever the input's dtype (as a layer with a fixed policy does)."""
    return lambda t: 3 * tf.cast(t, dtype)


@pytest.mark.parametrize("dtype", HALF, ids=lambda d: d.name)
def test_a_function_that_refuses_wider_inputs_is_differenced_in_its_own_dtype(dtype):
    x = tf.constant(POINTS, dtype)
    result = gradlab.check_gradient(_stays_in(dtype), x)
    assert result.ok, result.message
    assert result.evaluated_in == dtype.name
    np.testing.assert_allclose(result.reference, result.autodiff, rtol=0.05)
    assert not gradlab.check_gradient(lambda t: -_stays_in(dtype)(t) + 2 * tf.stop_gradient(_stays_in(dtype)(t)),
                                      x).ok


def test_a_keras_layer_with_a_float16_policy_is_checked_in_float16():
    layer = keras.layers.Dense(3, dtype="float16", kernel_initializer="glorot_uniform")
    x = tf.constant(np.random.default_rng(1).standard_normal((2, 4)), tf.float16)
    result = gradlab.check_gradient(lambda t: tf.tanh(layer(t)), x)
    assert result.evaluated_in == "float16"
    assert result.ok, result.message


def test_a_float32_keras_layer_given_float16_is_differenced_in_float32():
    layer = keras.layers.Dense(3)
    x = tf.constant(np.random.default_rng(2).standard_normal((2, 4)), tf.float16)
    result = gradlab.check_gradient(lambda t: layer(t), x)
    assert result.evaluated_in == "float32" and result.ok, result.message


def test_a_delta_the_dtype_cannot_represent_is_refused():
    with pytest.raises(ValueError, match=r"delta=1e-06 is too small for bfloat16 .*rounds to x.*larger delta"):
        gradlab.check_gradient(_stays_in(tf.bfloat16), tf.constant(POINTS, tf.bfloat16), delta=1e-6)


# --- fast mode ------------------------------------------------------------------------------------


class _Counted:
    """fn, counting its calls."""

    def __init__(self, fn):
        self.fn, self.calls = fn, 0

    def __call__(self, t):
        self.calls += 1
        return self.fn(t)


def test_fast_mode_calls_fn_a_constant_number_of_times():
    x = tf.constant(np.random.default_rng(3).standard_normal(300), tf.float64)
    full, fast = _Counted(tf.sin), _Counted(tf.sin)
    assert gradlab.check_gradient(full, x).ok
    result = gradlab.check_gradient(fast, x, fast=True)
    assert result.ok and result.fast and result.reference is None, result.message
    assert full.calls >= 2 * 300 and fast.calls <= 12
    assert "fast mode, 2 directions" in result.message


@pytest.mark.parametrize("dtype", [tf.float64, tf.float32, tf.float16, tf.bfloat16], ids=lambda d: d.name)
@pytest.mark.parametrize("kind, ok", [("right", True), ("flipped", False), ("zero", False), ("double", False)])
@pytest.mark.parametrize("seed", range(3))
def test_fast_mode_gives_the_full_verdict_on_whole_gradient_bugs(dtype, kind, ok, seed):
    x = tf.cast(X64, dtype)
    for fn in (sin_with(kind), mean_of(sin_with(kind))):
        result = gradlab.check_gradient(fn, x, fast=True, seed=seed)
        assert result.ok is ok, result.message


def test_fast_mode_catches_the_forgotten_dy_and_a_cut_second_derivative():
    @tf.custom_gradient
    def forgets(t):
        return tf.sin(t), lambda dy: tf.cos(t)

    @tf.custom_gradient
    def cut(t):
        return tf.sin(t), lambda dy: dy * tf.stop_gradient(tf.cos(t))

    result = gradlab.check_gradient(forgets, X64, fast=True)
    assert not result.ok and result.ignores_upstream
    assert gradlab.check_gradient(cut, X64, fast=True).ok
    second = gradlab.check_gradient(cut, X64, fast=True, order=2)
    assert not second.ok and "cut" in second.message
    assert gradlab.check_gradient(tf.sin, X64, fast=True, order=2).ok


def test_fast_mode_checks_a_keras_cnn():
    keras.utils.set_random_seed(0)
    model = keras.Sequential([keras.Input((8, 8, 3)), keras.layers.Conv2D(4, 3, activation="tanh"),
                              keras.layers.GlobalAveragePooling2D(), keras.layers.Dense(5)])
    x = tf.constant(np.random.default_rng(0).standard_normal((1, 8, 8, 3)), tf.float32)
    result = gradlab.check_gradient(model, x, fast=True)
    assert result.ok and result.evaluated_in == "float32", result.message
    assert gradlab.check_gradient(model, x).ok
    flipped = gradlab.check_gradient(lambda t: model(gradlab.scale_gradient(t, -1.0)), x, fast=True)
    assert not flipped.ok


def test_fast_must_be_a_bool():
    with pytest.raises(TypeError, match=r"fast must be True or False; got str 'yes'"):
        gradlab.check_gradient(tf.sin, X64, fast="yes")


def test_order_2_of_a_function_that_gathers_its_input():
    """The second derivative of fn(t) = gather(t, [0, 0, 2])**2 is an IndexedSlices: summed, not a crash."""
    x = tf.constant([0.5, -1.0, 2.0], tf.float64)
    result = gradlab.check_gradient(lambda t: tf.gather(t, [0, 0, 2]) ** 2, x, order=2)
    assert result.ok, result.message
