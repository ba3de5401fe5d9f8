"""Keras 3 layers that modify the gradient passing through them.

Each layer is the identity in the forward pass and wraps one op of :mod:`gradlab.ops`. Calling a
custom-gradient function on a Keras tensor while *building* a functional model is not the way to
use it; a layer is, and these layers work in Sequential and functional models, in ``fit``, and
survive ``model.save("m.keras")`` + ``keras.models.load_model`` (they are registered as
serializable under the package name ``"gradlab"``).

Their parameters are numbers, saved in the layer's config. For a parameter that changes during
training (a ramped reversal factor, say), call the op with a variable inside your own layer:
``gradlab.reverse_gradient(x, self.factor)`` with a non-trainable ``self.add_weight``; the ops read
variables when the gradient is computed.
"""
from __future__ import annotations

import keras

from gradlab import _validation as v
from gradlab import ops

__all__ = ["ScaleGradient", "ClipGradient", "ClipGradientNorm", "GradientReversal"]


def _number(value, name: str, *, positive: bool = False) -> float:
    """A layer parameter as a Python float: it is stored in the layer's config (and .keras files).

    Numbers, NumPy scalars and constant tensors are accepted; a variable or a symbolic tensor is
    not, because its value could not be saved in the config.
    """
    value = v.scalar(value, name, positive=positive)
    number = v.static_value(value)
    if number is None:
        raise TypeError(
            f"{name} of a gradlab layer must be a number known when the layer is created (it is "
            f"saved in the layer's config); got {v._describe(value)}. To change it during "
            "training, call the op on a variable in your own layer instead, e.g. "
            "gradlab.reverse_gradient(x, self.factor) with self.factor = self.add_weight(..., "
            "trainable=False)."
        )
    return number


class _GradientLayer(keras.layers.Layer):
    """Shared plumbing: identity forward, masks pass through, output shape = input shape."""

    def __init__(self, **kwargs):
        super().__init__(**kwargs)
        self.supports_masking = True

    def compute_output_shape(self, input_shape):
        return input_shape


@keras.saving.register_keras_serializable(package="gradlab")
class ScaleGradient(_GradientLayer):
    """Identity forward; multiplies the gradient by ``factor`` (see :func:`gradlab.scale_gradient`).

    Args:
      factor: a finite real number.
      **kwargs: standard Keras layer arguments (``name``, ``dtype``...).

    Example:
      >>> import keras, numpy as np, gradlab
      >>> model = keras.Sequential([keras.Input((2,)), gradlab.layers.ScaleGradient(0.5),
      ...                           keras.layers.Dense(1)])
      >>> tuple(model(np.ones((1, 2), np.float32)).shape)
      (1, 1)
    """

    def __init__(self, factor: float, **kwargs):
        super().__init__(**kwargs)
        self.factor = _number(factor, "factor")

    def call(self, inputs):
        return ops.scale_gradient(inputs, self.factor)

    def get_config(self):
        return {**super().get_config(), "factor": self.factor}


@keras.saving.register_keras_serializable(package="gradlab")
class ClipGradient(_GradientLayer):
    """Identity forward; clips each gradient element to ``[clip_min, clip_max]``.

    See :func:`gradlab.clip_gradient`.

    Args:
      clip_min: the lower bound, a finite real number.
      clip_max: the upper bound, a finite real number ``>= clip_min``.
      **kwargs: standard Keras layer arguments.

    Example:
      >>> import keras, gradlab
      >>> layer = gradlab.layers.ClipGradient(-0.1, 0.1)
      >>> layer.get_config()["clip_max"]
      0.1
    """

    def __init__(self, clip_min: float, clip_max: float, **kwargs):
        super().__init__(**kwargs)
        self.clip_min = _number(clip_min, "clip_min")
        self.clip_max = _number(clip_max, "clip_max")
        v.check_clip_order(self.clip_min, self.clip_max)

    def call(self, inputs):
        return ops.clip_gradient(inputs, self.clip_min, self.clip_max)

    def get_config(self):
        return {**super().get_config(), "clip_min": self.clip_min, "clip_max": self.clip_max}


@keras.saving.register_keras_serializable(package="gradlab")
class ClipGradientNorm(_GradientLayer):
    """Identity forward; rescales the gradient so its L2 norm is at most ``max_norm``.

    The norm is over the whole upstream tensor, batch included (see
    :func:`gradlab.clip_gradient_norm`).

    Args:
      max_norm: a finite real number > 0.
      **kwargs: standard Keras layer arguments.

    Example:
      >>> import gradlab
      >>> gradlab.layers.ClipGradientNorm(1.0).max_norm
      1.0
    """

    def __init__(self, max_norm: float, **kwargs):
        super().__init__(**kwargs)
        self.max_norm = _number(max_norm, "max_norm", positive=True)

    def call(self, inputs):
        return ops.clip_gradient_norm(inputs, self.max_norm)

    def get_config(self):
        return {**super().get_config(), "max_norm": self.max_norm}


@keras.saving.register_keras_serializable(package="gradlab")
class GradientReversal(_GradientLayer):
    """Identity forward; sends ``-factor * dy`` back (see :func:`gradlab.reverse_gradient`).

    Args:
      factor: a finite real number (default 1.0).
      **kwargs: standard Keras layer arguments.

    Example:
      >>> import gradlab
      >>> gradlab.layers.GradientReversal().factor
      1.0
    """

    def __init__(self, factor: float = 1.0, **kwargs):
        super().__init__(**kwargs)
        self.factor = _number(factor, "factor")

    def call(self, inputs):
        return ops.reverse_gradient(inputs, self.factor)

    def get_config(self):
        return {**super().get_config(), "factor": self.factor}
