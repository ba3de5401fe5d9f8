"""The self-checks of notebook 11 (exercises/reference.py) accept the answers and explain mistakes."""
from __future__ import annotations

import pytest
import tensorflow as tf

import gradlab
from exercises.reference import check_exercise_1, check_exercise_2


def _hard_sign_with(rule):
    @tf.custom_gradient
    def hard_sign(t):
        return tf.sign(t), lambda dy: rule(dy, t)
    return hard_sign


_hard_sign = _hard_sign_with(lambda dy, t: dy * tf.cast(tf.abs(t) <= 1.0, t.dtype))
_hard_sign_forgets_dy = _hard_sign_with(lambda dy, t: tf.cast(tf.abs(t) <= 1.0, t.dtype))


def test_exercise_1_accepts_the_fixed_binarize(accepted):
    assert accepted(check_exercise_1(lambda x: _hard_sign(x))).startswith("Correct!")


def test_exercise_1_explains_the_starting_point_by_its_first_pitfall(refused):
    """Both pitfalls: eagerly the keyword call bypasses the custom gradient, so x receives tf.sign's zeros."""
    out = refused(check_exercise_1(lambda x: _hard_sign_forgets_dy(t=x)))
    assert "eagerly, with the upstream gradient dy = [ 3.  -2.   0.5  4.  -1.5  1. ]" in out
    assert "x receives [0. 0. 0. 0. 0. 0.]" in out and "How is hard_sign called? (notebook 01, section 5)" in out
    assert "keyword" not in out and "positionally" not in out  # no solution


def test_exercise_1_catches_the_keyword_call_alone(refused):
    assert "the custom gradient is not used" in refused(check_exercise_1(lambda x: _hard_sign(t=x)))


def test_exercise_1_catches_a_grad_that_ignores_dy(refused):
    out = refused(check_exercise_1(lambda x: _hard_sign_forgets_dy(x)))
    assert "x receives [0. 1. 1. 1. 1. 0.]" in out and "expected dy where |x| <= 1, [ 0.  -2.   0.5  4.  -1.5  0. ]" in out
    assert "does grad multiply by dy?" in out


def test_exercise_1_catches_a_strict_bound(refused):
    assert "At |x| = 1 dy passes too" in refused(
        check_exercise_1(lambda x: _hard_sign_with(lambda dy, t: dy * tf.cast(tf.abs(t) < 1.0, t.dtype))(x))
    )


def test_exercise_1_refuses_a_stop_gradient_trick(refused):
    """The numbers of a straight-through sign without the tf.custom_gradient the exercise fixes."""
    def trick(x):
        clipped = tf.clip_by_value(x, -1.0, 1.0)
        return clipped + tf.stop_gradient(tf.sign(x) - clipped)
    out = refused(check_exercise_1(trick))
    assert "the numbers are right, but your binarize builds no tf.custom_gradient" in out


def test_exercise_1_reports_a_wrong_value_and_a_raising_answer(refused):
    assert "the value should be sign(x) = [-1. -1.  0.  1.  1.  1.]; got" in refused(check_exercise_1(lambda x: x))
    assert "ZeroDivisionError" in refused(check_exercise_1(lambda x: 1 / 0))


def _make_step(live: bool):
    def make_step(initial):
        factor = tf.Variable(initial) if live else {"value": initial}

        @tf.function
        def step(t):
            with tf.GradientTape() as tape:
                tape.watch(t)
                y = gradlab.scale_gradient(t, factor if live else factor["value"])
            return tape.gradient(y, t)

        def set_factor(value):
            if live:
                factor.assign(value)
            else:
                factor["value"] = value
        return step, set_factor
    return make_step


def test_exercise_2_accepts_a_variable(accepted):
    assert accepted(check_exercise_2(_make_step(live=True))).startswith("Correct!")


def test_exercise_2_explains_the_frozen_python_number(refused):
    out = refused(check_exercise_2(_make_step(live=False)))  # the notebook's starting point
    assert "still 5.0" in out and "read anew at every call? (§3.1)" in out
    assert "tf.Variable" not in out  # no solution


def test_exercise_2_refuses_a_step_that_is_no_longer_a_tf_function(refused):
    """Eagerly the Python number is read at every call: right numbers, the point missed."""
    def make_step(initial):
        state = {"factor": initial}

        def step(t):
            with tf.GradientTape() as tape:
                tape.watch(t)
                y = gradlab.scale_gradient(t, state["factor"])
            return tape.gradient(y, t)
        return step, lambda v: state.__setitem__("factor", v)
    assert "step is not a tf.function any more" in refused(check_exercise_2(make_step))


