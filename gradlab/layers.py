"""Keras 3 layers that modify the gradient passing through them.

Each layer is the identity in the forward pass and wraps one op of :mod:`gradlab.ops`. Calling a
custom-gradient function on a Keras tensor while *building* a functional model is not the way to
use it; a layer is, and these layers work in Sequential and functional models, in ``fit``, and
survive ``model.save("m.keras")`` + ``keras.models.load_model`` (they are registered as
serializable under the package name ``"gradlab"``).

Like every Keras layer (``keras.layers.Identity`` too) they compute in their dtype policy: a float64
tensor through a layer of the default float32 policy comes out float32, so give ``dtype="float64"``
in a float64 model. The policy is saved in the config and kept by ``with_relu_gradient``.

Their parameters are numbers, saved in the layer's config. ``GradientReversal.factor`` may also
change during training (``layer.factor = value``, for the ramp of domain-adversarial training); for
any other parameter that changes, call the op with a variable inside your own layer, e.g.
``gradlab.clip_gradient(x, -self.bound, self.bound)`` with a non-trainable ``self.add_weight``; the
ops read variables in each forward pass (so also inside ``tf.cond`` and ``tf.while_loop``).
"""
from __future__ import annotations

import keras
import numpy as np

from gradlab import _relu_surgery
from gradlab import _validation as v
from gradlab import ops
from gradlab._layer_base import GradientLayer, number
from gradlab._relu_layers import ReLUGradient, ReLUGradientActivation, check_rule

__all__ = ["ScaleGradient", "ClipGradient", "ClipGradientNorm", "GradientReversal", "ReLUGradient",
           "ReLUGradientActivation", "with_relu_gradient"]


@keras.saving.register_keras_serializable(package="gradlab")
class ScaleGradient(GradientLayer):
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
        self.factor = number(factor, "factor")

    def call(self, inputs):
        return ops.scale_gradient(inputs, self.factor)

    def get_config(self):
        return {**super().get_config(), "factor": self.factor}


@keras.saving.register_keras_serializable(package="gradlab")
class ClipGradient(GradientLayer):
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
        self.clip_min = number(clip_min, "clip_min")
        self.clip_max = number(clip_max, "clip_max")
        v.check_clip_order(self.clip_min, self.clip_max)

    def call(self, inputs):
        return ops.clip_gradient(inputs, self.clip_min, self.clip_max)

    def get_config(self):
        return {**super().get_config(), "clip_min": self.clip_min, "clip_max": self.clip_max}


@keras.saving.register_keras_serializable(package="gradlab")
class ClipGradientNorm(GradientLayer):
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
        self.max_norm = number(max_norm, "max_norm", positive=True)

    def call(self, inputs):
        return ops.clip_gradient_norm(inputs, self.max_norm)

    def get_config(self):
        return {**super().get_config(), "max_norm": self.max_norm}


@keras.saving.register_keras_serializable(package="gradlab")
class GradientReversal(GradientLayer):
    """Identity forward; sends ``-factor * dy`` back (see :func:`gradlab.reverse_gradient`).

    ``factor`` can change during training without retracing: the layer keeps it in a
    non-trainable weight, which each forward pass reads (its backward pass uses that value), so
    ``layer.factor = value`` (in a callback or your training loop) takes effect at the next step. Domain-adversarial training
    (Ganin & Lempitsky, 2015) ramps it from 0 to 1 as :math:`2 / (1 + e^{-10 p}) - 1`, with
    :math:`p` the fraction of training done. The current value is saved in the config and, as
    a weight, in ``.keras`` files.

    Args:
      factor: a finite real number (default 1.0).
      **kwargs: standard Keras layer arguments.

    Example:
      >>> import tensorflow as tf, gradlab
      >>> layer = gradlab.layers.GradientReversal(0.0)
      >>> x = tf.constant([1.0, 2.0])
      >>> layer.factor = 0.5            # e.g. from a callback, once per step
      >>> with tf.GradientTape() as tape:
      ...     tape.watch(x)
      ...     y = 3.0 * layer(x)
      >>> tape.gradient(y, x).numpy()
      array([-1.5, -1.5], dtype=float32)
    """

    def __init__(self, factor: float = 1.0, **kwargs):
        super().__init__(**kwargs)
        self._initial_factor = number(factor, "factor")
        self._factor_weight = None

    def build(self, input_shape):
        # float64 in a float64 layer (a factor such as 0.1 kept exactly), else float32: a float16
        # layer would store a factor such as 1e-6 as a float16 subnormal, 1.3 % off.
        weight_dtype = "float64" if self.variable_dtype == "float64" else "float32"
        self._factor_weight = self.add_weight(
            name="factor", shape=(), dtype=weight_dtype, trainable=False, autocast=False,
            # np.float64: Constant casts a Python float through float32 first (0.1 would lose its bits)
            initializer=keras.initializers.Constant(np.float64(self._initial_factor)),
        )

    @property
    def factor(self) -> float:
        """The current reversal factor, a Python float."""
        if self._factor_weight is None:
            return self._initial_factor
        return float(keras.ops.convert_to_numpy(self._factor_weight.value))

    @factor.setter
    def factor(self, value: float) -> None:
        checked = number(value, "factor")
        if self._factor_weight is None:
            self._initial_factor = checked
        else:
            self._factor_weight.assign(checked)

    def call(self, inputs):
        return ops.reverse_gradient(inputs, self._factor_weight.value)

    def get_config(self):
        return {**super().get_config(), "factor": self.factor}


