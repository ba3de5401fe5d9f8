"""Keras 3 layers that modify the gradient passing through them.

Each layer is the identity in the forward pass and wraps one op of :mod:`gradlab.ops`. Calling a
custom-gradient function on a Keras tensor while *building* a functional model is not the way to
use it; a layer is, and these layers work in Sequential and functional models, in ``fit``, and
survive ``model.save("m.keras")`` + ``keras.models.load_model`` (they are registered as
serializable under the package name ``"gradlab"``).

Their parameters are numbers, saved in the layer's config. ``GradientReversal.factor`` may also
change during training (``layer.factor = value``, for the ramp of domain-adversarial training); for
any other parameter that changes, call the op with a variable inside your own layer, e.g.
``gradlab.clip_gradient(x, -self.bound, self.bound)`` with a non-trainable ``self.add_weight``; the
ops read variables in each forward pass (so also inside ``tf.cond`` and ``tf.while_loop``).
"""
from __future__ import annotations

from typing import List, Tuple

import keras
import numpy as np
import tensorflow as tf

from gradlab import _relu_sites
from gradlab import _validation as v
from gradlab import ops

__all__ = ["ScaleGradient", "ClipGradient", "ClipGradientNorm", "GradientReversal", "ReLUGradient",
           "ReLUGradientActivation", "with_relu_gradient"]


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
            f"saved in the layer's config); got {v.describe(value)}. To change it during "
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
        self._initial_factor = _number(factor, "factor")
        self._factor_weight = None

    def build(self, input_shape):
        # In the layer's variable dtype: a float64 layer keeps a factor such as 0.1 exactly.
        self._factor_weight = self.add_weight(
            name="factor", shape=(), dtype=self.variable_dtype, trainable=False, autocast=False,
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
        number = _number(value, "factor")
        if self._factor_weight is None:
            self._initial_factor = number
        else:
            self._factor_weight.assign(number)

    def call(self, inputs):
        return ops.reverse_gradient(inputs, self._factor_weight.value)

    def get_config(self):
        return {**super().get_config(), "factor": self.factor}


# --- Changing what ReLU sends back, in a model you did not write ------------------------------

_RELU_RULES = ("relu", "guided", "deconvnet", "leaky")


def _check_rule(rule, alpha) -> float:
    if not isinstance(rule, str):
        raise TypeError(f"rule must be one of {', '.join(map(repr, _RELU_RULES))}; got {v.describe(rule)}.")
    if rule not in _RELU_RULES:
        raise ValueError(f"rule must be one of {', '.join(map(repr, _RELU_RULES))}; got {rule!r}.")
    return _number(alpha, "alpha")


@keras.saving.register_keras_serializable(package="gradlab")
class ReLUGradientActivation:
    """The activation function of :class:`ReLUGradient`: ``max(x, 0)`` forward, ``rule`` backward.

    What :func:`with_relu_gradient` puts in ``activation=`` of ``Dense``, ``Conv2D``... It is
    registered serializable, so the rule survives ``model.save("m.keras")`` + ``load_model``.

    Args:
      rule: one of ``"relu"``, ``"guided"``, ``"deconvnet"``, ``"leaky"`` (see :class:`ReLUGradient`).
      alpha: the slope of the leaky gradient where ``x <= 0`` (used by ``"leaky"`` only).

    Example:
      >>> import keras, gradlab
      >>> relu = gradlab.layers.ReLUGradientActivation("deconvnet")
      >>> keras.layers.Dense(2, activation=relu).get_config()["activation"]["config"]
      {'rule': 'deconvnet', 'alpha': 0.01}
    """

    def __init__(self, rule: str = "guided", alpha: float = 0.01):
        self.rule, self.alpha = rule, _check_rule(rule, alpha)

    def _backward(self, x, dy):
        dy = tf.convert_to_tensor(dy)  # an IndexedSlices upstream (tf.gather) is summed first
        zero = tf.zeros_like(dy)
        if self.rule == "relu":      # the true derivative: dy where x > 0
            return tf.where(x > 0, dy, zero)
        if self.rule == "guided":    # guided backpropagation: also only positive dy
            return tf.where((x > 0) & (dy > 0), dy, zero)
        if self.rule == "deconvnet":  # the deconvnet rule: ReLU applied to dy, whatever x was
            return tf.nn.relu(dy)
        # leaky gradient; tf.constant rounds the Python float once to dy's dtype (tf.cast would
        # make a float32 constant first: a float64 gradient got 0.10000000149 * dy for alpha 0.1)
        return tf.where(x > 0, dy, tf.constant(self.alpha, dy.dtype) * dy)

    def __call__(self, x):
        @tf.custom_gradient
        def relu(t):
            return tf.nn.relu(t), lambda dy: self._backward(t, dy)
        return relu(x)

    def get_config(self) -> dict:
        return {"rule": self.rule, "alpha": self.alpha}

    @classmethod
    def from_config(cls, config: dict) -> "ReLUGradientActivation":
        return cls(**config)

    def __repr__(self) -> str:
        return f"ReLUGradientActivation(rule={self.rule!r}, alpha={self.alpha!r})"


@keras.saving.register_keras_serializable(package="gradlab")
class ReLUGradient(keras.layers.Layer):
    """A ReLU, ``max(x, 0)``, whose backward pass follows ``rule`` (forward bitwise ``keras.layers.ReLU()``).

    ::

        forward:   y = max(x, 0)
        backward:  "relu":      dL/dx = dy · 1[x > 0]          (the true derivative)
                   "guided":    dL/dx = dy · 1[x > 0] · 1[dy > 0]
                   "deconvnet": dL/dx = max(dy, 0)
                   "leaky":     dL/dx = dy · (1 if x > 0 else alpha)

    Args:
      rule: one of ``"relu"``, ``"guided"``, ``"deconvnet"``, ``"leaky"``.
      alpha: the slope of the leaky gradient where ``x <= 0`` (used by ``"leaky"`` only).
      **kwargs: standard Keras layer arguments.

    Example:
      >>> import tensorflow as tf, gradlab
      >>> x = tf.constant([-1.0, 2.0])
      >>> with tf.GradientTape() as tape:
      ...     tape.watch(x)
      ...     y = gradlab.layers.ReLUGradient("leaky", alpha=0.1)(x)
      >>> tape.gradient(y, x).numpy()
      array([0.1, 1. ], dtype=float32)
    """

    def __init__(self, rule: str = "guided", alpha: float = 0.01, **kwargs):
        super().__init__(**kwargs)
        self._relu = ReLUGradientActivation(rule, alpha)
        self.rule, self.alpha = rule, self._relu.alpha
        self.supports_masking = True

    def call(self, inputs):
        return self._relu(inputs)

    def compute_output_shape(self, input_shape):
        return input_shape

    def get_config(self):
        return {**super().get_config(), "rule": self.rule, "alpha": self.alpha}


def _is_replaceable(fn) -> bool:
    return isinstance(fn, ReLUGradientActivation) or _relu_sites.is_plain_relu(fn)


def _sites_in(layer) -> Tuple[bool, List[Tuple[int, str]]]:
    """(replace ``layer`` by a ReLUGradient?, [(holder index, attribute)] of activations to swap)."""
    return (True, []) if isinstance(layer, ReLUGradient) else _relu_sites.relu_sites(layer, _is_replaceable)


def _initializers_by_class_name() -> dict:
    """Keras' initializer classes under their class names, for rebuilding layers from config.

    Keras 3.3 serializes ``kernel_initializer="identity"`` as ``IdentityInitializer`` (its exported
    name; the class is ``Identity``) but cannot look that name up again, so ``from_config`` fails on
    its own layer's config without these.
    """
    classes = {
        name: obj for name, obj in vars(keras.initializers).items()
        if isinstance(obj, type) and issubclass(obj, keras.initializers.Initializer)
    }
    return {**{obj.__name__: obj for obj in classes.values()}, **classes}   # both spellings


class _CannotCopy(ValueError):
    """A layer or model that with_relu_gradient cannot copy; the message names it and says why."""


def _rebuilt(layer) -> keras.layers.Layer:
    """A new, unbuilt ``layer`` from its config (the weights are copied once the model is cloned).

    Raises:
      _CannotCopy: naming the layer, if Keras cannot rebuild it from ``get_config()``.
    """
    try:
        with keras.saving.custom_object_scope(_initializers_by_class_name()):
            return layer.__class__.from_config(layer.get_config())
    except (TypeError, ValueError, NotImplementedError) as error:
        raise _CannotCopy(
            f"layer {layer.name!r} ({type(layer).__name__}) cannot be copied: Keras {keras.__version__} "
            f"cannot rebuild it from its config ({type(error).__name__}: {str(error).strip()}). Give the "
            "layer a get_config() that returns every argument of its __init__ (and a from_config() if "
            "they are not plain values)."
        ) from error


def _copy_weights(model, copy) -> None:
    """Sets every layer of ``copy`` to the weights of its original in ``model``, value for value.

    Raises:
      _CannotCopy: naming the layer, if a rebuilt layer's weights differ in number or shape from
        the original's (its config does not describe it).
    """
    for old, new in zip(model.layers, copy.layers, strict=True):
        old_shapes = [tuple(w.shape) for w in old.weights]
        new_shapes = [tuple(w.shape) for w in new.weights]
        if old_shapes != new_shapes:
            raise _CannotCopy(
                f"layer {old.name!r} ({type(old).__name__}) cannot be copied: rebuilt from its config it "
                f"has weights of shapes {new_shapes}, the original {old_shapes}, so its get_config() does "
                "not describe it. Give it a get_config() that returns every argument of its __init__."
            )
        new.set_weights(old.get_weights())


def with_relu_gradient(model, rule: str = "guided", *, alpha: float = 0.01):
    """A copy of ``model`` whose every ReLU sends ``rule``'s gradient back; forward outputs unchanged.

    Replaces every plain ReLU, in nested models too: an ``activation`` (or
    ``recurrent_activation``, also of RNN cells and wrapped layers) that is ``"relu"``,
    ``keras.activations.relu``, ``keras.ops.relu`` or ``tf.nn.relu`` becomes a
    :class:`ReLUGradientActivation`; a ``keras.layers.ReLU()`` with default arguments, an
    ``Activation`` or ``Lambda`` of one of those, or a :class:`ReLUGradient` becomes a
    :class:`ReLUGradient` of ``rule``. The copy has the same weights (copied, not shared), gives bitwise the same outputs,
    and keeps its rule through ``save("m.keras")`` + ``load_model``; ``model`` is left untouched.
    A ReLU that cannot be replaced is refused rather than left with its plain gradient. Useful for
    guided backpropagation or deconvnet saliency on a model you did not write.

    Args:
      model: a built Keras functional or Sequential model (a subclassed model cannot be cloned).
      rule: ``"relu"``, ``"guided"``, ``"deconvnet"`` or ``"leaky"`` (see :class:`ReLUGradient`).
      alpha: the leaky gradient's slope where ``x <= 0``.

    Returns:
      A new ``keras.Model``.

    Raises:
      TypeError: ``model`` is not a Keras model, or ``rule`` is not a string.
      ValueError: an unknown ``rule``, an unbuilt or subclassed model, or a ReLU that cannot be
        replaced (the message names the layer): ``keras.layers.ReLU`` with ``max_value``,
        ``negative_slope`` or ``threshold`` set, ``LeakyReLU``, ``PReLU``, an activation whose
        name says ReLU (``"relu6"``, ``"leaky_relu"``, a ``functools.partial`` of ``relu``), or a
        function of yours (a lambda, a ``Lambda`` layer's...) that builds a ``Relu``, ``Relu6`` or
        ``LeakyRelu`` op; or a layer that cannot be copied (the message names it): one Keras
        cannot rebuild from its ``get_config()``, or whose rebuilt weights differ in shape.

    Example:
      >>> import keras, numpy as np, gradlab
      >>> inputs = keras.Input((3,))
      >>> model = keras.Model(inputs, keras.layers.Dense(2, activation="relu")(inputs))
      >>> guided = gradlab.layers.with_relu_gradient(model, "guided")
      >>> x = np.ones((1, 3), np.float32)
      >>> bool(np.array_equal(model(x), guided(x)))
      True
    """
    if not isinstance(model, keras.Model):
        raise TypeError(f"model must be a Keras model; got {v.describe(model)}.")
    alpha = _check_rule(rule, alpha)
    if not model.built:
        raise ValueError(f"model {model.name!r} is not built: call it on data or give it an Input first.")

    def check(layers):                # refuse ReLUs that cannot be replaced before cloning anything
        for layer in layers:
            if isinstance(layer, keras.Model):
                check(layer.layers)
            else:
                _sites_in(layer)

    check(model.layers)

    def clone(layer):
        if isinstance(layer, keras.Model):
            return with_relu_gradient(layer, rule, alpha=alpha)
        whole, sites = _sites_in(layer)
        if whole:
            return ReLUGradient(rule, alpha=alpha, name=layer.name)
        new = _rebuilt(layer)
        holders = _relu_sites.holders(new)
        for index, attr in sites:
            setattr(holders[index], attr, ReLUGradientActivation(rule, alpha))
        return new

    try:
        copy = keras.models.clone_model(model, clone_function=clone)
    except _CannotCopy:
        raise                         # a layer or nested model that says itself why
    except ValueError as error:
        raise _CannotCopy(
            f"model {model.name!r} ({type(model).__name__}) cannot be cloned: Keras clones only "
            "functional and Sequential models, each layer rebuilt from its config. Rebuild it as one of "
            f"those, or use ReLUGradient in its call(). (Keras: {str(error).strip()})"
        ) from error
    _copy_weights(model, copy)
    return copy
