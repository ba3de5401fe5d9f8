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
    assert result.linear_in_upstream is False
    assert "does not scale with the upstream gradient dy" in result.message


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
    result = gradlab.check_gradient(lambda t: gradlab.clip_gradient(t, -0.1, 0.1), X64)
    assert not result.ok and not result.linear_in_upstream


def test_float32_uses_looser_default_tolerances():
    assert gradlab.check_gradient(tf.sin, tf.constant([0.3, 1.0, -2.0])).ok
    # and an explicit tolerance can be made strict enough to reject float32 finite differences
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
        (
            dict(reference=lambda x, u: tf.zeros([2], tf.float64)),
            ValueError,
            r"reference returned shape \(2,\), but the gradient w\.r\.t\. x has shape \(3,\)",
        ),
    ],
    ids=["fn", "x", "reference", "delta", "rtol", "atol", "reference shape"],
)
def test_check_gradient_bad_arguments(kwargs, error, message):
    arguments = dict(fn=tf.sin, x=X64)
    arguments.update(kwargs)
    fn, x = arguments.pop("fn"), arguments.pop("x")
    with pytest.raises(error, match=message):
        gradlab.check_gradient(fn, x, **arguments)