def test_exercise_2_catches_retracing_and_errors(refused):
    def make_step(initial):
        state = {"factor": initial}

        def step(t):  # retraces on every new Python value: correct numbers, the wrong mechanism
            return tf.function(lambda u: gradlab.scale_gradient(u, state["factor"]) * 0 + state["factor"])(t)

        step.experimental_get_tracing_count = lambda: 2
        return step, lambda v: state.__setitem__("factor", v)

    assert "traced 2 times" in refused(check_exercise_2(make_step))
    assert "should return the pair (step, set_factor); it returned NoneType None" in refused(
        check_exercise_2(lambda initial: None)
    )
    assert "returned None: return tape.gradient" in refused(
        check_exercise_2(lambda initial: (tf.function(lambda t: None), lambda v: None))
    )
    assert "make_step(5.0) raised ZeroDivisionError" in refused(check_exercise_2(lambda initial: 1 / 0))


def test_exercise_1_refuses_a_hard_coded_gradient(refused):
    """Issue 39: the first case's gradient, sent by grad whatever dy and t are: the other points refuse it."""
    first = tf.constant([0.0, -2.0, 0.5, 4.0, -1.5, 0.0])
    out = refused(check_exercise_1(lambda x: _hard_sign_with(lambda dy, t: first)(x)))
    assert out.startswith("Not yet: on other points, eagerly, with the upstream gradient dy = "
                          "[ 1.4 -2.3 -0.7  0.1 -0.4  0.5],\nx receives [ 0.  -2.   0.5  4.  -1.5  0. ]; "
                          "expected dy where |x| <= 1, [ 1.4 -2.3  0.   0.   0.   0.5].")
    assert "does grad compute from the dy and t it receives" in out


def test_exercise_2_refuses_hard_coded_factors(refused):
    """The first case's factors written into the answer (5.0 at the start, 0.5 after set_factor): refused."""
    def make_step(initial):
        factor = tf.Variable(5.0)

        @tf.function
        def step(t):
            with tf.GradientTape() as tape:
                tape.watch(t)
                y = gradlab.scale_gradient(t, factor)
            return tape.gradient(y, t)
        return step, lambda value: factor.assign(0.5)
    out = refused(check_exercise_2(make_step))
    assert out.startswith("Not yet: with other numbers, with factor 1.5 the gradient of scale_gradient(t, 1.5) "
                          "at t = -3 should be 1.5; got 5.0.\nThat is the first case's factor, make_step(5.0): is 5 "
                          "written into your code?")

    def ignores_the_new_value(initial):
        step, set_factor = _make_step(live=True)(initial)
        return step, lambda value: set_factor(0.5)
    out = refused(check_exercise_2(ignores_the_new_value))
    assert "with other numbers, after set_factor(-0.25) the gradient should be -0.25; got 0.5.\nThat is the first " \
           "case's new factor, set_factor(0.5): is 0.5 written into your code?" in out


def test_exercise_1_names_values_fixed_in_advance(refused):
    """A value that is the first points' signs whatever x is: named on the other points."""
    first = tf.sign(tf.constant([-2.0, -0.5, 0.0, 0.25, 1.0, 1.5]))

    @tf.custom_gradient
    def fixed(t):
        return tf.identity(first), lambda dy: dy * tf.cast(tf.abs(t) <= 1.0, t.dtype)
    out = refused(check_exercise_1(fixed))
    assert "That is sign of the first points, [-2, -0.5, 0, 0.25, 1, 1.5], whatever x is" in out


@pytest.mark.parametrize("seed", [0, 1, 7, 2024])
def test_held_out_cases_decide_as_the_public_ones(seed, accepted, refused):
    """The instructor edition's held-out cases (check_exercise_N(..., seed=...)): other inputs, same verdicts."""
    accepted(check_exercise_1(_hard_sign, seed=seed))
    accepted(check_exercise_2(_make_step(live=True), seed=seed))
    assert "does grad multiply by dy?" in refused(check_exercise_1(_hard_sign_forgets_dy, seed=seed))
    assert "read the Python number\nonce, while tracing" in refused(check_exercise_2(_make_step(live=False), seed=seed))


def test_held_out_cases_refuse_answers_fitted_to_the_public_ones(refused):
    """The first case's gradient, or its factors, written into the answer: a seed refuses and names them."""
    first = tf.constant([0.0, -2.0, 0.5, 4.0, -1.5, 0.0])
    out = refused(check_exercise_1(lambda x: _hard_sign_with(lambda dy, t: first)(x), seed=3))
    assert "on other points" in out

    def ignores_the_new_value(initial):
        step, set_factor = _make_step(live=True)(initial)
        return step, lambda value: set_factor(0.5)
    assert "is 0.5 written into your code?" in refused(check_exercise_2(ignores_the_new_value, seed=3))


def test_exercise_1_held_out_names_the_mistake_not_the_first_points_it_never_ran(refused):
    """Issue F10: with seed= only the held-out case runs; an identity estimator (no |x| <= 1 mask) is
    named as such, not as "the first points passed"."""
    out = refused(check_exercise_1(_hard_sign_with(lambda dy, t: dy), seed=3))
    assert "The first points passed" not in out
    assert "Does grad multiply by dy, and pass it where |x| <= 1 (and only there)?" in out
