"""Every gradlab op and layer wherever a user trains: the Keras paths, and the layers in every mode.

tests/library/test_ops.py already checks each op eagerly, in ``tf.function`` and with
``jit_compile=True``. Here each *subject* (the seven ops, each wrapped in a minimal Keras layer,
and the four gradlab layers that wrap ops; the ReLU layers are in tests/library/test_relu_modes.py) runs
through Keras' own execution paths:

* ``model.fit`` / ``evaluate`` / ``predict`` with ``run_eagerly=True``, the default compiled
  ``tf.function`` (``jit_compile=False``), XLA (``jit_compile=True``) and
  ``steps_per_execution=2`` (two training steps inside one ``tf.function`` call);
* the layers called directly in eager, ``tf.function`` and XLA mode.

The training check is exact in intent: a model ``y = subject(x + b)`` with a trainable shift ``b``
(zeros at first), a loss whose gradient with respect to ``y`` is a chosen ``DY``, and plain SGD
with learning rate 1, so that each step moves ``b`` by minus the sum over the batch of the
subject's *defined* gradient rule. Two batches give two steps, so the second step also checks that
the rule sees the updated ``b`` (variables are read at run time, not baked in at trace time).
"""

from __future__ import annotations

import dataclasses
from typing import Callable, Optional

import keras
import numpy as np
import pytest
import tensorflow as tf
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp

import gradlab
from gradlab import layers

from helpers import OP_NAMES, op_cases  # the op table shared with test_ops.py (helpers.py)
from helpers import ApplyOp, Shift  # an op as a Keras layer; the trainable shift x + b

#: Four samples, trained as two batches of two.
X = np.array(
    [[0.3, -1.75, 2.2], [-0.4, 0.6, 1e-3], [1.1, -0.2, -2.6], [0.45, 0.9, -1.3]], np.float32
)
#: dLoss/dy for each sample: elements inside and outside the clip ranges, norms above 1.
DY = np.array(
    [[1.0, -2.0, 0.05], [3.0, -0.4, 0.25], [-0.3, 0.2, 0.7], [0.1, -1.5, 0.6]], np.float32
)
BATCH = 2


def clip_by_norm(dy: np.ndarray, max_norm: float) -> np.ndarray:
    norm = float(np.sqrt(np.sum(np.square(dy, dtype=np.float64))))
    return dy if norm <= max_norm else dy * (max_norm / norm)


@dataclasses.dataclass(frozen=True)
class Subject:
    """One thing to put in a model: a gradlab layer, or an op wrapped in ``ApplyOp``."""

    name: str
    make: Callable[[], keras.layers.Layer]
    #: the gradient by definition, ``rule(t, dy)`` in float64 NumPy (``t`` = the input)
    rule: Callable[[np.ndarray, np.ndarray], np.ndarray]
    #: the forward value in TensorFlow (None: identity)
    forward: Optional[Callable] = None


def _op_subject(name: str) -> Subject:
    case = op_cases()[name]
    forward = None if case.identity else case.apply
    return Subject(f"op:{name}", lambda: ApplyOp(case.apply), case.gradient, forward)


LAYER_SUBJECTS = {
    "ScaleGradient": Subject(
        "ScaleGradient", lambda: layers.ScaleGradient(0.5), lambda t, dy: 0.5 * dy
    ),
    "ClipGradient": Subject(
        "ClipGradient", lambda: layers.ClipGradient(-0.1, 0.2), lambda t, dy: np.clip(dy, -0.1, 0.2)
    ),
    "ClipGradientNorm": Subject(
        "ClipGradientNorm", lambda: layers.ClipGradientNorm(1.0), lambda t, dy: clip_by_norm(dy, 1.0)
    ),
    "GradientReversal": Subject(
        "GradientReversal", lambda: layers.GradientReversal(2.0), lambda t, dy: -2.0 * dy
    ),
}
SUBJECTS = {**{f"op:{n}": _op_subject(n) for n in OP_NAMES}, **LAYER_SUBJECTS}

#: Keras execution paths: compile() arguments.
KERAS_MODES = {
    "run_eagerly": dict(run_eagerly=True),
    "tf.function": dict(jit_compile=False),
    "xla": dict(jit_compile=True),
    "steps_per_execution": dict(jit_compile=False, steps_per_execution=2),
}


def dot_loss(y_true, y_pred):
    """Per-sample ``sum(y_true * y_pred)``: Keras averages it over the batch, so with
    ``y_true = batch * DY`` the gradient with respect to ``y_pred`` is exactly ``DY``."""
    return tf.reduce_sum(y_true * y_pred, axis=-1)


def build_model(subjects, **compile_kwargs) -> keras.Model:
    """One functional model with a branch ``subject(x + b_i)`` per subject and one loss each.

    The branches are independent (each its own ``b_i``), so one compiled train step checks every
    subject at once: one trace per execution path instead of one per subject.
    """
    inputs = keras.Input((3,))
    outputs = [s.make()(Shift(name=f"shift_{i}")(inputs)) for i, s in enumerate(subjects)]
    model = keras.Model(inputs, outputs)
    model.compile(
        keras.optimizers.SGD(learning_rate=1.0), loss=[dot_loss] * len(subjects), **compile_kwargs
    )
    return model


