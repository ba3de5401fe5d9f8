"""Which techniques the benchmark compares: the ways to modify the gradient between two layers.

:data:`TECHNIQUES` lists them (:class:`Technique`: what each inserts after the first layer of a
reference model, how the gradients are taken, what it is compared with), :data:`QUICK_TECHNIQUES`
the ones ``run.py --quick`` keeps, and :data:`FIT_LAYERS` the :mod:`gradlab.layers` layers timed in
``model.fit``. Every scaling technique sends back ``SCALE * dy``. Importing this module creates no
TensorFlow state: the variable of ``gradlab.scale_gradient (Variable)`` is made on first use
(:func:`factor`).
"""
from __future__ import annotations

import dataclasses
import functools
import os
from typing import Callable, List

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
os.environ.setdefault("TF_ENABLE_ONEDNN_OPTS", "0")

import numpy as np  # noqa: E402
import tensorflow as tf  # noqa: E402

import gradlab  # noqa: E402

SCALE = 0.5  # the rule of the scaling techniques: dL/dh = 0.5 * dL/dh'


@functools.lru_cache(maxsize=None)
def factor() -> tf.Variable:
    """``SCALE`` as a variable (gradlab reads, and checks, it when the gradient is computed).

    Created on first use, outside any ``tf.function`` being traced, and the same variable after.
    """
    with tf.init_scope():
        return tf.Variable(SCALE, trainable=False, name="benchmark_factor")


@dataclasses.dataclass(frozen=True)
class Technique:
    """One way to modify the gradient between the two layers.

    Attributes:
      name: the row label.
      apply: ``apply(h) -> h'`` inserted after the first layer.
      gradients: ``"tape"`` (``tf.GradientTape``) or ``"tf.gradients"`` (needed by override maps).
      clip_global_norm: clip the variables' gradients by their global norm before the update
        (optimizer-level clipping) instead of modifying ``h``.
      reference: the same rule written by hand in plain TensorFlow (for a gradlab op): the cost of
        the rule itself, against which gradlab's own overhead shows.
      target_against: what the tf.function target compares a gradlab op with: the baseline
        ``"none"`` for identities, the hand-written reference for ops that change the forward
        value too (their forward op costs the same whoever writes it).
      gradlab_op: an op of gradlab.ops, subject to the tf.function target.
      note: what it computes, for the README and the JSON.
    """

    name: str
    apply: Callable[[tf.Tensor], tf.Tensor]
    gradients: str = "tape"
    clip_global_norm: bool = False
    reference: str = "none"
    target_against: str = "none"
    gradlab_op: bool = False
    note: str = ""


def scale_custom_gradient(h):
    @tf.custom_gradient
    def identity(t):
        return tf.identity(t), lambda dy: dy * SCALE

    return identity(h)


def clip_custom_gradient(h):
    @tf.custom_gradient
    def identity(t):
        return tf.identity(t), lambda dy: tf.clip_by_value(dy, -1e-3, 1e-3)

    return identity(h)


def clip_norm_custom_gradient(h):
    @tf.custom_gradient
    def identity(t):
        return tf.identity(t), lambda dy: tf.clip_by_norm(dy, 1e-2)

    return identity(h)


def step_custom_gradient(h, width=1.0):
    """The surrogate step written by hand with tf.custom_gradient (what gradlab.surrogate_step does)."""

    @tf.custom_gradient
    def step(t):
        def grad(dy):
            return dy * tf.nn.relu(1.0 - tf.abs(t) / width)

        return tf.cast(t > 0, t.dtype), grad

    return step(h)


def _override_identity(h):
    with gradlab.gradient_override({"Identity": _half_gradient}):
        return tf.identity(h)


def _half_gradient(op, grad):
    return grad * SCALE


def _numpy_identity(h):
    """Forward through NumPy (a Python round trip), gradient 0.5 * dy in TensorFlow."""

    @tf.custom_gradient
    def identity(t):
        y = tf.numpy_function(_np_identity, [t], t.dtype, stateful=False)
        y.set_shape(t.shape)
        return y, lambda dy: dy * SCALE

    return identity(h)


def _np_identity(a):
    return np.array(a)  # a copy: NumPy cannot hand TensorFlow's buffer back as a new tensor


def _py_function_identity(h):
    """Forward through tf.py_function (eager tensors in Python), gradient 0.5 * dy."""

    @tf.custom_gradient
    def identity(t):
        y = tf.py_function(tf.identity, [t], t.dtype)
        y.set_shape(t.shape)
        return y, lambda dy: dy * SCALE

    return identity(h)


