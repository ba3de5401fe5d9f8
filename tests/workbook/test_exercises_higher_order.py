"""The self-checks of notebook 08 (exercises/higher_order.py) accept the answers and explain mistakes."""
from __future__ import annotations

import itertools
import re

import numpy as np
import pytest
import tensorflow as tf

import gradlab
from exercises.higher_order import (_broken_log_or_zero, _broken_quantized, _broken_smooth_abs, _transposed,
                                    check_exercise_1, check_exercise_2, check_exercise_3)


def test_exercise_1_accepts_the_right_predictions(accepted):
    assert accepted(check_exercise_1(18.0, 6)).startswith("Correct!")
    assert check_exercise_1(np.float32(18.0), tf.constant(6.0)).passed is True


def test_exercise_1_the_starting_point_gives_nothing_away(refused):
    """Run All shows this message: it must not state either prediction."""
    out = refused(check_exercise_1(None, None))
    assert out == "Not yet: replace both None with your predictions (numbers).\n"
    assert "18" not in out and "6" not in out


def test_exercise_1_explains_swaps_and_each_wrong_prediction_without_the_answer(refused):
    assert "on_input = 6 and on_output = 18: you swapped them" in refused(check_exercise_1(6.0, 18.0))
    out = refused(check_exercise_1(6.0, 6.0))
    assert "(on_input): 6 applies the factor 3 once" in out and "goes back through the op" in out
    out = refused(check_exercise_1(18.0, 18.0))
    assert "(on_output): 18 applies the factor 3 twice" in out and "does not depend on x" in out
    assert "(on_input): 9 is the first derivative" in refused(check_exercise_1(9.0, 6.0))
    assert "(on_output): 2 is f'' of x^2 with no factor" in refused(check_exercise_1(18.0, 2.0))
    out = refused(check_exercise_1(54.0, 6.0))
    assert "(on_input): 54 is not it" in out and "Count how many times" in out
    for wrong in ((2.0, 2.0), (54.0, 12.0), (9.0, 9.0), (12.0, 2.0)):     # neither answer is stated
        out = refused(check_exercise_1(*wrong))
        assert not re.search(r"\b(18|6)(\.0)?\b", out), out


def test_exercise_1_explains_bad_types(refused):
    assert "on_input is str 'eighteen'" in refused(check_exercise_1("eighteen", 6.0))
    assert "on_output is bool True" in refused(check_exercise_1(18.0, True))


def _transpose(fn, x, u):
    """The right answer, as the check's own reference computes it: the VJP differentiated under u."""
    return _transposed(fn, x, u, upstream=u)


def test_exercise_2_accepts_the_transpose(accepted):
    out = accepted(check_exercise_2(_transpose))
    assert out.startswith("Correct!") and "transposed: None" in out


def test_exercise_2_explains_the_starting_point_forward_mode_and_a_raising_answer(refused):
    out = refused(check_exercise_2(lambda fn, x, u: u))
    assert "on tf.sin" in out and "you get [1. 2. 3.]" in out and "[0.9553 1.6507 1.0871]" in out
    assert "the tangent unchanged (the starting point)" in out

    def forward_mode(fn, x, u):                 # ForwardAccumulator ignores scale_gradient
        with tf.autodiff.ForwardAccumulator(primals=x, tangents=u) as acc:
            y = fn(x)
        return acc.jvp(y)
    out = refused(check_exercise_2(forward_mode))
    assert "on scale_gradient(x, 5)" in out and "[ 5. 10. 15.]" in out and "forward mode (ForwardAccumulator) ignores" in out
    assert "ZeroDivisionError" in refused(check_exercise_2(lambda fn, x, u: 1 / 0))


def test_exercise_2_refuses_the_gradient_times_u_and_the_vjp_of_u(refused):
    """Both are right for every elementwise function; a cumulative sum has a Jacobian that is not diagonal."""
    def gradient_times_u(fn, x, u):
        with tf.GradientTape() as tape:
            tape.watch(x)
            y = fn(x)
        return tape.gradient(y, x) * u
    out = refused(check_exercise_2(gradient_times_u))
    assert "tf.cumsum(scale_gradient(x, 5))" in out and "you get [15. 20. 15.]" in out and "[ 5. 15. 30.]" in out
    assert "only when J is diagonal" in out

    def vjp_of_u(fn, x, u):
        with tf.GradientTape() as tape:
            tape.watch(x)
            y = fn(x)
        return tape.gradient(y, x, output_gradients=u)
    out = refused(check_exercise_2(vjp_of_u))
    assert "you get [30. 25. 15.]" in out and "the VJP J^T u (reverse mode)" in out


