"""The self-checks of notebook 04 (exercises/surrogate.py) accept the answers and explain mistakes."""
from __future__ import annotations

import numpy as np
import tensorflow as tf

import gradlab
from exercises.surrogate import check_exercise_1, check_exercise_2, heaviside


def _step(rule):
    @tf.custom_gradient
    def step(x):
        return heaviside(x), lambda dy: rule(x, dy)
    return step


def test_exercise_1_accepts_the_arctan_surrogate(capsys):
    assert check_exercise_1(_step(lambda x, dy: dy / (1.0 + tf.square(np.pi * x)))).passed is True
    assert capsys.readouterr().out.startswith("Correct!")
    assert check_exercise_1(lambda x: gradlab.straight_through(heaviside(x), tf.atan(np.pi * x) / np.pi)).passed is True


def test_exercise_1_explains_mistakes(capsys):
    assert check_exercise_1(_step(lambda x, dy: tf.zeros_like(dy))).passed is False          # the starting point
    assert "does not send" in capsys.readouterr().out
    assert check_exercise_1(_step(lambda x, dy: 1.0 / (1.0 + tf.square(np.pi * x)))).passed is False
    assert "ignores dy" in capsys.readouterr().out
    assert check_exercise_1(heaviside).passed is False
    assert "no gradient reaches x" in capsys.readouterr().out
    assert check_exercise_1(tf.sigmoid).passed is False
    assert "forward value" in capsys.readouterr().out
    assert check_exercise_1(lambda x: 1 / 0).passed is False
    assert "ZeroDivisionError" in capsys.readouterr().out


def test_exercise_2_accepts_the_repair_and_explains_mistakes(capsys):
    assert check_exercise_2(_step(lambda x, dy: dy * tf.maximum(0.0, 1.0 - tf.abs(x)))).passed is True
    assert capsys.readouterr().out.startswith("Correct!")
    assert check_exercise_2(_step(lambda x, dy: tf.maximum(0.0, 1.0 - tf.abs(x)))).passed is False
    assert "Multiply by dy" in capsys.readouterr().out
    assert check_exercise_2(_step(lambda x, dy: 2.0 * dy)).passed is False
    assert "is not dy * max" in capsys.readouterr().out
    assert check_exercise_2(tf.sigmoid).passed is False
    assert "forward value" in capsys.readouterr().out
