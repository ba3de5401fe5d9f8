"""The self-checks of notebook 10 (exercises/legacy.py) accept the answers and explain mistakes."""
from __future__ import annotations

import tensorflow as tf

import gradlab
from exercises.legacy import check_exercise_1, check_exercise_2


def _leaky(op, grad):
    return grad * tf.where(op.inputs[0] > 0, 1.0, 0.1)


def test_exercise_1_accepts_the_override_and_explains_mistakes(capsys):
    def answer(x):
        with gradlab.gradient_override({"Relu": _leaky}):
            return tf.nn.relu(x)
    assert check_exercise_1(answer).passed is True
    assert capsys.readouterr().out.startswith("Correct!")
    assert check_exercise_1(tf.nn.relu).passed is False                       # the starting point
    assert "ReLU's own" in capsys.readouterr().out
    assert check_exercise_1(lambda x: tf.nn.leaky_relu(x, 0.1)).passed is False
    assert "forward value must stay relu" in capsys.readouterr().out
    assert check_exercise_1(lambda x: 1 / 0).passed is False
    assert "ZeroDivisionError" in capsys.readouterr().out


def test_exercise_2_accepts_a_custom_gradient_and_explains_the_ignored_map(capsys):
    assert check_exercise_2(lambda x: gradlab.clip_gradient(x, -0.1, 0.1)).passed is True
    assert capsys.readouterr().out.startswith("Correct!")

    def legacy(x):
        with tf.compat.v1.get_default_graph().gradient_override_map({"Identity": "CustomClipGrad"}):
            return tf.identity(x)
    assert check_exercise_2(legacy).passed is False
    assert "silently ignored" in capsys.readouterr().out
    assert check_exercise_2(lambda x: gradlab.clip_gradient(x, -0.2, 0.2)).passed is False
    assert "clip_by_value(dy, -0.1, 0.1)" in capsys.readouterr().out
    assert check_exercise_2(lambda x: x + 1.0).passed is False
    assert "forward value" in capsys.readouterr().out