def test_exercise_2_refuses_a_jacobian(refused):
    """J u by a full Jacobian is right for every linear rule; only a transposed VJP gives a non-linear rule's derivative."""
    def jacobian(fn, x, u):
        with tf.GradientTape() as tape:
            tape.watch(x)
            y = fn(x)
        return tf.linalg.matvec(tape.jacobian(y, x), u)
    out = refused(check_exercise_2(jacobian))
    assert "on detached: clip_by_norm(dy, 1)" in out and "you get [1. 2. 3.]" in out
    assert "[-0.5774  0.      0.5774]" in out and "not linear in dy" in out and "a Jacobian" in out


def test_exercise_2_explains_forgotten_output_gradients_an_unwatched_w_and_wrong_shapes(refused):
    def without_u(fn, x, u):
        return _transpose(fn, x, None)
    out = refused(check_exercise_2(without_u))
    assert "you get [0.9553 0.8253 0.3624]" in out and "J times ones: pass output_gradients=u" in out
    assert "returned None. Did the outer tape watch w" in refused(check_exercise_2(lambda fn, x, u: None))
    assert "returns shape (1,)" in refused(check_exercise_2(lambda fn, x, u: [1.0]))


def test_exercise_2_refuses_the_first_cases_numbers_by_call_order(refused):
    """Issue 39: the five JVPs at the first x and u, returned in the order of the calls: the second case refuses them."""
    x, u = tf.constant([0.3, -0.6, 1.2]), tf.constant([1.0, 2.0, 3.0])
    w_hat = np.ones(3) / np.sqrt(3.0)
    first = [np.cos(x.numpy()) * u.numpy(), 5.0 * u.numpy(), np.maximum(0.0, 1.0 - np.abs(x.numpy())) * u.numpy(),
             5.0 * np.cumsum(u.numpy()), (u.numpy() - w_hat * (w_hat @ u.numpy())) / np.sqrt(3.0)]
    answers = itertools.cycle(first)
    out = refused(check_exercise_2(lambda fn, x, u: next(answers)))
    assert out.startswith("Not yet: on tf.sin, at x = [ 0.58  0.95 -0.47] with u = [-2.7  0.4 -2.1],\n"
                          "you get [0.9553 1.6507 1.0871];")
    assert "That is the JVP at the first x and u, which passed: compute it from the fn, x and u you are given." in out


@pytest.mark.parametrize("seed", [0, 1, 2024])
def test_exercise_2_held_out_cases_decide_as_the_public_ones(seed):
    """The instructor edition's held-out cases (check_exercise_2(..., seed=...)): other x and u, same verdicts."""
    assert check_exercise_2.verdict(_transpose, seed=seed).passed

    def vjp_of_u(fn, x, u):
        with tf.GradientTape() as tape:
            tape.watch(x)
            y = fn(x)
        return tape.gradient(y, x, output_gradients=u)
    for wrong in (lambda fn, x, u: u, vjp_of_u, lambda fn, x, u: _transpose(fn, x, None)):
        assert not check_exercise_2.verdict(wrong, seed=seed).passed


def test_exercise_2_held_out_cases_refuse_an_answer_fitted_to_the_public_ones():
    rng = np.random.default_rng(15)
    public = [np.float32([0.3, -0.6, 1.2]), np.round(rng.uniform(-1.5, 1.5, 3), 2).astype(np.float32)]

    def fitted(fn, x, u):
        return _transpose(fn, x, u) if any(np.array_equal(x.numpy(), p) for p in public) else u
    assert check_exercise_2.verdict(fitted).passed
    assert not check_exercise_2.verdict(fitted, seed=7).passed


# --- exercise 3: diagnose three broken functions -----------------------------------------------------



