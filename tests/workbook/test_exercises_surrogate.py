"""The self-checks of notebook 04 (exercises/surrogate.py) accept the answers and explain mistakes."""
from __future__ import annotations

import numpy as np
import pytest
import tensorflow as tf

import gradlab
from exercises.surrogate import check_exercise_1, check_exercise_2, heaviside


def _step(rule):
    @tf.custom_gradient
    def step(x):
        return heaviside(x), lambda dy: rule(x, dy)
    return step


def _arctan(x):
    return tf.atan(np.pi * x) / np.pi


def test_exercise_1_accepts_the_arctan_surrogate(accepted):
    assert accepted(check_exercise_1(_step(lambda x, dy: dy / (1.0 + tf.square(np.pi * x))))).startswith("Correct!")
    assert check_exercise_1(lambda x: gradlab.straight_through(heaviside(x), _arctan(x))).passed is True


def test_exercise_1_refuses_the_stop_gradient_trick(refused):
    # On the check's grid a + stop_gradient(H - a) happens to be H bit for bit, and autodiff gives
    # the surrogate: the numbers are right, but the exercise asks for tf.custom_gradient.
    out = refused(check_exercise_1(lambda x: _arctan(x) + tf.stop_gradient(heaviside(x) - _arctan(x))))
    assert "TensorFlow derived this gradient itself" in out and "@tf.custom_gradient" in out


def test_exercise_1_explains_a_value_off_by_rounding(refused):
    trick = lambda x: tf.stop_gradient(heaviside(x)) + _arctan(x) - tf.stop_gradient(_arctan(x))  # noqa: E731
    out = refused(check_exercise_1(trick))
    assert "At x = [0.125, 2.125] you return [0.99999994, 0.99999994]" in out and "rounding error" in out


_AT = "at x        [-2.5  , -0.875,  0.875,  2.5  ]\nwith dy     [ 0.001, -0.93 , -0.539,  0.11 ]\n"
_EXPECTED = "expected    [ 1.962e-05, -1.087e-01, -6.296e-02,  1.762e-03]."


@pytest.mark.parametrize("rule, message, received", [
    (lambda x, dy: tf.zeros_like(dy), "sends back zeros (the starting point)", "[0., 0., 0., 0.]"),
    (lambda x, dy: 1.0 / (1.0 + tf.square(np.pi * x)), "ignores dy", "[0.016, 0.117, 0.117, 0.016]"),
    (lambda x, dy: np.pi * dy / (1.0 + tf.square(np.pi * x)), "pi times too much",
     "[ 6.165e-05, -3.416e-01, -1.978e-01,  5.536e-03]"),
    (lambda x, dy: dy, "returns dy unchanged", "[ 0.001, -0.93 , -0.539,  0.11 ]"),
    (lambda x, dy: dy / (1.0 + np.pi * x * x), "must send dy / (1 + (pi x)^2)",
     "[ 5.962e-05, -2.732e-01, -1.582e-01,  5.353e-03]"),
])
def test_exercise_1_explains_a_wrong_backward_pass_with_the_numbers(rule, message, received, refused):
    out = refused(check_exercise_1(_step(rule)))
    assert message in out and _AT in out and f"x receives  {received};" in out and _EXPECTED in out


def test_exercise_1_explains_other_mistakes(refused):
    assert "no gradient reaches x" in refused(check_exercise_1(heaviside))
    out = refused(check_exercise_1(tf.sigmoid))
    assert "forward value" in out and "you return [0.07585817, 0.294215  , 0.70578504, 0.9241418 ]" in out
    assert "ZeroDivisionError" in refused(check_exercise_1(lambda x: 1 / 0))


_TRIANGLE = "dy * max(0, 1 - |x|) is [ 0. , -0.4,  2.7,  0.4, -0.6,  0. ]."


def test_exercise_2_accepts_the_repair_and_gradlabs_triangle(accepted):
    assert accepted(check_exercise_2(_step(lambda x, dy: dy * tf.maximum(0.0, 1.0 - tf.abs(x))))).startswith("Correct!")
    assert check_exercise_2(gradlab.surrogate_step).passed is True


def test_exercise_2_explains_mistakes_with_the_numbers(refused):
    out = refused(check_exercise_2(_step(lambda x, dy: tf.maximum(0.0, 1.0 - tf.abs(x)))))  # the source
    assert "what does it leave out? (notebook 01, section 1)" in out
    assert "x receives              [0. , 0.4, 0.9, 0.8, 0.3, 0. ];" in out
    assert "Multiply by dy" not in out  # no solution
    assert _TRIANGLE in out
    out = refused(check_exercise_2(_step(lambda x, dy: 2.0 * dy)))
    assert "is not dy * max" in out and "[ 4., -2.,  6.,  1., -4.,  8.]" in out and _TRIANGLE in out
    assert "forward value" in refused(check_exercise_2(tf.sigmoid))


