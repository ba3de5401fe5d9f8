"""The self-checks of notebook 01 (exercises/custom_gradient.py) accept the answers and explain mistakes."""
from __future__ import annotations

import numpy as np
import pytest
import tensorflow as tf

import gradlab
from exercises.custom_gradient import check_exercise_1, check_exercise_2


def _stable(x):
    return -(tf.maximum(-x, 0.0) + tf.math.log1p(tf.exp(-tf.abs(x))))


def _log_sigmoid_with(rule, forward=_stable):
    @tf.custom_gradient
    def log_sigmoid(x):
        return forward(x), lambda dy: rule(x, dy)
    return log_sigmoid


_log_sigmoid = _log_sigmoid_with(lambda x, dy: dy * tf.sigmoid(-x))


def test_exercise_1_accepts_a_stable_log_sigmoid_also_in_a_tf_function(accepted):
    assert accepted(check_exercise_1(_log_sigmoid)).startswith("Correct!")
    assert check_exercise_1(tf.function(_log_sigmoid)).passed is True


@pytest.mark.parametrize("answer", [tf.math.log_sigmoid, lambda x: -tf.nn.softplus(-x),
                                    lambda x: gradlab.map_gradient(tf.math.log_sigmoid(x), lambda dy: dy)])
def test_exercise_1_refuses_a_gradient_tensorflow_derives_itself(answer, refused):
    # Autodiff of -softplus(-x) gives dy * sigmoid(-x) too: the exercise asks for a custom gradient.
    out = refused(check_exercise_1(answer))
    assert out.startswith("Not yet") and "TensorFlow derived this gradient" in out
    assert "@tf.custom_gradient" in out


def test_exercise_1_explains_the_naive_version(refused):
    out = refused(check_exercise_1(lambda x: tf.math.log(tf.sigmoid(x))))  # the starting point
    assert "-softplus(-x)" in out and "-inf" in out and "stable formula" in out


@pytest.mark.parametrize("rule, message, sent", [
    (lambda x, dy: tf.sigmoid(-x), "ignores dy", "[1.    , 0.9933, 0.5   , 0.0067, 0.    ]"),
    (lambda x, dy: dy, "returns dy unchanged", "[ 2. , -1. ,  0.5,  3. , -2. ]"),
    (lambda x, dy: dy * tf.sigmoid(x), "this is dy * sigmoid(x)", "[ 0.    , -0.0067,  0.25  ,  2.9799, -2.    ]"),
])
def test_exercise_1_explains_a_wrong_grad_with_the_numbers(rule, message, sent, refused):
    out = refused(check_exercise_1(_log_sigmoid_with(rule)))
    assert message in out and f"you send back {sent}" in out
    assert "dy * sigmoid(-x) is [ 2.    , -0.9933,  0.25  ,  0.0201,  0.    ]" in out


def test_exercise_1_reports_no_gradient_and_a_raising_answer(refused):
    assert "ZeroDivisionError" in refused(check_exercise_1(lambda x: 1 / 0))
    assert "no gradient" in refused(check_exercise_1(lambda x: tf.stop_gradient(tf.math.log_sigmoid(x))))


def test_exercise_1_reports_an_answer_that_cannot_be_traced(refused):
    def eager_only(x):
        return _log_sigmoid(x) + 0.0 * float(np.sum(x.numpy()))    # .numpy() fails in a tf.function
    out = refused(check_exercise_1(eager_only))
    assert "tracing log_sigmoid" in out and "no .numpy()" in out


def _product(grad_rule):
    @tf.custom_gradient
    def product(x, w):
        return x * w, lambda dy: grad_rule(x, w, dy)
    return product


def test_exercise_2_accepts_the_chain_rule(accepted):
    assert accepted(check_exercise_2(_product(lambda x, w, dy: (dy * w, dy * x)))).startswith("Correct!")


def test_exercise_2_refuses_a_product_without_a_custom_gradient(refused):
    out = refused(check_exercise_2(lambda x, w: x * w))
    assert "TensorFlow derived this gradient" in out and "ops of product" in out


def test_exercise_2_explains_the_starting_point(refused):
    out = refused(check_exercise_2(_product(lambda x, w, dy: w)))
    assert "expected to return 2 gradients" in out and "two gradients, one per" in out


