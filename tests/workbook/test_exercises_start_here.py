"""The self-checks of notebook 00 (exercises/start_here.py) accept the answers and explain mistakes."""
from __future__ import annotations

import numpy as np
import pytest
import tensorflow as tf

import gradlab
from exercises.start_here import check_exercise_1, check_exercise_2


def custom_op(rule, forward=tf.identity):
    """scale_and_clip(x, factor, bound) built from a backward rule(dy, factor, bound)."""
    def scale_and_clip(x, factor, bound):
        @tf.custom_gradient
        def op(x):
            def grad(dy):
                return rule(dy, factor, bound)
            return forward(x), grad
        return op(x)
    return scale_and_clip


RIGHT = custom_op(lambda dy, f, b: tf.clip_by_value(f * dy, -b, b))


def test_exercise_1_accepts_the_solution(accepted):
    assert accepted(check_exercise_1(RIGHT)).startswith("Correct!")


def test_exercise_1_accepts_gradlab_ops_chained():
    def packaged(x, factor, bound):
        return gradlab.scale_gradient(gradlab.clip_gradient(x, -bound, bound), factor)
    assert check_exercise_1(packaged).passed is True


@pytest.mark.parametrize("answer, message", [
    (custom_op(lambda dy, f, b: dy), "returns dy unchanged"),                                  # the starting point
    (custom_op(lambda dy, f, b: f * tf.clip_by_value(dy, -b, b)), "clipped first, then scaled"),
    (custom_op(lambda dy, f, b: tf.clip_by_value(f * tf.ones_like(dy), -b, b)), "ignores dy"),
    (custom_op(lambda dy, f, b: f * dy), "scaled dy but did not clip it"),
    (custom_op(lambda dy, f, b: tf.clip_by_value(dy, -b, b)), "clipped dy but did not scale it"),
    (custom_op(lambda dy, f, b: tf.clip_by_value(-f * dy, -b, b)), "sign is flipped"),
    (custom_op(lambda dy, f, b: tf.clip_by_value(f * dy + 0.5, -b, b)), "clip(factor * dy, -bound, bound)"),
    (custom_op(lambda dy, f, b: tf.clip_by_value(f * dy, -b, b), forward=lambda x: x + 0.0), "bit for bit"),
    (custom_op(lambda dy, f, b: tf.clip_by_value(f * dy, -b, b), forward=lambda x: 2.0 * x), "forward value changed"),
    (lambda x, factor, bound: tf.stop_gradient(x), "no gradient reaches x"),
    (lambda x, factor, bound: None, "returned None"),
])
def test_exercise_1_explains_typical_mistakes(answer, message, refused):
    out = refused(check_exercise_1(answer))
    assert out.startswith("Not yet") and message in out


@pytest.mark.parametrize("rule, received", [
    (lambda dy, f, b: dy, "x receives [ 0.1  -0.2   0.5  -2.    0.02]"),
    (lambda dy, f, b: f * dy, "x receives [ 0.3  -0.6   1.5  -6.    0.06]"),
    (lambda dy, f, b: f * tf.clip_by_value(dy, -b, b), "x receives [ 0.3  -0.6   1.5  -3.    0.06]"),
])
def test_exercise_1_shows_what_x_receives_and_what_it_should(rule, received, refused):
    out = refused(check_exercise_1(custom_op(rule)))
    assert "factor=3.0, bound=1.0 and upstream dy = [ 0.1  -0.2   0.5  -2.    0.02]" in out
    assert received in out and "expected   [ 0.3  -0.6   1.   -1.    0.06]" in out


def test_exercise_1_does_not_crash_on_a_raising_answer(refused):
    assert "ZeroDivisionError" in refused(check_exercise_1(lambda x, factor, bound: 1 / 0))
    assert "TypeError" in refused(check_exercise_1(lambda x: x))  # wrong signature
    assert refused(check_exercise_1(custom_op(lambda dy, f, b: (dy, dy)))).startswith("Not yet")  # grad returns too much


@pytest.mark.parametrize("answer", [2.0, 2, np.float32(2.0), tf.constant(2.0)])
def test_exercise_2_accepts_the_prediction(answer, accepted):
    assert accepted(check_exercise_2(answer)).startswith("Correct! dL/dx = 2.0")


@pytest.mark.parametrize("answer, message", [
    (None, "set your_answer"),
    (1.0, "clip sits on x"),
    (0.0, "does not cut it"),
    (-2.0, "wrong sign"),
    (0.5, "Follow the backward pass"),
    ("2", "should be a number"),
    (True, "should be a number"),
    (np.array([1.0, 2.0]), "one number"),
])
def test_exercise_2_explains_wrong_predictions(answer, message, refused):
    out = refused(check_exercise_2(answer))
    assert out.startswith("Not yet") and message in out
    assert "2.0" not in out.replace(repr(answer), "")          # never the answer itself


def test_exercise_1_refuses_a_hard_coded_factor_and_bound(refused):
    """factor 3 and bound 1 of the first setting, whatever the arguments: the second setting refuses them."""
    out = refused(check_exercise_1(custom_op(lambda dy, f, b: tf.clip_by_value(3.0 * dy, -1.0, 1.0))))
    assert "with factor=-2.0, bound=0.5" in out


@pytest.mark.parametrize("seed", [0, 1, 2024])
def test_exercise_1_held_out_cases_decide_as_the_public_ones(seed):
    """The instructor edition's held-out cases (check_exercise_1(..., seed=...)): other inputs, same verdicts."""
    assert check_exercise_1.verdict(RIGHT, seed=seed).passed
    for wrong in (lambda dy, f, b: dy, lambda dy, f, b: f * tf.clip_by_value(dy, -b, b), lambda dy, f, b: f * dy):
        assert not check_exercise_1.verdict(custom_op(wrong), seed=seed).passed


def test_exercise_1_held_out_cases_refuse_an_answer_fitted_to_the_public_ones():
    def fitted(dy, f, b):
        return tf.clip_by_value(f * dy, -b, b) if dy.shape[0] == 5 else dy
    assert check_exercise_1.verdict(custom_op(fitted)).passed
    assert "returns dy unchanged" in check_exercise_1.verdict(custom_op(fitted), seed=7).message
