"""check_gradient catches wrong derivatives and gradients that ignore the upstream gradient."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest
import tensorflow as tf

import gradlab

X64 = tf.constant([0.3, -1.2, 2.0], tf.float64)


@tf.custom_gradient
def wrong_sign(t):
    return tf.sin(t), lambda dy: -dy * tf.cos(t)


@tf.custom_gradient
def forgets_dy(t):
    return tf.sin(t), lambda dy: tf.cos(t)  # the source material's bug: never multiplies by dy


@pytest.mark.parametrize(
    "fn",
    [
        tf.sin,
        tf.math.softplus,
        lambda t: t**3,
        lambda t: tf.reduce_sum(tf.exp(t)),
        lambda t: tf.tanh(t)[::-1],
    ],
    ids=["sin", "softplus", "cube", "scalar output", "reversed"],
)
def test_a_correct_derivative_passes(fn):
    result = gradlab.check_gradient(fn, X64)
    assert isinstance(result, gradlab.GradientCheck)
    assert result.ok and bool(result) and result.linear_in_upstream
    assert result.message.startswith("ok:") and str(result) == result.message
    assert result.max_error < 1e-5
    assert result.autodiff.shape == result.reference.shape == (3,)


def test_a_wrong_derivative_is_caught():
    result = gradlab.check_gradient(wrong_sign, X64)
    assert not result.ok and not bool(result)
    assert result.linear_in_upstream  # the rule is wrong, but it does scale with dy
    assert result.message.startswith("FAILED") and "finite differences" in result.message
    np.testing.assert_allclose(result.autodiff, -result.reference, rtol=1e-5)


def test_a_custom_gradient_that_ignores_dy_is_caught():
    result = gradlab.check_gradient(forgets_dy, X64)
    assert not result.ok
    assert result.linear_in_upstream is False and result.ignores_upstream is True
    assert "does not change when the upstream gradient dy changes" in result.message
    assert "multiplying it by dy" in result.message


def test_ignoring_dy_is_caught_even_where_dy_is_one():
    """With upstream 1 the forgetful gradient is right; the random upstream exposes it."""
    x = tf.Variable(X64)
    with tf.GradientTape() as tape:
        y = tf.reduce_sum(forgets_dy(x))
    np.testing.assert_allclose(tape.gradient(y, x).numpy(), np.cos(X64.numpy()))
    assert not gradlab.check_gradient(forgets_dy, X64).linear_in_upstream


def test_a_defined_gradient_is_checked_against_a_reference():
    width = 2.0

    def surrogate(x, upstream):
        return upstream * tf.nn.relu(1.0 - tf.abs(x) / width)

    step = lambda t: gradlab.surrogate_step(t, width)  # noqa: E731
    assert gradlab.check_gradient(step, X64, reference=surrogate).ok
    # Finite differences see the step's true derivative (zero), not the surrogate:
    assert not gradlab.check_gradient(step, X64).ok
    # A wrong reference is reported against "the reference gradient":
    wrong = gradlab.check_gradient(step, X64, reference=lambda x, u: 2.0 * surrogate(x, u))
    assert not wrong.ok and "the reference gradient" in wrong.message


@pytest.mark.parametrize(
    "fn, reference",
    [
        (lambda t: gradlab.scale_gradient(t, -3.0), lambda x, u: -3.0 * u),
        (lambda t: gradlab.reverse_gradient(t, 0.5), lambda x, u: -0.5 * u),
        (lambda t: gradlab.straight_through(tf.round(t), t), lambda x, u: u),
    ],
    ids=["scale", "reverse", "straight_through"],
)
def test_gradlab_ops_pass_against_their_definition(fn, reference):
    assert gradlab.check_gradient(fn, X64, reference=reference).ok


def test_a_clipped_gradient_is_reported_as_not_linear_in_upstream():
    """Against finite differences a clip is wrong (it is not the derivative), and the message
    points at checking a defined rule against its reference instead of blaming dy."""
    result = gradlab.check_gradient(lambda t: gradlab.clip_gradient(t, -0.1, 0.1), X64)
    assert not result.ok and not result.linear_in_upstream and not result.ignores_upstream
    assert "reference=" in result.message and "multiplying it by dy" not in result.message


CLIP_REFERENCE = lambda x, u: tf.clip_by_value(u, -0.1, 0.1)  # noqa: E731


@pytest.mark.parametrize("seed", range(5))
def test_a_correct_clip_passes_against_its_reference(seed):
    """A clip is not linear in dy by design: checked against its definition it passes, and the
    verdict says why linearity was not required."""
    clip = lambda t: gradlab.clip_gradient(t, -0.1, 0.1)  # noqa: E731
    result = gradlab.check_gradient(clip, X64, reference=CLIP_REFERENCE, seed=seed)
    assert result.ok, result.message
    assert not result.ignores_upstream
    norm = lambda t: gradlab.clip_gradient_norm(t, 0.5)  # noqa: E731
    assert gradlab.check_gradient(norm, X64, reference=lambda x, u: tf.clip_by_norm(u, 0.5), seed=seed).ok


def test_a_wrong_clip_fails_against_the_reference_without_blaming_dy():
    wrong = lambda t: gradlab.clip_gradient(t, -0.2, 0.2)  # noqa: E731
    result = gradlab.check_gradient(wrong, X64, reference=CLIP_REFERENCE)
    assert not result.ok and not result.ignores_upstream
    assert "differs from the reference gradient" in result.message and "dy" not in result.message


def test_a_clip_that_ignores_dy_is_still_caught_against_the_reference():
    @tf.custom_gradient
    def clip_forgets_dy(t):
        return tf.identity(t), lambda dy: tf.clip_by_value(tf.ones_like(t), -0.1, 0.1)

    result = gradlab.check_gradient(clip_forgets_dy, X64, reference=CLIP_REFERENCE)
    assert not result.ok and result.ignores_upstream
    assert "does not change when the upstream gradient dy changes" in result.message


def test_float32_uses_looser_default_tolerances():
    assert gradlab.check_gradient(tf.sin, tf.constant([0.3, 1.0, -2.0])).ok
    # and an explicit tolerance can be made strict enough to reject the float32 gradient's rounding
    assert not gradlab.check_gradient(
        tf.sin, tf.constant([0.3, 1.0, -2.0]), rtol=1e-12, atol=1e-12
    ).ok


def test_the_seed_makes_checks_reproducible():
    first = gradlab.check_gradient(tf.sin, X64, seed=3)
    again = gradlab.check_gradient(tf.sin, X64, seed=3)
    other = gradlab.check_gradient(tf.sin, X64, seed=4)
    np.testing.assert_array_equal(first.autodiff, again.autodiff)
    assert not np.array_equal(first.autodiff, other.autodiff)


def test_a_gradient_check_is_an_immutable_record():
    result = gradlab.check_gradient(tf.sin, X64)
    with pytest.raises(dataclasses.FrozenInstanceError):
        result.ok = False


@pytest.mark.parametrize(
    "kwargs, error, message",
    [
        (dict(fn=3), TypeError, r"fn must be callable"),
        (dict(x=[1, 2]), TypeError, r"x must have a floating dtype.*int32"),
        (dict(reference="exact"), TypeError, r"reference must be callable"),
        (dict(delta=0.0), ValueError, r"delta must be > 0; got 0\.0"),
        (dict(rtol=-1e-3), ValueError, r"rtol must be > 0; got -0\.001"),
        (dict(atol=float("nan")), ValueError, r"atol must be finite; got nan"),
        (dict(order=3), ValueError, r"order must be 1 .* or 2 .*; got 3"),
        (dict(order=2.0), TypeError, r"order must be an int, 1 or 2; got float 2\.0"),
        (
            dict(reference=lambda x, u: tf.zeros([2], tf.float64)),
            ValueError,
            r"reference returned shape \(2,\), but the gradient w\.r\.t\. x has shape \(3,\)",
        ),
    ],
    ids=["fn", "x", "reference", "delta", "rtol", "atol", "order", "order type", "reference shape"],
)
def test_check_gradient_bad_arguments(kwargs, error, message):
    arguments = dict(fn=tf.sin, x=X64)
    arguments.update(kwargs)
    fn, x = arguments.pop("fn"), arguments.pop("x")
    with pytest.raises(error, match=message):
        gradlab.check_gradient(fn, x, **arguments)


# --- order=2: the gradient's own gradient ------------------------------------------------------

def _custom_sin(second):
    """sin with a custom grad whose own gradient is right ("right"), cut or wrong."""
    @tf.custom_gradient
    def fn(t):
        def grad(dy):
            if second == "cut":
                return dy * tf.stop_gradient(tf.cos(t))
            if second == "wrong":   # the same value, a different derivative: 5 (t - t) is 0
                return dy * (tf.cos(t) + 5.0 * (t - tf.stop_gradient(t)))
            if second == "numpy":
                return dy * tf.constant(np.cos(t.numpy()))
            return dy * tf.cos(t)
        return tf.sin(t), grad
    return fn


@pytest.mark.parametrize("fn", [tf.sin, tf.nn.softplus, lambda t: tf.sin(t) * t ** 2, _custom_sin("right"),
                                lambda t: gradlab.scale_gradient(tf.sin(t), 1.0)],
                         ids=["sin", "softplus", "product", "custom right", "gradlab op"])
def test_order_2_passes_where_the_second_derivative_is_right(fn):
    result = gradlab.check_gradient(fn, X64, order=2)
    assert result.ok, result.message
    assert result.order == 2 and result.second_order_error < 1e-5
    assert "order 2" in result.message


@pytest.mark.parametrize("second, says", [("cut", "no second derivative at all"), ("numpy", "no second derivative"),
                                          ("wrong", "differs from finite differences")])
def test_order_2_catches_a_right_gradient_whose_own_gradient_is_wrong(second, says):
    fn = _custom_sin(second)
    assert gradlab.check_gradient(fn, X64).ok, "the first derivative is right"
    result = gradlab.check_gradient(fn, X64, order=2)
    assert not result.ok and result.message.startswith("FAILED at order 2")
    assert says in result.message and "nested tf.custom_gradient" in result.message


def test_order_2_checks_a_defined_rule_against_finite_differences_of_its_vjp():
    fn = lambda t: gradlab.scale_gradient(tf.sin(t), 2.0)  # noqa: E731
    result = gradlab.check_gradient(fn, X64, reference=lambda t, u: 2.0 * u * tf.cos(t), order=2)
    assert result.ok, result.message


def test_order_2_is_not_checked_when_the_gradient_itself_fails():
    result = gradlab.check_gradient(lambda t: gradlab.scale_gradient(tf.sin(t), 2.0), X64, order=2)
    assert not result.ok and result.second_order_error is None and "Order 2 not checked" in result.message


def test_order_1_is_the_default_and_reports_no_second_order():
    result = gradlab.check_gradient(_custom_sin("cut"), X64)
    assert result.ok and result.order == 1 and result.second_order_error is None


# --- the messages the notebooks print (their stored outputs are compared) ----------------------


def test_the_messages_notebooks_01_and_08_print_are_unchanged():
    @tf.custom_gradient
    def tanh_reusing_forward(x):                                 # notebook 01, section 4
        t = tf.tanh(x)
        return t, lambda dy: dy * (1.0 - t * t)

    result = gradlab.check_gradient(tanh_reusing_forward, tf.constant([-2.0, -0.3, 0.0, 0.7, 3.0], tf.float64))
    assert result.message == ("ok: the autodiff gradient matches finite differences (max abs error 4.1e-07) "
                              "and scales with the upstream gradient.")

    def softplus_with(derivative):                               # notebook 08, section 6
        @tf.custom_gradient
        def softplus(x):
            return tf.nn.softplus(x), lambda dy: dy * derivative(x)
        return softplus

    x64 = tf.constant([-2.0, -0.5, 0.3, 1.7], tf.float64)
    assert gradlab.check_gradient(softplus_with(tf.sigmoid), x64, order=2).message == (
        "ok: the autodiff gradient matches finite differences (max abs error 7.4e-09) and scales with the "
        "upstream gradient; order 2: its own gradient matches finite differences too (max abs error 3.8e-09).")

    meant = lambda x, u: u * tf.maximum(tf.constant(0.0, x.dtype), 1.0 - tf.abs(x))  # noqa: E731
    points = tf.constant([-0.5, 0.25, 0.8, 2.0], tf.float64)                          # notebook 01, section 1
    assert gradlab.check_gradient(gradlab.surrogate_step, points, reference=meant).message == (
        "ok: the autodiff gradient matches the reference gradient (max abs error 0) and scales with the "
        "upstream gradient.")

    @tf.custom_gradient
    def clip_scales_instead(x):
        return tf.identity(x), lambda dy: dy * tf.clip_by_value(tf.ones_like(x), -0.5, 0.5)

    clip_meant = lambda x, u: tf.clip_by_value(u, -0.5, 0.5)  # noqa: E731
    assert gradlab.check_gradient(clip_scales_instead, points, reference=clip_meant).message == (
        "FAILED: the autodiff gradient differs from the reference gradient (max abs error 0.18, rtol=1e-05, "
        "atol=1e-05).")


def test_a_gradient_linear_only_for_positive_scalings_is_not_linear_in_upstream():
    """grad(dy) = |dy| cos x doubles with dy (2u) but does not flip with it (-u): not linear, not a derivative."""
    @tf.custom_gradient
    def reads_abs_dy(t):
        return tf.sin(t), lambda dy: tf.abs(dy) * tf.cos(t)

    result = gradlab.check_gradient(reads_abs_dy, X64)
    assert not result.ok and not result.linear_in_upstream and not result.ignores_upstream
    assert "not linear in the upstream gradient" in result.message