# --- Changing what ReLU sends back, in a model you did not write ------------------------------

def with_relu_gradient(model, rule: str = "guided", *, alpha: float = 0.01):
    """A copy of ``model`` whose every ReLU sends ``rule``'s gradient back; forward outputs unchanged.

    Replaces every plain ReLU, in nested models too: an ``activation`` (or
    ``recurrent_activation``, also of RNN cells and wrapped layers) that is ``"relu"``,
    ``keras.activations.relu``, ``keras.ops.relu``, ``tf.nn.relu`` or a ``keras.layers.ReLU()``
    becomes a :class:`ReLUGradientActivation`; a ``keras.layers.ReLU()`` layer with default
    arguments, an ``Activation`` or ``Lambda`` of one of those, a ``keras.ops.relu`` called on a
    Keras tensor of a functional model, or a :class:`ReLUGradient` becomes a :class:`ReLUGradient`
    of ``rule``. Each replacement computes in the dtype policy of the ReLU it replaces, whatever
    the global policy is when you copy (a ``ReLU`` layer given as an ``activation`` in another dtype
    than its layer becomes a ``ReLUGradient`` of its policy). The copy has the same weights (copied,
    not shared), the same layer names and dtype policies, gives bitwise the same outputs, and keeps
    its rule through ``save("m.keras")`` + ``load_model``; ``model`` is left untouched. Useful for
    guided backpropagation or deconvnet saliency on a model you did not write.

    Never silently plain: a ReLU that cannot be replaced is refused, and so is a model with no
    ReLU at all (EfficientNet's swish, ConvNeXt's GELU), on which every rule would give exactly the
    plain gradient. A layer of your own (a class or an activation function from outside Keras,
    TensorFlow and gradlab) is rebuilt, the plain ReLUs of its sublayers (held in attributes or
    lists, created in ``__init__`` or ``build``) are replaced, and it is traced on its input: a ReLU
    op it still builds (``keras.ops.relu`` in its ``call()``, a sublayer in a dict...) is refused.
    If its config would not give the replacements back (sublayers its ``__init__`` creates), the
    copy's ``get_config()`` of that layer raises, so saving or cloning the copy does too: save the
    original and copy it after loading. gradlab has no rule for ReLU variants (``ReLU6``, leaky,
    ``PReLU``, a ReLU with ``max_value``, ``negative_slope`` or ``threshold``): guided
    backpropagation and deconvnet are defined for ``max(x, 0)``, and a plain ReLU in their place
    would change the forward pass, so they are refused
    by name. A ReLU written as ``tf.maximum(x, 0)`` builds no ReLU op and is not seen.

    Args:
      model: a built Keras functional or Sequential model (a subclassed model cannot be cloned).
      rule: ``"relu"``, ``"guided"``, ``"deconvnet"`` or ``"leaky"`` (see :class:`ReLUGradient`).
      alpha: the leaky gradient's slope where ``x <= 0``.

    Returns:
      A new ``keras.Model``.

    Raises:
      TypeError: ``model`` is not a Keras model, or ``rule`` is not a string.
      ValueError: an unknown ``rule``, an unbuilt or subclassed model, a model with no ReLU (the
        message lists the activations it has), or a ReLU that cannot be replaced (the message names
        the layer): a ReLU variant (``keras.layers.ReLU`` with ``max_value``, ``negative_slope`` or
        ``threshold`` set, ``LeakyReLU``, ``PReLU``, an activation whose name says ReLU:
        ``"relu6"``, ``"leaky_relu"``, a ``functools.partial`` of ``relu``), a function of yours (a
        lambda, a ``Lambda`` layer's...) that builds a ``Relu``, ``Relu6`` or ``LeakyRelu`` op on the
        layer's input, or a layer of yours that builds one in its ``call()`` or cannot be traced; or a
        layer that cannot be copied (the message names it): one Keras cannot rebuild from its
        ``get_config()``, whose rebuilt weights differ in shape, or whose rebuilt sublayers get
        another dtype policy.

    Example:
      >>> import keras, numpy as np, gradlab
      >>> inputs = keras.Input((3,))
      >>> model = keras.Model(inputs, keras.layers.Dense(2, activation="relu")(inputs))
      >>> guided = gradlab.layers.with_relu_gradient(model, "guided")
      >>> x = np.ones((1, 3), np.float32)
      >>> bool(np.array_equal(model(x), guided(x)))
      True
      >>> tanh = keras.Model(inputs, keras.layers.Dense(2, activation="tanh")(inputs), name="tanh_net")
      >>> gradlab.layers.with_relu_gradient(tanh)
      Traceback (most recent call last):
      ...
      ValueError: model 'tanh_net' has no ReLU for with_relu_gradient to change (its activations are 'tanh'; ...
    """
    if not isinstance(model, keras.Model):
        raise TypeError(f"model must be a Keras model; got {v.describe(model)}.")
    alpha = check_rule(rule, alpha)
    return _relu_surgery.copy_with_rule(model, rule, alpha)