TECHNIQUES: List[Technique] = [
    Technique("none", lambda h: h, note="baseline: no modification"),
    Technique("stop_gradient trick", lambda h: SCALE * h + tf.stop_gradient((1 - SCALE) * h),
              note="0.5*h + stop_gradient(0.5*h): value h, gradient 0.5*dy"),
    Technique("tf.custom_gradient", scale_custom_gradient,
              note="identity forward, grad = 0.5*dy (tf.custom_gradient by hand)"),
    Technique("gradlab.map_gradient", lambda h: gradlab.map_gradient(h, lambda dy: dy * SCALE),
              reference="tf.custom_gradient", gradlab_op=True,
              note="map_gradient(h, lambda dy: 0.5*dy)"),
    Technique("gradlab.scale_gradient", lambda h: gradlab.scale_gradient(h, SCALE),
              reference="tf.custom_gradient", gradlab_op=True, note="scale_gradient(h, 0.5)"),
    Technique("gradlab.scale_gradient (Variable)", lambda h: gradlab.scale_gradient(h, factor()),
              reference="gradlab.scale_gradient", gradlab_op=True,
              note="scale_gradient(h, tf.Variable(0.5)): the factor is read when the gradient is computed"),
    Technique("gradlab.reverse_gradient", lambda h: gradlab.reverse_gradient(h, SCALE),
              reference="tf.custom_gradient", gradlab_op=True, note="reverse_gradient(h, 0.5)"),
    Technique("custom_gradient clip_by_value", clip_custom_gradient,
              note="identity forward, grad = clip_by_value(dy, -1e-3, 1e-3) by hand"),
    Technique("gradlab.clip_gradient", lambda h: gradlab.clip_gradient(h, -1e-3, 1e-3),
              reference="custom_gradient clip_by_value", gradlab_op=True,
              note="clip_gradient(h, -1e-3, 1e-3)"),
    Technique("custom_gradient clip_by_norm", clip_norm_custom_gradient,
              note="identity forward, grad = clip_by_norm(dy, 0.01) by hand"),
    Technique("gradlab.clip_gradient_norm", lambda h: gradlab.clip_gradient_norm(h, 1e-2),
              reference="custom_gradient clip_by_norm", gradlab_op=True,
              note="clip_gradient_norm(h, 0.01)"),
    Technique("stop_gradient STE (round)", lambda h: h + tf.stop_gradient(tf.round(h) - h),
              note="h + stop_gradient(round(h) - h): rounds the forward value"),
    Technique("gradlab.straight_through", lambda h: gradlab.straight_through(tf.round(h), h),
              reference="stop_gradient STE (round)", target_against="stop_gradient STE (round)",
              gradlab_op=True,
              note="straight_through(round(h), h): rounds the forward value"),
    Technique("custom_gradient step", step_custom_gradient,
              note="hand-written surrogate step: forward h > 0, grad dy*max(0, 1-|h|)"),
    Technique("gradlab.surrogate_step", lambda h: gradlab.surrogate_step(h, 1.0),
              reference="custom_gradient step", target_against="custom_gradient step",
              gradlab_op=True,
              note="surrogate_step(h, 1.0): forward h > 0 (a spiking activation)"),
    Technique("gradlab.gradient_override", _override_identity, gradients="tf.gradients",
              note="tf.identity under gradient_override({'Identity': 0.5*grad}); tf.gradients"),
    Technique("tf.numpy_function", _numpy_identity,
              note="identity forward through NumPy, grad 0.5*dy (tf.custom_gradient)"),
    Technique("tf.py_function", _py_function_identity,
              note="identity forward through tf.py_function, grad 0.5*dy (tf.custom_gradient)"),
    Technique("optimizer clip_by_global_norm", lambda h: h, clip_global_norm=True,
              note="tf.clip_by_global_norm(grads, 1.0) before the SGD update"),
]
TECHNIQUE_BY_NAME = {t.name: t for t in TECHNIQUES}
QUICK_TECHNIQUES = ("none", "stop_gradient trick", "tf.custom_gradient", "gradlab.scale_gradient",
                    "gradlab.clip_gradient_norm", "gradlab.straight_through",
                    "stop_gradient STE (round)", "gradlab.gradient_override", "tf.numpy_function",
                    "optimizer clip_by_global_norm")

#: The Keras layers timed in ``model.fit`` (``measure.measure_fit``), by row label; ``None``: no layer.
FIT_LAYERS = {
    "none": None,
    "gradlab.layers.ScaleGradient": lambda: gradlab.layers.ScaleGradient(SCALE),
    "gradlab.layers.ClipGradientNorm": lambda: gradlab.layers.ClipGradientNorm(1e-2),
}
