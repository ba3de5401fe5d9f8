"""Variable parameters inside ``tf.cond`` and ``tf.while_loop`` (issue 30).

``scale_gradient(x, v)``, ``clip_gradient(x, -w, w)`` and ``GradientReversal`` raised
``AttributeError`` inside ``tf.cond`` and ``ValueError`` inside ``tf.while_loop`` in a
``tf.function``, with the tape outside the control flow, although notebook 01 recommends variables:
a custom gradient that reads a variable there fails (an open TensorFlow issue, still on 2.21).
gradlab's ops read a variable in the forward pass and close over that tensor, so each parameter
works in every mode: eager, ``tf.function``, XLA, and ``tf.cond`` / ``tf.while_loop`` with and
without XLA. Each case checks the gradient against its definition for two values of the
variable, assigned between calls, without retracing.
"""

from __future__ import annotations

from typing import Callable, NamedTuple

import keras
import numpy as np
import pytest
import tensorflow as tf

import gradlab
from gradlab import layers

X = np.array([0.5, -1.0, 1.5, 0.2], np.float32)
DY = np.array([0.8, -1.5, 3.0, 0.1], np.float32)


class Case(NamedTuple):
    make: Callable  # value -> (apply(x), set(value)): the op reading a variable, and how to change it
    forward: Callable  # x -> forward value (NumPy)
    rule: Callable  # (x, dy, value) -> the gradient by definition (NumPy, float64)
    values: tuple  # two valid values of the variable


def _with_variable(op, variable_factory=tf.Variable):
    def make(value):
        variable = variable_factory(value)
        return (lambda x: op(x, variable)), variable.assign

    return make


def _gradient_reversal(value):
    layer = layers.GradientReversal(value)
    layer.build((None,))

    def set_factor(new):
        layer.factor = new

    return layer, set_factor


def _norm_clip(dy, m):
    norm = np.linalg.norm(dy)
    return dy if norm <= m else dy * (m / norm)


def _identity(x):
    return x


CASES = {
    "scale_gradient(x, v)": Case(_with_variable(gradlab.scale_gradient), _identity,
                                 lambda x, dy, v: v * dy, (2.0, -0.5)),
    "reverse_gradient(x, v)": Case(_with_variable(gradlab.reverse_gradient), _identity,
                                   lambda x, dy, v: -v * dy, (0.5, 3.0)),
    "clip_gradient(x, -w, w)": Case(_with_variable(lambda x, w: gradlab.clip_gradient(x, -w, w)), _identity,
                                    lambda x, dy, v: np.clip(dy, -v, v), (1.0, 0.25)),
    "clip_gradient_norm(x, v)": Case(_with_variable(gradlab.clip_gradient_norm), _identity,
                                     lambda x, dy, v: _norm_clip(dy, v), (1.0, 100.0)),
    "surrogate_step(x, v)": Case(_with_variable(gradlab.surrogate_step), lambda x: (x > 0).astype(x.dtype),
                                 lambda x, dy, v: dy * np.maximum(0.0, 1.0 - np.abs(x) / v), (1.5, 0.75)),
    "scale_gradient(x, keras.Variable)": Case(
        _with_variable(gradlab.scale_gradient, lambda value: keras.Variable(value, trainable=False)),
        _identity, lambda x, dy, v: v * dy, (2.0, -0.5)),
    "GradientReversal": Case(_gradient_reversal, _identity, lambda x, dy, v: -v * dy, (1.0, 0.25)),
}

#: How the op is placed: directly, in the true branch of a tf.cond, in a two-step tf.while_loop.
PLACES = ("plain", "tf.cond", "tf.while_loop")
MODES = ("eager", "function", "xla")


def _place(apply, place):
    if place == "plain":
        return apply
    if place == "tf.cond":
        return lambda x: tf.cond(tf.reduce_sum(x) > -100.0, lambda: apply(x), lambda: 2.0 * x)
    # maximum_iterations: XLA needs it to differentiate a loop whose gradient uses a value of the
    # forward pass (as plain ``t * v`` does; see the test below); harmless elsewhere
    return lambda x: tf.while_loop(lambda i, t: i < 2, lambda i, t: (i + 1, apply(t)), (0, x),
                                   maximum_iterations=2)[1]


def _expected(case, place, value):
    """The chain rule through one application (or two, in the loop), in float64."""
    steps = 2 if place == "tf.while_loop" else 1
    inputs = [X.astype(np.float64)]
    for _ in range(steps - 1):
        inputs.append(case.forward(inputs[-1]))
    gradient = DY.astype(np.float64)
    for x in reversed(inputs):
        gradient = case.rule(x, gradient, value)
    return gradient


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("place", PLACES)
@pytest.mark.parametrize("name", list(CASES))
def test_a_variable_parameter_works_in_every_mode_and_control_flow(name, place, mode):
    case = CASES[name]
    apply, set_value = case.make(case.values[0])
    placed = _place(apply, place)

    def gradient(x, dy):
        with tf.GradientTape() as tape:  # outside the control flow: the case that failed
            tape.watch(x)
            y = placed(x)
        return tape.gradient(y, x, output_gradients=dy)

    run = gradient if mode == "eager" else tf.function(gradient, jit_compile=(mode == "xla"))
    for value in (*case.values, case.values[0]):
        set_value(value)
        grad = run(tf.constant(X), tf.constant(DY))
        np.testing.assert_allclose(grad.numpy(), _expected(case, place, value), rtol=1e-6, atol=1e-7)
    if mode != "eager":
        assert run.experimental_get_tracing_count() == 1


