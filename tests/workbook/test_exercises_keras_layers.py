"""The self-checks of notebook 03 (exercises/keras_layers.py) accept the answers and explain mistakes."""
from __future__ import annotations

import keras
import tensorflow as tf

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


def test_exercise_1_explains_the_starting_point_and_other_mistakes(capsys):
    def starting_point():
        inputs = keras.Input(shape=(3,))
        return keras.Model(inputs, _halve(inputs))
    assert check_exercise_1(starting_point).passed is False
    assert "cannot be called on a keras.Input" in capsys.readouterr().out
    assert check_exercise_1(lambda: _model(keras.layers.Identity())).passed is False
    assert "should receive half of it" in capsys.readouterr().out
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
    assert "keras.ops.copy" in capsys.readouterr().out

    def tf_only(x):
        def grad(upstream):
            return keras.ops.clip(upstream, -0.1, 0.1)
        return keras.ops.copy(x), grad
    assert check_exercise_2(tf_only).passed is False
    assert "PyTorch" in capsys.readouterr().out

    def no_clip(x):
        def grad(*args, upstream=None):
            return args[0] if upstream is None else upstream
        return keras.ops.copy(x), grad
    assert check_exercise_2(no_clip).passed is False
    assert "expected clip" in capsys.readouterr().out
