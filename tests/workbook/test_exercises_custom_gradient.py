"""The self-checks of notebook 01 (exercises/custom_gradient.py) accept the answers and explain mistakes."""
from __future__ import annotations

import tensorflow as tf

from exercises.custom_gradient import check_exercise_1, check_exercise_2


@tf.custom_gradient
def _log_sigmoid(x):
    y = -(tf.maximum(-x, 0.0) + tf.math.log1p(tf.exp(-tf.abs(x))))
    return y, lambda dy: dy * tf.sigmoid(-x)


@tf.custom_gradient
def _log_sigmoid_forgets_dy(x):
    y = -(tf.maximum(-x, 0.0) + tf.math.log1p(tf.exp(-tf.abs(x))))
    return y, lambda dy: tf.sigmoid(-x)


def test_exercise_1_accepts_a_stable_log_sigmoid_and_tensorflows_own(capsys):
    assert check_exercise_1(_log_sigmoid).passed is True
    assert capsys.readouterr().out.startswith("Correct!")
    assert check_exercise_1(tf.math.log_sigmoid).passed is True


def test_exercise_1_explains_the_naive_version_a_forgotten_dy_and_a_raising_answer(capsys):
    assert check_exercise_1(lambda x: tf.math.log(tf.sigmoid(x))).passed is False
    assert "-softplus(-x)" in capsys.readouterr().out
    assert check_exercise_1(_log_sigmoid_forgets_dy).passed is False
    assert "Did grad multiply by dy?" in capsys.readouterr().out
    assert check_exercise_1(lambda x: 1 / 0).passed is False
    assert "ZeroDivisionError" in capsys.readouterr().out
    assert check_exercise_1(lambda x: tf.stop_gradient(tf.math.log_sigmoid(x))).passed is False
    assert "no gradient" in capsys.readouterr().out


def _product(grad_rule):
    @tf.custom_gradient
    def product(x, w):
        return x * w, lambda dy: grad_rule(x, w, dy)
    return product


def test_exercise_2_accepts_the_chain_rule(capsys):
    assert check_exercise_2(_product(lambda x, w, dy: (dy * w, dy * x))).passed is True
    assert capsys.readouterr().out.startswith("Correct!")
    assert check_exercise_2(lambda x, w: x * w).passed is True


def test_exercise_2_explains_each_bug(capsys):
    assert check_exercise_2(_product(lambda x, w, dy: w)).passed is False                  # the starting point
    assert "expected to return 2 gradients" in capsys.readouterr().out
    assert check_exercise_2(_product(lambda x, w, dy: (w, x))).passed is False             # forgets dy
    assert "the chain rule gives" in capsys.readouterr().out
    assert check_exercise_2(_product(lambda x, w, dy: (dy * w, None))).passed is False
    assert "no gradient reaches w" in capsys.readouterr().out
    assert check_exercise_2(lambda x, w: x + w).passed is False
    assert "forward value" in capsys.readouterr().out
