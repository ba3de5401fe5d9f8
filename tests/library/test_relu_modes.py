"""ReLUGradient, ReLUGradientActivation and with_relu_gradient in the execution-mode matrix.

docs/execution_modes.md lists them beside the ops and the other layers. Each subject is a ReLU
(forward ``relu(x)``, bitwise) whose gradient follows a rule: here the three spellings a user meets,
each with another rule. tests/library/test_relu_gradient.py checks every rule eagerly, in ``tf.function``
and XLA for the layer and the ``.keras`` round trip of a copy; this file adds the columns of the
matrix: Keras ``fit``/``predict``/``evaluate`` in every Keras path, the activation and the copy
called directly in every mode, mixed precision, ``.keras`` files and a SavedModel (``model.export``)
loaded in a fresh process.
"""
from __future__ import annotations

import inspect
import json
import os
import subprocess
import sys
import textwrap

import keras
import numpy as np
import pytest
import tensorflow as tf

from gradlab import layers
from test_modes import BATCH, DY, KERAS_MODES, X, Subject, build_model, expected_shift_after_training, shifts


def _rule(name: str, alpha: float = 0.01):
    def rule(t, dy):
        if name == "guided":
            return np.where((t > 0) & (dy > 0), dy, 0.0)
        if name == "deconvnet":
            return np.maximum(dy, 0.0)
        return np.where(t > 0, dy, alpha * dy)  # leaky
    return rule


def _relu_copy():
    """with_relu_gradient's copy of a small model with a plain ReLU activation."""
    plain = keras.Sequential([keras.Input((3,)), keras.layers.Activation("relu")])
    return layers.with_relu_gradient(plain, "leaky", alpha=0.01)


SUBJECTS = {
    "ReLUGradient": Subject("ReLUGradient", lambda: layers.ReLUGradient("guided"), _rule("guided"), tf.nn.relu),
    "ReLUGradientActivation": Subject(
        "ReLUGradientActivation",
        lambda: keras.layers.Activation(layers.ReLUGradientActivation("deconvnet")),
        _rule("deconvnet"), tf.nn.relu,
    ),
    "with_relu_gradient": Subject("with_relu_gradient", _relu_copy, _rule("leaky"), tf.nn.relu),
}


def _gradient(fn, x, dy):
    with tf.GradientTape() as tape:
        tape.watch(x)
        y = fn(x)
    return y, tape.gradient(y, x, output_gradients=tf.cast(dy, y.dtype))


@pytest.mark.parametrize("keras_mode", list(KERAS_MODES), ids=str)
def test_fit_predict_evaluate(keras_mode):
    """fit moves the shift by the rule; predict is bitwise relu; evaluate agrees (as test_modes)."""
    subjects = list(SUBJECTS.values())
    keras.utils.set_random_seed(0)
    model = build_model(subjects, **KERAS_MODES[keras_mode])
    targets = [BATCH * DY] * len(subjects)
    model.fit(X, targets, batch_size=BATCH, epochs=1, shuffle=False, verbose=0)
    predicted = model.predict(X, batch_size=len(X), verbose=0)
    for subject, b, y in zip(subjects, shifts(model, subjects), predicted):
        np.testing.assert_allclose(b, expected_shift_after_training(subject), rtol=1e-6, atol=1e-6,
                                   err_msg=subject.name)
        assert y.tobytes() == tf.nn.relu(X + b).numpy().tobytes(), subject.name


@pytest.mark.parametrize("name", list(SUBJECTS))
def test_called_directly_in_every_mode(name, run_in_mode):
    subject = SUBJECTS[name]
    layer = subject.make()
    y, grad = run_in_mode(lambda x, dy: _gradient(layer, x, dy))(tf.constant(X), tf.constant(DY))
    assert y.numpy().tobytes() == tf.nn.relu(X).numpy().tobytes()
    np.testing.assert_allclose(grad.numpy(), subject.rule(X, DY.astype(np.float64)), rtol=1e-6)


