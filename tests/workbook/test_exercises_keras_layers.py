"""The self-checks of notebook 03 (exercises/keras_layers.py) accept the answers and explain mistakes."""
from __future__ import annotations

import keras
import numpy as np
import tensorflow as tf

import gradlab

from exercises.keras_layers import check_exercise_1, check_exercise_2


@tf.custom_gradient
def _halve(x):
    return tf.identity(x), lambda dy: 0.5 * dy


class _Halve(keras.layers.Layer):
    def call(self, inputs):
        return _halve(inputs)


def _model(layer):
    inputs = keras.Input(shape=(3,))
    return keras.Model(inputs, layer(inputs))


def test_exercise_1_accepts_a_layer_and_a_lambda(capsys):
    assert check_exercise_1(lambda: _model(_Halve())).passed is True
    assert capsys.readouterr().out.startswith("Correct!")
    assert check_exercise_1(lambda: _model(keras.layers.Lambda(_halve))).passed is True
    assert check_exercise_1(lambda: _model(keras.layers.Lambda(lambda t: gradlab.scale_gradient(t, 0.5)))).passed is True


def test_exercise_1_refuses_a_halved_gradient_without_a_custom_gradient(capsys):
    # 0.5 x + stop_gradient(0.5 x) is x bit for bit, and autodiff halves its gradient: no custom gradient.
    trick = keras.layers.Lambda(lambda t: 0.5 * t + tf.stop_gradient(0.5 * t))
    assert check_exercise_1(lambda: _model(trick)).passed is False
    out = capsys.readouterr().out
    assert "TensorFlow derived that gradient" in out and "halve_gradient inside a layer" in out


def test_exercise_1_explains_the_starting_point_and_other_mistakes(capsys):
    def starting_point():
        inputs = keras.Input(shape=(3,))
        return keras.Model(inputs, _halve(inputs))
    assert check_exercise_1(starting_point).passed is False
    assert "cannot be called on a keras.Input" in capsys.readouterr().out
    assert check_exercise_1(lambda: _model(keras.layers.Identity())).passed is False
    out = capsys.readouterr().out
    assert "should receive half of it,\n[[ 0.5   1.   -2.  ]\n [ 0.25 -0.5   1.5 ]]" in out
    assert "the input receives\n[[ 1.   2.  -4. ]\n [ 0.5 -1.   3. ]]" in out and "arrives unchanged" in out
    quarter = keras.layers.Lambda(lambda t: gradlab.scale_gradient(t, 0.25))
    assert check_exercise_1(lambda: _model(quarter)).passed is False
    out = capsys.readouterr().out
    assert "[[ 0.25   0.5   -1.   ]" in out and "the only thing between" in out
    assert check_exercise_1(lambda: "not a model").passed is False
    assert "keras.Model" in capsys.readouterr().out
    assert check_exercise_1(lambda: 1 / 0).passed is False
    assert "ZeroDivisionError" in capsys.readouterr().out


def _agnostic(x):
    def grad(*args, upstream=None):
        if upstream is None:
            (upstream,) = args
        return keras.ops.clip(upstream, -0.1, 0.1)
    return keras.ops.copy(x), grad


def test_exercise_2_accepts_both_calling_conventions(capsys):
    assert check_exercise_2(_agnostic).passed is True
    assert capsys.readouterr().out.startswith("Correct!")


def test_exercise_2_explains_identity_and_the_torch_convention(capsys):
    def starting_point(x):
        def grad(upstream):
            return keras.ops.clip(upstream, -0.1, 0.1)
        return keras.ops.identity(x), grad
    assert check_exercise_2(starting_point).passed is False
    out = capsys.readouterr().out
    assert "n x n identity matrix" in out and "Section 2 names" in out
    assert "keras.ops.copy" not in out and "upstream=None" not in out            # no solution code

    def tf_only(x):
        def grad(upstream):
            return keras.ops.clip(upstream, -0.1, 0.1)
        return keras.ops.copy(x), grad
    assert check_exercise_2(tf_only).passed is False
    out = capsys.readouterr().out
    assert "as PyTorch calls it raised TypeError" in out and "accepts both calls" in out
    assert "upstream=None" not in out                                            # no solution code

    def clips_x(x):
        def grad(*args, upstream=None):
            return keras.ops.clip(args[0], -0.1, 0.1)
        return keras.ops.copy(x), grad
    assert check_exercise_2(clips_x).passed is False
    out = capsys.readouterr().out
    assert "returned [[ 0.1 -0.1  0.1]] for upstream [[ 0.05 -0.4   2.  ]]" in out and "you clipped x" in out

    def no_clip(x):
        def grad(*args, upstream=None):
            return args[0] if upstream is None else upstream
        return keras.ops.copy(x), grad
    assert check_exercise_2(no_clip).passed is False
    out = capsys.readouterr().out
    assert "expected clip(upstream, -0.1, 0.1) = [[ 0.05 -0.1   0.1 ]]" in out and "unchanged" in out
    assert check_exercise_2(lambda x: x).passed is False
    assert "return two things" in capsys.readouterr().out


def test_exercise_2_reports_an_answer_that_breaks_only_inside_a_keras_model(capsys):
    """A value made with NumPy passes the eager part; building the Keras model then fails: a Not yet."""
    def numpy_value(x):
        def grad(*args, upstream=None):
            upstream = args[-1] if upstream is None else upstream
            return keras.ops.clip(upstream, -0.1, 0.1)
        return tf.constant(np.array(x)), grad

    assert check_exercise_2(numpy_value).passed is False
    out = capsys.readouterr().out
    assert out.startswith("Not yet") and "Keras model" in out