def test_exercise_2_refuses_a_triangle_without_a_custom_gradient(refused):
    def ramp(x):  # its derivative is max(0, 1 - |x|)
        return tf.where(x < 0, 0.5 * tf.square(tf.maximum(x + 1.0, 0.0)),
                        1.0 - 0.5 * tf.square(tf.maximum(1.0 - x, 0.0)))
    assert "TensorFlow derived this gradient itself" in refused(
        check_exercise_2(lambda x: ramp(x) + tf.stop_gradient(heaviside(x) - ramp(x)))
    )


def test_exercise_1_refuses_a_hard_coded_answer(refused):
    """The first case's gradient, sent whatever x and dy are: the second case (other points) refuses it."""
    xs = np.linspace(-2.5, 2.5, 41, dtype=np.float32)
    sent = tf.constant(np.random.default_rng(7).standard_normal(41).astype(np.float32) / (1.0 + (np.pi * xs) ** 2))
    out = refused(check_exercise_1(_step(lambda x, dy: sent)))
    assert out.startswith("Not yet: on other points,")


def test_exercise_2_gives_an_additive_rule_its_own_hint(refused):
    """Issue 39: dy + max(0, 1 - |x|) changes with dy (it is only not linear in it): no "the same whatever dy is"."""
    out = refused(check_exercise_2(_step(lambda x, dy: dy + tf.maximum(0.0, 1.0 - tf.abs(x)))))
    assert "does not scale with the upstream gradient dy" in out
    assert "grad adds the surrogate to dy: the chain rule multiplies dy by the local derivative." in out
    assert "whatever dy is" not in out


def test_exercise_2_refuses_a_hard_coded_triangle(refused):
    """The triangle at the first case's points, times dy: linear in dy, but the other points refuse it."""
    triangle = tf.constant([0.0, 0.4, 0.9, 0.8, 0.3, 0.0])
    out = refused(check_exercise_2(_step(lambda x, dy: dy * triangle)))
    assert out.startswith("Not yet: on other points, the gradient scales with dy but is not dy * max(0, 1 - |x|)")


_ARCTAN_RULE = _step(lambda x, dy: dy / (1.0 + tf.square(np.pi * x)))
_TRIANGLE_RULE = _step(lambda x, dy: dy * tf.maximum(0.0, 1.0 - tf.abs(x)))


@pytest.mark.parametrize("seed", [0, 1, 2024])
def test_held_out_cases_decide_as_the_public_ones(seed):
    """The instructor edition's held-out cases (check_exercise_N(..., seed=...)): other inputs, same verdicts."""
    assert check_exercise_1.verdict(_ARCTAN_RULE, seed=seed).passed
    assert check_exercise_1.verdict(lambda x: gradlab.straight_through(heaviside(x), _arctan(x)), seed=seed).passed
    for wrong in (lambda x, dy: 1.0 / (1.0 + tf.square(np.pi * x)), lambda x, dy: dy, lambda x, dy: 0.0 * dy):
        assert not check_exercise_1.verdict(_step(wrong), seed=seed).passed
    assert check_exercise_2.verdict(_TRIANGLE_RULE, seed=seed).passed
    assert check_exercise_2.verdict(gradlab.surrogate_step, seed=seed).passed
    for wrong in (lambda x, dy: tf.maximum(0.0, 1.0 - tf.abs(x)), lambda x, dy: 2.0 * dy):
        assert not check_exercise_2.verdict(_step(wrong), seed=seed).passed


def _fitted(public, right):
    """A step whose grad is ``right`` at the points the public check tries (a table of them), dy elsewhere."""
    return _step(lambda x, dy: right(x, dy) if any(np.array_equal(x.numpy(), np.float32(p)) for p in public) else dy)


def test_held_out_cases_refuse_answers_fitted_to_the_public_ones():
    public = [np.linspace(-2.5, 2.5, 41), np.random.default_rng(8).uniform(-3.0, 3.0, 29)]
    fitted = _fitted(public, lambda x, dy: dy / (1.0 + tf.square(np.pi * x)))
    assert check_exercise_1.verdict(fitted).passed
    assert "your grad returns dy unchanged" in check_exercise_1.verdict(fitted, seed=7).message
    public = [[-1.5, -0.6, -0.1, 0.2, 0.7, 1.4], [-0.9, -0.3, 0.05, 0.45, 1.1, 2.0]]
    fitted = _fitted(public, lambda x, dy: dy * tf.maximum(0.0, 1.0 - tf.abs(x)))
    assert check_exercise_2.verdict(fitted).passed
    assert "is not dy * max(0, 1 - |x|)" in check_exercise_2.verdict(fitted, seed=7).message