@pytest.mark.parametrize("policy", ["mixed_float16", "mixed_bfloat16"])
@pytest.mark.parametrize("name", list(SUBJECTS))
def test_under_a_mixed_policy(name, policy):
    previous = keras.mixed_precision.global_policy()
    keras.mixed_precision.set_global_policy(policy)
    try:
        layer = SUBJECTS[name].make()
    finally:
        keras.mixed_precision.set_global_policy(previous)
    compute = keras.mixed_precision.Policy(policy).compute_dtype
    x_low = tf.cast(X, compute)
    y, grad = _gradient(layer, x_low, DY)
    assert y.dtype == compute and grad.dtype == compute
    assert y.numpy().tobytes() == tf.nn.relu(x_low).numpy().tobytes()
    dy_low = tf.cast(DY, compute).numpy().astype(np.float64)
    expected = SUBJECTS[name].rule(x_low.numpy().astype(np.float64), dy_low)
    # Half precision keeps 8 or 11 bits: 2 % of each element, and the leaky branch's 0.01 * dy is
    # compared on its own scale (an absolute 2e-2 would let a wrong slope pass).
    np.testing.assert_allclose(grad.numpy().astype(np.float64), expected, rtol=2e-2, atol=1e-6)


def _model():
    inputs = keras.Input((3,))
    return keras.Model(inputs, [subject.make()(inputs) for subject in SUBJECTS.values()])


def test_a_keras_file_keeps_every_rule(tmp_path):
    model = _model()
    model.save(tmp_path / "m.keras")
    loaded = keras.models.load_model(tmp_path / "m.keras")
    for i, subject in enumerate(SUBJECTS.values()):
        _, grad = _gradient(lambda t: loaded(t)[i], tf.constant(X), DY)
        np.testing.assert_allclose(grad.numpy(), subject.rule(X, DY.astype(np.float64)), rtol=1e-6,
                                   err_msg=subject.name)


LOADER = textwrap.dedent(
    """
    import json, sys
    import tensorflow as tf
    x, dy = (tf.constant(json.loads(a), tf.float32) for a in sys.argv[2:4])
    serve = tf.saved_model.load(sys.argv[1]).serve
    out = []
    for i in range(int(sys.argv[4])):
        with tf.GradientTape() as tape:
            tape.watch(x)
            y = serve(x)[i]
        out.append(tape.gradient(y, x, output_gradients=dy).numpy().tolist())
    print(json.dumps(out))
    """
)


@pytest.mark.slow
def test_a_saved_model_keeps_every_rule_in_a_fresh_process(tmp_path):
    model = _model()
    quiet = {"verbose": False} if "verbose" in inspect.signature(model.export).parameters else {}  # Keras >= 3.4
    model.export(str(tmp_path / "export"), format="tf_saved_model", **quiet)
    env = {**os.environ, "TF_CPP_MIN_LOG_LEVEL": "2", "TF_ENABLE_ONEDNN_OPTS": "0"}
    args = [str(tmp_path / "export"), json.dumps(X.tolist()), json.dumps(DY.tolist()), str(len(SUBJECTS))]
    result = subprocess.run([sys.executable, "-c", LOADER, *args], capture_output=True, text=True,
                            env=env, timeout=600)
    assert result.returncode == 0, result.stderr[-3000:]
    grads = json.loads(result.stdout.strip().splitlines()[-1])
    for grad, subject in zip(grads, SUBJECTS.values()):
        np.testing.assert_allclose(grad, subject.rule(X, DY.astype(np.float64)), rtol=1e-6, err_msg=subject.name)


@pytest.mark.parametrize("name", list(SUBJECTS))
def test_on_a_placeholder_in_a_v1_graph(name):
    """The TF1 column: a placeholder in a ``tf.Graph`` run by a ``Session``, ``tf.gradients``."""
    subject = SUBJECTS[name]
    graph = tf.Graph()
    with graph.as_default():
        x = tf.compat.v1.placeholder(tf.float32, shape=[None, 3])
        y = subject.make()(x)
        (grad,) = tf.gradients(y, x, grad_ys=tf.constant(DY))
        init = tf.compat.v1.global_variables_initializer()
    with tf.compat.v1.Session(graph=graph) as session:
        session.run(init)
        y_v, grad_v = session.run([y, grad], {x: X})
    assert y_v.tobytes() == np.maximum(X, 0).tobytes()
    np.testing.assert_allclose(grad_v, subject.rule(X, DY.astype(np.float64)), rtol=1e-6)