def _quantized(x):
    return gradlab.straight_through(tf.round(x * 4.0) / 4.0, x)


def _smooth_abs(x):
    return tf.sqrt(x ** 2 + 1.0)


def _log_or_zero(x):
    positive = x > 0.0
    return tf.where(positive, tf.math.log(tf.where(positive, x, 1.0)), 0.0)


def _numpy_with_a_gradient(x):
    """The NumPy detour kept, with a backward pass in TensorFlow ops (tf.custom_gradient)."""
    @tf.custom_gradient
    def inner(x):
        y = tf.numpy_function(lambda a: np.sqrt(a ** 2 + 1.0).astype(np.float32), [x], tf.float32)
        return tf.reshape(y, tf.shape(x)), lambda dy: dy * x / tf.sqrt(x ** 2 + 1.0)
    return inner(x)


@pytest.mark.parametrize("seed", [None, 0, 7])
@pytest.mark.parametrize("answers", [
    (_quantized, _smooth_abs, _log_or_zero),
    (lambda x: x + tf.stop_gradient(tf.round(x * 4.0) / 4.0 - x), _numpy_with_a_gradient,
     lambda x: tf.where(x > 0.0, tf.math.log(tf.maximum(x, np.finfo(np.float32).tiny)), 0.0)),
], ids=["taught", "other right techniques"])
def test_exercise_3_accepts_right_answers(answers, seed, accepted):
    assert accepted(check_exercise_3(*answers, seed=seed)).startswith("Correct! quantized keeps its quarters")


@pytest.mark.parametrize("seed", [None, 3])
def test_exercise_3_refuses_the_starting_point_and_points_at_the_doctor(seed, refused):
    out = refused(check_exercise_3(_broken_quantized, _broken_smooth_abs, _broken_log_or_zero, seed=seed))
    assert "no gradient reaches x through quantized (tape.gradient returns None)" in out
    assert "What does gradlab.explain_gradient(quantized, x) say, with x = tf.constant([" in out
    assert "straight" not in out and "stop_gradient" not in out  # no fix given away
    out = refused(check_exercise_3(_quantized, _broken_smooth_abs, _broken_log_or_zero, seed=seed))
    assert "no gradient reaches x through smooth_abs" in out and "explain_gradient(smooth_abs, x)" in out
    out = refused(check_exercise_3(_quantized, _smooth_abs, _broken_log_or_zero, seed=seed))
    assert "log_or_zero's gradient holds nan at x = 0" in out and "explain_gradient(log_or_zero, x)" in out
    assert "double" not in out


def test_exercise_3_held_out_inputs_differ_but_keep_the_traps():
    from exercises.higher_order import _X3, _held_out_3
    for seed in (0, 1, 2):
        x, dy = _held_out_3(seed)
        assert x != _X3 and 0.0 in x and any(0.0 < v < 1e-4 for v in x) and all(d != 0 for d in dy)
        assert any(np.finfo(np.float32).tiny < v <= 1e-30 for v in x)  # a normal float32 an epsilon moves


@pytest.mark.parametrize("answers, message", [
    ((lambda x: x, _smooth_abs, _log_or_zero), "quantized changed its value: at x = 1e-06 it returns 1e-06"),
    ((tf.stop_gradient, _smooth_abs, _log_or_zero), "quantized changed its value"),
    ((lambda x: tf.stop_gradient(_broken_quantized(x)), _smooth_abs, _log_or_zero), "no gradient reaches x"),
    ((lambda x: gradlab.straight_through(_broken_quantized(x), tf.clip_by_value(x, -1.0, 1.0)), _smooth_abs,
      _log_or_zero), "saturating estimator (the hard tanh)"),
    ((lambda x: gradlab.straight_through(_broken_quantized(x), 4.0 * x), _smooth_abs, _log_or_zero), "x receives 4 dy"),
    ((_quantized, lambda x: tf.numpy_function(lambda a: np.sqrt(a ** 2 + 1.0), [x], tf.float32), _log_or_zero),
     "no gradient reaches x through smooth_abs"),
    ((_quantized, lambda x: tf.sqrt(tf.stop_gradient(x) ** 2 + 1.0), _log_or_zero), "no gradient reaches x"),
    ((_quantized, lambda x: x ** 2 + 1.0, _log_or_zero), "smooth_abs changed its value"),
    ((_quantized, _smooth_abs, lambda x: tf.where(x > 0.0, tf.math.log(x + 1e-8), 0.0)),
     "log_or_zero changed its value: at x = 1e-06"),
    ((_quantized, _smooth_abs, lambda x: tf.where(x > 0.0, tf.math.log(tf.abs(x)), 0.0)),
     "log_or_zero's gradient holds nan at x = 0"),
    ((_quantized, _smooth_abs, lambda x: tf.math.log(tf.maximum(x, 1e-30))), "log_or_zero changed its value"),
])
def test_exercise_3_names_the_symptom_of_typical_mistakes(answers, message, refused):
    assert message in refused(check_exercise_3(*answers))


