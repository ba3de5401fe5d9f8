"""The reference models of the benchmark, written with raw ``tf.Variable``s so that only the technique differs.

* **mlp**: ``x -> Dense(hidden, relu) -> [technique] -> Dense(hidden, relu) -> Dense(classes)``;
* **cnn**: ``x -> Conv3x3(c1, relu) -> [technique] -> Conv3x3(c2, stride 2, relu) -> global
  average pool -> Dense(classes)``;

and one training step = forward pass, softmax cross-entropy, gradients, a plain SGD update. The
technique modifies the hidden activation ``h`` after the first layer (or, for optimizer-level
clipping, the gradients before the update). Each step is built three ways (:data:`MODES`): eagerly,
as a ``tf.function``, and as a ``tf.function(jit_compile=True)`` (XLA). :func:`fit_model` is the
MLP as a ``keras.Sequential``, for ``model.fit``.
"""
from __future__ import annotations

import math
import os
from typing import Callable

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
os.environ.setdefault("TF_ENABLE_ONEDNN_OPTS", "0")

import numpy as np  # noqa: E402
import tensorflow as tf  # noqa: E402

from catalogue import Technique  # noqa: E402

MODES = ("eager", "function", "xla")
MODE_LABELS = {"eager": "eager", "function": "tf.function", "xla": "XLA (jit_compile)"}

#: Reference sizes: a tf.function step takes several milliseconds on a 2-core CPU, so a few tens
#: of microseconds of overhead would show as a ratio of about 1.01.
REFERENCE_SIZES = {
    "mlp": dict(batch=128, inputs=256, hidden=512, classes=10),
    "cnn": dict(batch=16, size=32, channels=3, c1=16, c2=32, classes=10),
}
LEARNING_RATE = 0.01


class ReferenceModel:
    """Variables, one fixed batch of data, and ``loss(technique)`` for the MLP or the small CNN."""

    def __init__(self, kind: str, seed: int = 0, **sizes):
        if kind not in REFERENCE_SIZES:
            raise ValueError(f"kind must be one of {sorted(REFERENCE_SIZES)}; got {kind!r}")
        self.kind = kind
        self.sizes = {**REFERENCE_SIZES[kind], **sizes}
        s = self.sizes
        rng = np.random.default_rng(seed)

        def glorot(*shape):
            fan_in, fan_out = np.prod(shape[:-1]), shape[-1]
            limit = math.sqrt(6.0 / (fan_in + fan_out))
            return rng.uniform(-limit, limit, size=shape).astype(np.float32)

        if kind == "mlp":
            shapes = [(s["inputs"], s["hidden"]), (s["hidden"],), (s["hidden"], s["hidden"]),
                      (s["hidden"],), (s["hidden"], s["classes"]), (s["classes"],)]
            x = rng.normal(size=(s["batch"], s["inputs"])).astype(np.float32)
        else:
            shapes = [(3, 3, s["channels"], s["c1"]), (s["c1"],), (3, 3, s["c1"], s["c2"]),
                      (s["c2"],), (s["c2"], s["classes"]), (s["classes"],)]
            x = rng.normal(size=(s["batch"], s["size"], s["size"], s["channels"])).astype(np.float32)
        self.initial = [glorot(*shape) if len(shape) > 1 else np.zeros(shape, np.float32)
                        for shape in shapes]
        self.variables = [tf.Variable(value) for value in self.initial]
        self.x = tf.constant(x)
        self.y = tf.constant(rng.integers(0, s["classes"], size=s["batch"]), tf.int32)

    @property
    def parameters(self) -> int:
        return int(sum(np.prod(v.shape) for v in self.variables))

    def describe(self) -> str:
        s = self.sizes
        if self.kind == "mlp":
            shape = (f"MLP batch {s['batch']}: {s['inputs']} -> Dense {s['hidden']} relu -> [technique] "
                     f"-> Dense {s['hidden']} relu -> Dense {s['classes']}")
        else:
            shape = (f"CNN batch {s['batch']} of {s['size']}x{s['size']}x{s['channels']}: Conv3x3 {s['c1']} "
                     f"relu -> [technique] -> Conv3x3/2 {s['c2']} relu -> avg pool -> Dense {s['classes']}")
        return f"{shape}; {self.parameters:,} parameters; hidden activation {self.hidden_shape}"

    @property
    def hidden_shape(self) -> tuple:
        s = self.sizes
        if self.kind == "mlp":
            return (s["batch"], s["hidden"])
        return (s["batch"], s["size"], s["size"], s["c1"])

    def reset(self) -> None:
        """Puts the initial values back (so that no technique drifts into NaNs over many steps)."""
        for variable, value in zip(self.variables, self.initial):
            variable.assign(value)

    def loss(self, technique: Technique) -> tf.Tensor:
        w1, b1, w2, b2, w3, b3 = self.variables
        if self.kind == "mlp":
            h = tf.nn.relu(tf.matmul(self.x, w1) + b1)
            h = technique.apply(h)
            h = tf.nn.relu(tf.matmul(h, w2) + b2)
        else:
            h = tf.nn.relu(tf.nn.conv2d(self.x, w1, 1, "SAME") + b1)
            h = technique.apply(h)
            h = tf.nn.relu(tf.nn.conv2d(h, w2, 2, "SAME") + b2)
            h = tf.reduce_mean(h, axis=[1, 2])
        logits = tf.matmul(h, w3) + b3
        return tf.reduce_mean(tf.nn.sparse_softmax_cross_entropy_with_logits(self.y, logits))

    def step_fn(self, technique: Technique) -> Callable[[], tf.Tensor]:
        """One training step (loss, gradients, SGD update) as a Python function."""
        variables = self.variables

        def step():
            if technique.gradients == "tf.gradients":
                loss = self.loss(technique)
                grads = tf.gradients(loss, variables)
            else:
                with tf.GradientTape() as tape:
                    loss = self.loss(technique)
                grads = tape.gradient(loss, variables)
            if technique.clip_global_norm:
                grads, _ = tf.clip_by_global_norm(grads, 1.0)
            for variable, grad in zip(variables, grads):
                variable.assign_sub(LEARNING_RATE * grad)
            return loss

        return step


def build_step(model: ReferenceModel, technique: Technique, mode: str) -> Callable[[], tf.Tensor]:
    """The training step of ``technique`` in ``mode`` (eager, function or xla); not yet called."""
    step = model.step_fn(technique)
    if mode == "eager":
        return step
    return tf.function(step, jit_compile=(mode == "xla"), autograph=False)


def fit_model(layer_factory, mode: str, sizes: dict):
    """The reference MLP as a compiled ``keras.Sequential``, ``layer_factory()`` between the hidden layers."""
    import keras

    layers = [keras.Input((sizes["inputs"],)), keras.layers.Dense(sizes["hidden"], activation="relu")]
    if layer_factory is not None:
        layers.append(layer_factory())
    layers += [keras.layers.Dense(sizes["hidden"], activation="relu"), keras.layers.Dense(sizes["classes"])]
    model = keras.Sequential(layers)
    model.compile(optimizer=keras.optimizers.SGD(LEARNING_RATE),
                  loss=keras.losses.SparseCategoricalCrossentropy(from_logits=True),
                  run_eagerly=(mode == "eager"), jit_compile=(mode == "xla"))
    return model