@pytest.mark.parametrize("rule, message, got", [
    (lambda x, w, dy: (w, x), "grad forgets the upstream gradient\n(bug 1). Multiply by dy", "[ 0.5,  4. , -1. ]"),
    (lambda x, w, dy: (dy * x, dy * w), "the gradients are swapped", "[ 2.,  2., 30.]"),
    (lambda x, w, dy: (dy, dy), "you send dy unchanged", "[ 2., -1., 10.]"),
])
def test_exercise_2_explains_each_bug_with_the_numbers(rule, message, got, refused):
    out = refused(check_exercise_2(_product(rule)))
    assert message in out
    assert f"the gradient w.r.t. x is {got}; the chain rule gives [  1.,  -4., -10.]" in out


def test_exercise_2_reports_a_missing_gradient_and_a_wrong_value(refused):
    assert "no gradient reaches w" in refused(check_exercise_2(_product(lambda x, w, dy: (dy * w, None))))
    assert "forward value must be x * w = [ 0.5, -8. , -3. ]; you return [1.5, 2. , 2. ]" in refused(
        check_exercise_2(lambda x, w: x + w)
    )


def test_exercise_1_refuses_a_hard_coded_answer(refused):
    """The first case's value and gradient, returned whatever x and dy are: the second case refuses them."""
    x, dy = tf.constant([-200.0, -5.0, 0.0, 5.0, 200.0]), tf.constant([2.0, -1.0, 0.5, 3.0, -2.0])

    @tf.custom_gradient
    def hard_coded(t):
        return -tf.nn.softplus(-x), lambda upstream: dy * tf.sigmoid(-x)
    out = refused(check_exercise_1(hard_coded))
    assert "at x = [-150.  ,   -2.5 ," in out


def test_exercise_2_refuses_a_hard_coded_answer(refused):
    x, w, dy = tf.constant([1.0, -2.0, 3.0]), tf.constant([0.5, 4.0, -1.0]), tf.constant([2.0, -1.0, 10.0])

    @tf.custom_gradient
    def hard_coded(a, b):
        return a * b, lambda upstream: (dy * w, dy * x)
    out = refused(check_exercise_2(hard_coded))
    assert "x has shape (4,), but grad sends it a gradient of shape (3,)" in out


def _fitted(public, right, wrong):
    """A grad rule right on the inputs the public check tries (a table of them) and wrong elsewhere."""
    def rule(x, *args):
        seen = any(np.array_equal(x.numpy(), np.float32(p)) for p in public)
        return (right if seen else wrong)(x, *args)
    return rule


@pytest.mark.parametrize("seed", [0, 1, 2024])
def test_held_out_cases_decide_as_the_public_ones(seed):
    """The instructor edition's held-out cases (check_exercise_N(..., seed=...)): other inputs, same verdicts."""
    assert check_exercise_1.verdict(_log_sigmoid, seed=seed).passed
    for wrong in (lambda x, dy: tf.sigmoid(-x), lambda x, dy: dy, lambda x, dy: dy * tf.sigmoid(x)):
        assert not check_exercise_1.verdict(_log_sigmoid_with(wrong), seed=seed).passed
    assert not check_exercise_1.verdict(tf.math.log_sigmoid, seed=seed).passed
    assert check_exercise_2.verdict(_product(lambda x, w, dy: (dy * w, dy * x)), seed=seed).passed
    for wrong in (lambda x, w, dy: (w, x), lambda x, w, dy: (dy * x, dy * w), lambda x, w, dy: (dy, dy)):
        assert not check_exercise_2.verdict(_product(wrong), seed=seed).passed
    assert not check_exercise_2.verdict(lambda x, w: x * w, seed=seed).passed


def test_held_out_cases_refuse_answers_fitted_to_the_public_ones():
    fitted_1 = _log_sigmoid_with(_fitted([[-200.0, -5.0, 0.0, 5.0, 200.0], [-150.0, -2.5, 0.5, 1.5, 120.0, -0.25]],
                                         lambda x, dy: dy * tf.sigmoid(-x), lambda x, dy: dy))
    assert check_exercise_1.verdict(fitted_1).passed
    assert "returns dy unchanged" in check_exercise_1.verdict(fitted_1, seed=7).message
    fitted_2 = _product(_fitted([[1.0, -2.0, 3.0], [-0.5, 2.5, 1.5, 4.0]],
                                lambda x, w, dy: (dy * w, dy * x), lambda x, w, dy: (dy * x, dy * w)))
    assert check_exercise_2.verdict(fitted_2).passed
    assert "the gradients are swapped" in check_exercise_2.verdict(fitted_2, seed=7).message
