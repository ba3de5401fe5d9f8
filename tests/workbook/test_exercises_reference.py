"""The self-checks of notebook 11 (exercises/reference.py) accept the answers and explain mistakes."""
from __future__ import annotations

import tensorflow as tf

import gradlab
from exercises.reference import check_exercise_1, check_exercise_2


@tf.custom_gradient
def _hard_sign(t):
    return tf.sign(t), lambda dy: dy * tf.cast(tf.abs(t) <= 1.0, t.dtype)


@tf.custom_gradient
def _hard_sign_forgets_dy(t):
    return tf.sign(t), lambda dy: tf.cast(tf.abs(t) <= 1.0, t.dtype)


def test_exercise_1_accepts_the_fixed_binarize(capsys):
    assert check_exercise_1(lambda x: _hard_sign(x)).passed is True
    assert capsys.readouterr().out.startswith("Correct!")


def test_exercise_1_catches_the_keyword_call(capsys):
    assert check_exercise_1(lambda x: _hard_sign(t=x)).passed is False
    assert "Not yet" in capsys.readouterr().out


def test_exercise_1_catches_a_grad_that_ignores_dy(capsys):
    assert check_exercise_1(lambda x: _hard_sign_forgets_dy(x)).passed is False
    assert "multiply by dy" in capsys.readouterr().out


def test_exercise_1_reports_a_wrong_value_and_a_raising_answer(capsys):
    assert check_exercise_1(lambda x: x).passed is False
    assert "sign(x)" in capsys.readouterr().out
    assert check_exercise_1(lambda x: 1 / 0).passed is False
    assert "ZeroDivisionError" in capsys.readouterr().out


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


def test_exercise_2_accepts_a_variable(capsys):
    assert check_exercise_2(_make_step(live=True)).passed is True
    assert capsys.readouterr().out.startswith("Correct!")


def test_exercise_2_explains_the_frozen_python_number(capsys):
    assert check_exercise_2(_make_step(live=False)).passed is False
    assert "tf.Variable" in capsys.readouterr().out


def test_exercise_2_catches_retracing_and_errors(capsys):
    def make_step(initial):
        state = {"factor": initial}

        def step(t):  # retraces on every new Python value: correct numbers, the wrong mechanism
            return tf.function(lambda u: gradlab.scale_gradient(u, state["factor"]) * 0 + state["factor"])(t)

        step.experimental_get_tracing_count = lambda: 2
        return step, lambda v: state.__setitem__("factor", v)

    assert check_exercise_2(make_step).passed is False
    assert "traced 2 times" in capsys.readouterr().out
    assert check_exercise_2(lambda initial: None).passed is False
    assert "TypeError" in capsys.readouterr().out