def shifts(model, subjects):
    return [model.get_layer(f"shift_{i}").b.numpy() for i in range(len(subjects))]


def expected_shift_after_training(subject: Subject) -> np.ndarray:
    """``b`` after one SGD step (lr 1) per batch, from the subject's rule in NumPy."""
    b = np.zeros(3, np.float32)
    for start in range(0, len(X), BATCH):
        t = X[start : start + BATCH] + b  # float32, as TensorFlow computes it
        grad = subject.rule(t.astype(np.float64), DY[start : start + BATCH].astype(np.float64))
        b = (b - grad.sum(axis=0)).astype(np.float32)
    return b


def reference_forward(subject: Subject, t: np.ndarray) -> np.ndarray:
    if subject.forward is None:
        return t
    return subject.forward(tf.constant(t)).numpy()


def _bitwise_equal(a: np.ndarray, b: np.ndarray) -> bool:
    a, b = np.asarray(a), np.asarray(b)
    return a.dtype == b.dtype and a.shape == b.shape and a.tobytes() == b.tobytes()


@pytest.fixture(params=list(KERAS_MODES), ids=str)
def keras_mode(request) -> dict:
    return KERAS_MODES[request.param]


# ------------------------------------------------------------------------------------------------
# The matrix: every Keras path x every subject: fit, then predict and evaluate
# ------------------------------------------------------------------------------------------------


def test_fit_predict_evaluate(keras_mode):
    """For each subject (row of the matrix), in this Keras path (column):

    * fit: each step moved ``b`` by exactly the subject's gradient rule, summed over the batch;
    * predict: the forward value is exact (bitwise);
    * evaluate: the loss is the one computed from that exact forward value.
    """
    subjects = list(SUBJECTS.values())
    keras.utils.set_random_seed(0)
    model = build_model(subjects, **keras_mode)
    targets = [BATCH * DY] * len(subjects)
    history = model.fit(X, targets, batch_size=BATCH, epochs=1, shuffle=False, verbose=0)
    assert np.isfinite(history.history["loss"]).all()
    predicted = model.predict(X, batch_size=len(X), verbose=0)
    results = model.evaluate(X, targets, batch_size=BATCH, verbose=0)  # [total, per output...]
    # Keras 3.3 reports the total only: then the total is checked against the sum below.
    total, losses = (results[0], results[1:]) if isinstance(results, list) else (results, [None] * len(subjects))
    expected_losses = []

    failures = {}
    for subject, b, y, loss in zip(subjects, shifts(model, subjects), predicted, losses):
        problems = []
        expected_b = expected_shift_after_training(subject)
        if not np.allclose(b, expected_b, rtol=1e-6, atol=1e-6):
            problems.append(f"fit: b = {b}, expected {expected_b}")
        if not _bitwise_equal(y, reference_forward(subject, X + b)):
            problems.append(f"predict: {y.tolist()} is not bitwise the forward value")
        expected_loss = np.mean(np.sum(BATCH * DY.astype(np.float64) * y, axis=-1))
        expected_losses.append(expected_loss)
        if loss is not None and not np.isclose(loss, expected_loss, rtol=1e-6):
            problems.append(f"evaluate: loss {loss}, expected {expected_loss}")
        if problems:
            failures[subject.name] = problems
    assert not failures, failures
    np.testing.assert_allclose(total, sum(expected_losses), rtol=1e-6)


def test_keras_default_compile_is_not_xla_on_cpu():
    """``jit_compile="auto"`` (the default) resolves to plain ``tf.function`` on a CPU-only host,
    so the default path is the ``tf.function`` column of the matrix (XLA is opt-in)."""
    if tf.config.list_physical_devices("GPU"):
        pytest.skip("auto resolves to XLA where an accelerator exists")
    model = build_model([LAYER_SUBJECTS["ScaleGradient"]])
    assert model.jit_compile is False


# ------------------------------------------------------------------------------------------------
# The layers called directly: eager, tf.function, XLA
# ------------------------------------------------------------------------------------------------


@pytest.mark.parametrize("name", list(LAYER_SUBJECTS), ids=str)
def test_layer_called_directly_in_every_mode(name, run_in_mode, assert_bitwise):
    subject = LAYER_SUBJECTS[name]
    layer = subject.make()

    def forward_and_gradient(x, dy):
        with tf.GradientTape() as tape:
            tape.watch(x)
            y = layer(x)
        return y, tape.gradient(y, x, output_gradients=dy)

    y, grad = run_in_mode(forward_and_gradient)(tf.constant(X), tf.constant(DY))
    assert_bitwise(y, X)
    np.testing.assert_allclose(grad.numpy(), subject.rule(X, DY.astype(np.float64)), rtol=1e-6)