@pytest.mark.parametrize("apply", [lambda t, v: gradlab.scale_gradient(t, v), lambda t, v: t * v],
                         ids=["scale_gradient(t, v)", "t * v"])
def test_under_xla_a_while_loop_needs_maximum_iterations_as_for_plain_tensorflow(apply):
    """LIMITATION (TensorFlow's, not gradlab's): under XLA, differentiating a tf.while_loop whose
    gradient uses a value read in the body needs ``maximum_iterations``; a variable parameter is
    such a value, exactly as in plain ``t * v``. (A Python number is not.)"""
    variable = tf.Variable(2.0)

    @tf.function(jit_compile=True)
    def gradient(x):
        with tf.GradientTape() as tape:
            tape.watch(x)
            y = tf.while_loop(lambda i, t: i < 2, lambda i, t: (i + 1, apply(t, variable)), (0, x))[1]
        return tape.gradient(y, x)

    with pytest.raises(tf.errors.InvalidArgumentError, match="maximum_iteration"):
        gradient(tf.constant(X))


@pytest.mark.parametrize("place", ["tf.cond", "tf.while_loop"])
def test_an_invalid_variable_inside_control_flow_is_still_refused(place):
    factor = tf.Variable(2.0)
    placed = _place(lambda x: gradlab.scale_gradient(x, factor), place)

    @tf.function
    def gradient(x):
        with tf.GradientTape() as tape:
            tape.watch(x)
            y = placed(x)
        return tape.gradient(y, x)

    assert gradient(tf.constant(X)).numpy()[0] == (2.0 if place == "tf.cond" else 4.0)
    factor.assign(np.nan)
    with pytest.raises(tf.errors.InvalidArgumentError, match="factor must be finite"):
        gradient(tf.constant(X))


def test_gradient_reversal_in_fit_inside_a_tf_cond():
    """The layer's factor is a weight; a model that applies it in a tf.cond trains in fit."""

    class MaybeReverse(keras.layers.Layer):
        def __init__(self, **kwargs):
            super().__init__(**kwargs)
            self.reversal = layers.GradientReversal(0.5)

        def call(self, inputs):
            return tf.cond(tf.reduce_sum(inputs) > -1e9, lambda: self.reversal(inputs), lambda: inputs)

    inputs = keras.Input((3,))
    shift = keras.layers.Dense(3, kernel_initializer="identity", name="shift")
    model = keras.Model(inputs, MaybeReverse()(shift(inputs)))
    model.compile(keras.optimizers.SGD(1.0), loss=lambda y_true, y_pred: keras.ops.sum(y_pred, axis=-1))
    before = model.get_layer("shift").bias.numpy().copy()
    model.fit(np.ones([2, 3], np.float32), np.zeros([2, 1], np.float32), batch_size=2, epochs=1, verbose=0)
    # loss = mean over the batch of sum(y): d/dbias = 1 per unit, reversed and halved: -0.5; SGD step 1
    np.testing.assert_allclose(model.get_layer("shift").bias.numpy() - before, [0.5, 0.5, 0.5], rtol=1e-6)


def test_a_keras_weight_is_read_at_full_precision_under_mixed_float16():
    """Read in the forward pass, inside a layer's call, a Keras weight (autocast by default)
    would come back as float16 under mixed_float16: 1e-6 would become the subnormal 1.013e-6."""

    class Scale(keras.layers.Layer):
        def build(self, input_shape):
            self.factor = self.add_weight(shape=(), initializer=keras.initializers.Constant(1e-6),
                                          trainable=False)

        def call(self, inputs):
            return gradlab.scale_gradient(inputs, self.factor)

    previous = keras.mixed_precision.global_policy()
    keras.mixed_precision.set_global_policy("mixed_float16")
    try:
        layer = Scale()
        x = tf.constant([1.0, 2.0], tf.float16)
        with tf.GradientTape() as tape:
            tape.watch(x)
            y = layer(x)
        assert y.dtype == tf.float16
        grad = tape.gradient(y, x, output_gradients=tf.constant([1000.0, -1000.0], tf.float16))
    finally:
        keras.mixed_precision.set_global_policy(previous)
    expected = (np.float32([1000.0, -1000.0]) * np.float32(1e-6)).astype(np.float16)
    np.testing.assert_array_equal(grad.numpy(), expected)
