"""The self-checks of notebook 08 (exercises/higher_order.py) accept the answers and explain mistakes."""
from __future__ import annotations

import re

import numpy as np
import tensorflow as tf

from exercises.higher_order import _transposed, check_exercise_1, check_exercise_2


def test_exercise_1_accepts_the_right_predictions(capsys):
    assert check_exercise_1(18.0, 6).passed is True
    assert capsys.readouterr().out.startswith("Correct!")
    assert check_exercise_1(np.float32(18.0), tf.constant(6.0)).passed is True


def test_exercise_1_the_starting_point_gives_nothing_away(capsys):
    """Run All shows this message: it must not state either prediction."""
    assert check_exercise_1(None, None).passed is False
    out = capsys.readouterr().out
    assert out == "Not yet: replace both None with your predictions (numbers).\n"
    assert "18" not in out and "6" not in out


def test_exercise_1_explains_swaps_and_each_wrong_prediction_without_the_answer(capsys):
    assert check_exercise_1(6.0, 18.0).passed is False
    assert "on_input = 6 and on_output = 18: you swapped them" in capsys.readouterr().out
    assert check_exercise_1(6.0, 6.0).passed is False
    out = capsys.readouterr().out
    assert "(on_input): 6 applies the factor 3 once" in out and "goes back through the op" in out
    assert check_exercise_1(18.0, 18.0).passed is False
    out = capsys.readouterr().out
    assert "(on_output): 18 applies the factor 3 twice" in out and "does not depend on x" in out
    assert check_exercise_1(9.0, 6.0).passed is False
    assert "(on_input): 9 is the first derivative" in capsys.readouterr().out
    assert check_exercise_1(18.0, 2.0).passed is False
    assert "(on_output): 2 is f'' of x^2 with no factor" in capsys.readouterr().out
    assert check_exercise_1(54.0, 6.0).passed is False
    out = capsys.readouterr().out
    assert "(on_input): 54 is not it" in out and "Count how many times" in out
    for wrong in ((2.0, 2.0), (54.0, 12.0), (9.0, 9.0), (12.0, 2.0)):     # neither answer is stated
        assert check_exercise_1(*wrong).passed is False
        out = capsys.readouterr().out
        assert not re.search(r"\b(18|6)(\.0)?\b", out), out


def test_exercise_1_explains_bad_types(capsys):
    assert check_exercise_1("eighteen", 6.0).passed is False
    assert "on_input is str 'eighteen'" in capsys.readouterr().out
    assert check_exercise_1(18.0, True).passed is False
    assert "on_output is bool True" in capsys.readouterr().out


def _transpose(fn, x, u):
    """The right answer, as the check's own reference computes it: the VJP differentiated under u."""
    return _transposed(fn, x, u, upstream=u)


def test_exercise_2_accepts_the_transpose(capsys):
    assert check_exercise_2(_transpose).passed is True
    out = capsys.readouterr().out
    assert out.startswith("Correct!") and "transposed: None" in out


def test_exercise_2_explains_the_starting_point_forward_mode_and_a_raising_answer(capsys):
    assert check_exercise_2(lambda fn, x, u: u).passed is False
    out = capsys.readouterr().out
    assert "on tf.sin" in out and "you get [1. 2. 3.]" in out and "[0.9553 1.6507 1.0871]" in out
    assert "the tangent unchanged (the starting point)" in out

    def forward_mode(fn, x, u):                 # ForwardAccumulator ignores scale_gradient
        with tf.autodiff.ForwardAccumulator(primals=x, tangents=u) as acc:
            y = fn(x)
        return acc.jvp(y)
    assert check_exercise_2(forward_mode).passed is False
    out = capsys.readouterr().out
    assert "on scale_gradient(x, 5)" in out and "[ 5. 10. 15.]" in out and "forward mode (ForwardAccumulator) ignores" in out
    assert check_exercise_2(lambda fn, x, u: 1 / 0).passed is False
    assert "ZeroDivisionError" in capsys.readouterr().out


def test_exercise_2_refuses_the_gradient_times_u_and_the_vjp_of_u(capsys):
    """Both are right for every elementwise function; a cumulative sum has a Jacobian that is not diagonal."""
    def gradient_times_u(fn, x, u):
        with tf.GradientTape() as tape:
            tape.watch(x)
            y = fn(x)
        return tape.gradient(y, x) * u
    assert check_exercise_2(gradient_times_u).passed is False
    out = capsys.readouterr().out
    assert "tf.cumsum(scale_gradient(x, 5))" in out and "you get [15. 20. 15.]" in out and "[ 5. 15. 30.]" in out
    assert "only when J is diagonal" in out

    def vjp_of_u(fn, x, u):
        with tf.GradientTape() as tape:
            tape.watch(x)
            y = fn(x)
        return tape.gradient(y, x, output_gradients=u)
    assert check_exercise_2(vjp_of_u).passed is False
    out = capsys.readouterr().out
    assert "you get [30. 25. 15.]" in out and "the VJP J^T u (reverse mode)" in out


def test_exercise_2_refuses_a_jacobian(capsys):
    """J u by a full Jacobian is right for every linear rule; only a transposed VJP gives a non-linear rule's derivative."""
    def jacobian(fn, x, u):
        with tf.GradientTape() as tape:
            tape.watch(x)
            y = fn(x)
        return tf.linalg.matvec(tape.jacobian(y, x), u)
    assert check_exercise_2(jacobian).passed is False
    out = capsys.readouterr().out
    assert "on detached: clip_by_norm(dy, 1)" in out and "you get [1. 2. 3.]" in out
    assert "[-0.5774  0.      0.5774]" in out and "not linear in dy" in out and "a Jacobian" in out


def test_exercise_2_explains_forgotten_output_gradients_an_unwatched_w_and_wrong_shapes(capsys):
    def without_u(fn, x, u):
        return _transpose(fn, x, None)
    assert check_exercise_2(without_u).passed is False
    out = capsys.readouterr().out
    assert "you get [0.9553 0.8253 0.3624]" in out and "J times ones: pass output_gradients=u" in out
    assert check_exercise_2(lambda fn, x, u: None).passed is False
    assert "returned None. Did the outer tape watch w" in capsys.readouterr().out
    assert check_exercise_2(lambda fn, x, u: [1.0]).passed is False
    assert "returns shape (1,)" in capsys.readouterr().out