@pytest.mark.parametrize("seed", [None, 0, 3, 7])
@pytest.mark.parametrize("log_or_zero", [
    lambda x: tf.where(x > 0.0, tf.math.log(tf.maximum(x, c)), 0.0) for c in (1e-7, 1e-10, 1e-20)
] + [lambda x: tf.where(x > 0.0, tf.math.log(x + eps), 0.0) for eps in (1e-7, 1e-10, 1e-12)],
    ids=["clamp 1e-7", "clamp 1e-10", "clamp 1e-20", "epsilon 1e-7", "epsilon 1e-10", "epsilon 1e-12"])
def test_exercise_3_refuses_a_clamp_or_an_epsilon_and_names_them(log_or_zero, seed, refused):
    out = refused(check_exercise_3(_quantized, _smooth_abs, log_or_zero, seed=seed))
    assert "log_or_zero changed its value" in out and "an epsilon added to x or a clamp of x" in out
    assert "double" not in out and "tf.where(x > 0" not in out  # the fix is not given away


@pytest.mark.parametrize("answers, message", [
    ((lambda x: gradlab.straight_through(tf.round(x * 4.0), x) / 4.0, _smooth_abs, _log_or_zero),
     "x receives dy/4: a division after the estimator scales its gradient too"),
    ((_quantized, lambda x: gradlab.straight_through(tf.sqrt(x ** 2 + 1.0), x), _log_or_zero),
     "x receives dy unchanged: that is the identity's gradient, not sqrt(x**2 + 1)'s"),
])
def test_exercise_3_names_a_scaled_estimator_and_an_identity_gradient(answers, message, refused):
    out = refused(check_exercise_3(*answers))
    assert message in out and "(first difference at x = " in out and ", not " in out


def _rule(forward, backward):
    @tf.custom_gradient
    def op(x):
        return forward(x), lambda dy: backward(x, dy)
    return op


def test_exercise_3_catches_a_rule_that_forgets_dy(refused):
    out = refused(check_exercise_3(_rule(_broken_quantized, lambda x, dy: tf.ones_like(dy)), _smooth_abs, _log_or_zero))
    assert "x receives 1 whatever dy is: multiply by dy." in out
    assert "with upstream dy = [ 0.5 , -1.  ,  2.  ,  1.5 , -0.5 , -0.25,  0.75,  1.25]" in out
    out = refused(check_exercise_3(_quantized, _rule(_smooth_abs, lambda x, dy: x / tf.sqrt(x ** 2 + 1.0)), _log_or_zero))
    assert "smooth_abs: with upstream dy" in out and "whatever dy is" in out
    out = refused(check_exercise_3(_quantized, _rule(_smooth_abs, lambda x, dy: dy * 2.0 * x), _log_or_zero))
    assert "the square root's own derivative is missing" in out


def test_exercise_3_survives_bad_answers(refused):
    assert "ZeroDivisionError" in refused(check_exercise_3(lambda x: 1 / 0, _smooth_abs, _log_or_zero))
    assert "must return a tensor of x's shape" in refused(check_exercise_3(lambda x: None, _smooth_abs, _log_or_zero))
    assert "must return a tensor of x's shape" in refused(check_exercise_3(_quantized, lambda x: x[:2], _log_or_zero))