# ------------------------------------------------------------------------------------------------
# A parameter that changes during fit: a non-trainable keras weight, read at every step
# ------------------------------------------------------------------------------------------------


class RampedReversal(keras.layers.Layer):
    """Gradient reversal with a factor stored as a non-trainable weight (a DANN schedule)."""

    def build(self, input_shape):
        self.factor = self.add_weight(shape=(), initializer="zeros", trainable=False, name="factor")

    def call(self, inputs):
        return gradlab.reverse_gradient(inputs, self.factor)

    def compute_output_shape(self, input_shape):
        return input_shape


class SetFactor(keras.callbacks.Callback):
    def __init__(self, layer, values):
        super().__init__()
        self.layer, self.values = layer, values

    def on_train_batch_begin(self, batch, logs=None):
        self.layer.factor.assign(self.values[batch])


@pytest.mark.parametrize("mode", ["run_eagerly", "tf.function", "xla"])
def test_keras_variable_parameter_changes_between_steps_of_one_fit(mode):
    """A ``keras.Variable`` (what ``add_weight`` returns) is a valid parameter and is read at each
    step, also inside Keras' compiled train function, without retracing."""
    ramp = RampedReversal()
    model = keras.Sequential([keras.Input((3,)), Shift(name="shift"), ramp])
    model.compile(keras.optimizers.SGD(1.0), loss=dot_loss, **KERAS_MODES[mode])
    factors = [0.5, 3.0]
    model.fit(X, BATCH * DY, batch_size=BATCH, epochs=1, shuffle=False, verbose=0,
              callbacks=[SetFactor(ramp, factors)])
    expected = -sum(-f * DY[2 * i : 2 * i + 2].sum(axis=0) for i, f in enumerate(factors))
    np.testing.assert_allclose(model.get_layer("shift").b.numpy(), expected, rtol=1e-6)


# ------------------------------------------------------------------------------------------------
# Property: the layers over random shapes and values (tests/library/test_properties.py covers the ops)
# ------------------------------------------------------------------------------------------------

_LAYER_SHAPES = hnp.array_shapes(min_dims=1, max_dims=3, min_side=0, max_side=4)


@settings(max_examples=15)
@given(data=st.data())
def test_layers_forward_exact_and_gradient_as_defined(data, assert_bitwise):
    name = data.draw(st.sampled_from(sorted(LAYER_SUBJECTS)), label="layer")
    subject = LAYER_SUBJECTS[name]
    shape = data.draw(_LAYER_SHAPES, label="shape")
    elements = st.floats(-1e3, 1e3, allow_nan=False, width=32)
    x = data.draw(hnp.arrays(np.float32, shape, elements=elements), label="x")
    dy = data.draw(hnp.arrays(np.float32, shape, elements=st.floats(-10, 10, width=32)), label="dy")
    layer = subject.make()
    xt = tf.constant(x)
    with tf.GradientTape() as tape:
        tape.watch(xt)
        y = layer(xt)
    grad = tape.gradient(y, xt, output_gradients=tf.constant(dy))
    assert_bitwise(y, x)
    expected = subject.rule(x.astype(np.float64), dy.astype(np.float64))
    np.testing.assert_allclose(grad.numpy(), expected, rtol=2e-6, atol=1e-6)


# ------------------------------------------------------------------------------------------------
# Property: XLA agrees with eager (tests/library/test_properties.py leaves XLA out, since XLA compiles once
# per shape; a fixed shape with random values compiles once per op)
# ------------------------------------------------------------------------------------------------

_XLA_FUNCTIONS: dict = {}


def _xla_function(op_case):
    if op_case.name not in _XLA_FUNCTIONS:

        @tf.function(jit_compile=True)
        def run(x, dy):
            with tf.GradientTape() as tape:
                tape.watch(x)
                y = op_case.apply(x)
            return y, tape.gradient(y, x, output_gradients=dy)

        _XLA_FUNCTIONS[op_case.name] = run
    return _XLA_FUNCTIONS[op_case.name]


@settings(max_examples=10)
@given(data=st.data())
def test_xla_agrees_with_eager(op_case, data, assert_bitwise):
    # no subnormals: whether a kernel flushes them to zero is not what is compared here
    finite = st.floats(-100, 100, allow_nan=False, allow_subnormal=False, width=32)
    x = data.draw(hnp.arrays(np.float32, (3, 4), elements=finite), label="x")
    dy = data.draw(hnp.arrays(np.float32, (3, 4), elements=st.floats(-10, 10, width=32)), label="dy")
    y, grad = _xla_function(op_case)(tf.constant(x), tf.constant(dy))
    xt = tf.constant(x)
    with tf.GradientTape() as tape:
        tape.watch(xt)
        y_eager = op_case.apply(xt)
    grad_eager = tape.gradient(y_eager, xt, output_gradients=tf.constant(dy))
    assert_bitwise(y, y_eager)
    np.testing.assert_allclose(grad.numpy(), grad_eager.numpy(), rtol=1e-5, atol=1e-6)
    assert _xla_function(op_case).experimental_get_tracing_count() == 1
