"""The self-checks of notebook 08 (exercises/higher_order.py) accept the answers and explain mistakes."""
from __future__ import annotations

import tensorflow as tf

from exercises.higher_order import check_exercise_1, check_exercise_2


def test_exercise_1_accepts_the_right_predictions(capsys):
    assert check_exercise_1(18.0, 6).passed is True
    assert capsys.readouterr().out.startswith("Correct!")


def test_exercise_1_explains_the_starting_point_swaps_and_bad_types(capsys):
    assert check_exercise_1(None, None).passed is False
    assert "replace both None" in capsys.readouterr().out
    assert check_exercise_1(6.0, 18.0).passed is False
    assert "swapped" in capsys.readouterr().out
    assert check_exercise_1(6.0, 6.0).passed is False
    assert "goes back through the op" in capsys.readouterr().out
    assert check_exercise_1("eighteen", 6.0).passed is False
    assert "numbers" in capsys.readouterr().out
    assert check_exercise_1(2.0, 2.0).passed is False
    assert "Count how many times" in capsys.readouterr().out


def _transpose(fn, x, u):
    with tf.GradientTape() as outer:
        with tf.GradientTape() as inner:
            inner.watch(x)
            y = fn(x)
        w = tf.ones_like(y)
        outer.watch(w)
        vjp = inner.gradient(y, x, output_gradients=w)
    return outer.gradient(vjp, w, output_gradients=u)


def test_exercise_2_accepts_the_transpose(capsys):
    assert check_exercise_2(_transpose).passed is True
    out = capsys.readouterr().out
    assert out.startswith("Correct!") and "transposed: None" in out


def test_exercise_2_explains_the_starting_point_forward_mode_and_a_raising_answer(capsys):
    assert check_exercise_2(lambda fn, x, u: u).passed is False
    assert "on tf.sin" in capsys.readouterr().out

    def forward_mode(fn, x, u):                 # ForwardAccumulator ignores scale_gradient
        with tf.autodiff.ForwardAccumulator(primals=x, tangents=u) as acc:
            y = fn(x)
        return acc.jvp(y)
    assert check_exercise_2(forward_mode).passed is False
    assert "scale_gradient" in capsys.readouterr().out
    assert check_exercise_2(lambda fn, x, u: 1 / 0).passed is False
    assert "ZeroDivisionError" in capsys.readouterr().out


def test_exercise_2_reports_none_and_wrong_shapes(capsys):
    assert check_exercise_2(lambda fn, x, u: None).passed is False
    assert "returned None" in capsys.readouterr().out
    assert check_exercise_2(lambda fn, x, u: [1.0]).passed is False
    assert "Not yet" in capsys.readouterr().out
