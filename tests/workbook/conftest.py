"""The workbook's tests import what the notebooks import: ``notebooks/`` goes on ``sys.path``.

The exercise self-checks (``notebooks/exercises/``) and the paper code (``notebooks/papers/``) live
beside the notebooks, whose kernels run in ``notebooks/``; these tests import them the same way.
"""
from __future__ import annotations

import sys
from pathlib import Path

import pytest

_NOTEBOOKS_DIR = str(Path(__file__).resolve().parents[2] / "notebooks")
if _NOTEBOOKS_DIR not in sys.path:
    sys.path.insert(0, _NOTEBOOKS_DIR)


@pytest.fixture
def refused(capsys):
    """Read what a self-check printed for an answer it must refuse.

    ``out = refused(check_exercise_1(answer))`` asserts the verdict is not a pass and returns the
    printed text (everything printed since the last read), which starts with "Not yet".
    """
    def read(verdict) -> str:
        out = capsys.readouterr().out
        assert verdict.passed is False, out
        assert out.startswith("Not yet"), out
        return out
    return read


@pytest.fixture
def accepted(capsys):
    """Read what a self-check printed for an answer it must accept (see :func:`refused`)."""
    def read(verdict) -> str:
        out = capsys.readouterr().out
        assert verdict.passed is True, out
        return out
    return read


@pytest.fixture(scope="module")
def chain_backward():
    """Notebook 06's backward(modify): one pass through 6 tanh layers, gradient norms per layer."""
    import keras
    import numpy as np
    import tensorflow as tf

    import gradlab

    layers = [keras.layers.Dense(8 if i < 6 else 1, activation="tanh" if i < 6 else None,
                                 kernel_initializer=keras.initializers.RandomNormal(stddev=0.7, seed=i),
                                 name=f"dense_{i}") for i in range(1, 7)]
    rng = np.random.default_rng(0)
    inputs = tf.constant(rng.normal(size=(16, 4)), tf.float32)
    targets = tf.constant(rng.normal(size=(16, 1)), tf.float32)
    probe = gradlab.GradientProbe()

    def run(modify=None):
        probe.clear()
        with tf.GradientTape() as tape:
            h = inputs
            for i, layer in enumerate(layers, start=1):
                h = probe(layer(h), name=layer.name)
                if modify is not None:
                    h = modify(h, i)
            loss = tf.reduce_mean((h - targets) ** 2)
        variables = [w for layer in layers for w in layer.trainable_variables]
        grads = tape.gradient(loss, variables)
        return dict(loss=loss.numpy(), norms=probe.norms(),
                    weights=gradlab.plots.layer_gradient_norms(grads, variables))
    return run


@pytest.fixture(scope="module")
def relu_network():
    """Notebook 05's small ReLU network: ``forward, weights, images, labels``."""
    import numpy as np
    import tensorflow as tf

    rng = np.random.default_rng(0)
    shapes = [(4, 6), (6,), (6, 6), (6,), (6, 5), (5,), (5, 10), (10,)]
    weights = [tf.constant(rng.normal(0, 0.5, s).astype(np.float32)) for s in shapes]

    def forward(w, images, relu=tf.nn.relu):
        relus = tuple(relu) if isinstance(relu, (tuple, list)) else (relu,) * 3
        h = tf.reshape(images, [-1, 4])
        for i in range(3):
            h = relus[i](tf.matmul(h, w[2 * i]) + w[2 * i + 1])
        return tf.matmul(h, w[6]) + w[7]
    images = rng.normal(size=(6, 2, 2, 1)).astype(np.float32)
    labels = rng.integers(0, 10, 6).astype(np.int32)
    return forward, weights, images, labels
