"""What every gradlab Keras layer shares: its numeric parameters and its elementwise plumbing.

Private module, below both :mod:`gradlab.layers` and ``_relu_layers`` (the ReLU layers that
``with_relu_gradient``'s surgery builds), so that neither imports the other for it.
"""
from __future__ import annotations

import keras

from gradlab import _validation as v


def number(value, name: str, *, positive: bool = False) -> float:
    """A layer parameter as a Python float: it is stored in the layer's config (and .keras files).

    Numbers, NumPy scalars and constant tensors are accepted; a variable or a symbolic tensor is
    not, because its value could not be saved in the config.

    Args:
      value: the parameter as given to the layer.
      name: the argument's name, for the error message.
      positive: whether the value must be > 0.

    Returns:
      The value as a Python float.

    Raises:
      TypeError: ``value`` is not a number known when the layer is created (a variable, a symbolic
        tensor), or not a real number at all.
      ValueError: ``value`` is not finite, or not positive where it must be.

    Example:
      >>> import numpy as np
      >>> from gradlab._layer_base import number
      >>> number(np.float32(0.5), "factor")
      0.5
    """
    value = v.scalar(value, name, positive=positive)
    static = v.static_value(value)
    if static is None:
        raise TypeError(
            f"{name} of a gradlab layer must be a number known when the layer is created (it is "
            f"saved in the layer's config); got {v.describe(value)}. To change it during "
            "training, call the op on a variable in your own layer instead, e.g. "
            "gradlab.reverse_gradient(x, self.factor) with self.factor = self.add_weight(..., "
            "trainable=False)."
        )
    return static


class GradientLayer(keras.layers.Layer):
    """Shared plumbing of an elementwise layer (identity forward, or ReLU): masks pass through,
    output shape = input shape."""

    def __init__(self, **kwargs):
        super().__init__(**kwargs)
        self.supports_masking = True

    def compute_output_shape(self, input_shape):
        return input_shape
