"""The self-checks of notebook 03 (exercises/keras_layers.py) accept the answers and explain mistakes."""
from __future__ import annotations

import keras
import numpy as np
import pytest
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


def test_exercise_1_accepts_a_layer_and_a_lambda(accepted):
    assert accepted(check_exercise_1(lambda: _model(_Halve()))).startswith("Correct!")
    assert check_exercise_1(lambda: _model(keras.layers.Lambda(_halve))).passed is True
    assert check_exercise_1(lambda: _model(keras.layers.Lambda(lambda t: gradlab.scale_gradient(t, 0.5)))).passed is True


def test_exercise_1_refuses_a_halved_gradient_without_a_custom_gradient(refused):
    # 0.5 x + stop_gradient(0.5 x) is x bit for bit, and autodiff halves its gradient: no custom gradient.
    trick = keras.layers.Lambda(lambda t: 0.5 * t + tf.stop_gradient(0.5 * t))
    out = refused(check_exercise_1(lambda: _model(trick)))
    assert "TensorFlow derived that gradient" in out and "halve_gradient inside a layer" in out


def test_exercise_1_explains_the_starting_point_and_other_mistakes(refused):
    def starting_point():
        inputs = keras.Input(shape=(3,))
        return keras.Model(inputs, _halve(inputs))
    out = refused(check_exercise_1(starting_point))
    assert "cannot be called on a keras.Input" in out and "receive real tensors? (section 1)" in out
    assert "Layer subclass" not in out and "keras.layers.Lambda" not in out  # no solution
    out = refused(check_exercise_1(lambda: _model(keras.layers.Identity())))
    assert "should receive half of it,\n[[ 0.5   1.   -2.  ]\n [ 0.25 -0.5   1.5 ]]" in out
    assert "the input receives\n[[ 1.   2.  -4. ]\n [ 0.5 -1.   3. ]]" in out and "arrives unchanged" in out
    quarter = keras.layers.Lambda(lambda t: gradlab.scale_gradient(t, 0.25))
    out = refused(check_exercise_1(lambda: _model(quarter)))
    assert "[[ 0.25   0.5   -1.   ]" in out and "the only thing between" in out
    assert "keras.Model" in refused(check_exercise_1(lambda: "not a model"))
    assert "ZeroDivisionError" in refused(check_exercise_1(lambda: 1 / 0))


def _agnostic(x):
    def grad(*args, upstream=None):
        if upstream is None:
            (upstream,) = args
        return keras.ops.clip(upstream, -0.1, 0.1)
    return keras.ops.copy(x), grad


def test_exercise_2_accepts_both_calling_conventions(accepted):
    assert accepted(check_exercise_2(_agnostic)).startswith("Correct!")


def _clip(t):
    return keras.ops.clip(t, -0.1, 0.1)


def _answer(forward, grad):
    """An answer to exercise 2 that returns ``forward(x)`` and the function ``grad``."""
    return lambda x: (forward(x), grad)


def _starting_point(x):  # the check reads this source for "ops.identity(" to explain the mistake
    return keras.ops.identity(x), lambda upstream: _clip(upstream)


@pytest.mark.parametrize(
    "answer, says, never",
    [
        pytest.param(_starting_point,
                     ["n x n identity matrix", "Section 2 names"], ["keras.ops.copy", "upstream=None"],
                     id="the starting point"),
        pytest.param(_answer(keras.ops.copy, lambda upstream: _clip(upstream)),
                     ["as PyTorch calls it raised TypeError", "accepts both calls"], ["upstream=None"],
                     id="TensorFlow's call only"),
        pytest.param(_answer(keras.ops.copy, lambda *args, upstream=None: _clip(args[0])),
                     ["returned [[ 0.1 -0.1  0.1]] for upstream [[ 0.05 -0.4   2.  ]]", "you clipped x"], [],
                     id="clips x"),
        pytest.param(_answer(keras.ops.copy, lambda *args, upstream=None: args[0] if upstream is None else upstream),
                     ["expected clip(upstream, -0.1, 0.1) = [[ 0.05 -0.1   0.1 ]]", "unchanged"], [],
                     id="no clip"),
        pytest.param(lambda x: x, ["return two things"], [], id="one value"),
    ],
)
def test_exercise_2_explains_identity_the_torch_convention_and_wrong_rules(refused, answer, says, never):
    out = refused(check_exercise_2(answer))
    assert all(text in out for text in says), out
    assert not any(text in out for text in never), out        # no solution code


def test_exercise_2_reports_an_answer_that_breaks_only_inside_a_keras_model(refused):
    """A value made with NumPy passes the eager part; building the Keras model then fails: a Not yet."""
    def numpy_value(x):
        def grad(*args, upstream=None):
            upstream = args[-1] if upstream is None else upstream
            return keras.ops.clip(upstream, -0.1, 0.1)
        return tf.constant(np.array(x)), grad

    out = refused(check_exercise_2(numpy_value))
    assert out.startswith("Not yet") and "Keras model" in out


def test_exercise_1_refuses_a_hard_coded_gradient(refused):
    """Issue 39: half of the first case's upstream gradient, sent whatever arrives: the second case refuses it."""
    first_half = tf.constant([[0.5, 1.0, -2.0], [0.25, -0.5, 1.5]])

    @tf.custom_gradient
    def hard_coded(x):
        return tf.identity(x), lambda dy: first_half
    out = refused(check_exercise_1(lambda: _model(keras.layers.Lambda(hard_coded))))
    assert out.startswith("Not yet: on other inputs, for the upstream gradient\n[[-0.17 -2.72  1.88]\n")
    assert "the input receives\n[[ 0.5   1.   -2.  ]\n [ 0.25 -0.5   1.5 ]]" in out
    assert "does the gradient come from the upstream gradient that arrives,\nor from numbers fixed in advance?" in out


def test_exercise_2_refuses_a_hard_coded_gradient(refused):
    """The first case's clipped upstream gradient, returned by grad whatever upstream is: refused."""
    def hard_coded(x):
        def grad(*args, upstream=None):
            return keras.ops.convert_to_tensor([[0.05, -0.1, 0.1]])
        return keras.ops.copy(x), grad
    out = refused(check_exercise_2(hard_coded))
    assert out.startswith("Not yet: on other inputs, grad(upstream), as TensorFlow and JAX call it, returned "
                          "[[ 0.05 -0.1   0.1 ]] for upstream [[-0.08  0.29  0.08]];")
    assert "expected clip(upstream, -0.1, 0.1) = [[-0.08  0.1   0.08]]" in out and "numbers fixed in advance" in out


@pytest.mark.parametrize("seed", [0, 1, 2024])
def test_held_out_cases_decide_as_the_public_ones(seed):
    """The instructor edition's held-out cases (check_exercise_N(..., seed=...)): other inputs, same verdicts."""
    assert check_exercise_1.verdict(lambda: _model(_Halve()), seed=seed).passed
    assert not check_exercise_1.verdict(lambda: _model(keras.layers.Identity()), seed=seed).passed
    assert check_exercise_2.verdict(_agnostic, seed=seed).passed
    assert not check_exercise_2.verdict(_answer(keras.ops.copy, lambda upstream: _clip(upstream)), seed=seed).passed
    assert not check_exercise_2.verdict(_answer(keras.ops.copy, lambda *args, upstream=None: args[0]), seed=seed).passed
