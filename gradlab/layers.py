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

from typing import List, Optional, Tuple

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
        def relu(t):   # the op's name tells with_relu_gradient's check this ReLU follows the rule
            return tf.nn.relu(t, name=_relu_sites.marker(self.rule)), lambda dy: self._backward(t, dy)
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
    """Whether an activation is a plain ReLU (a function, a default ``keras.layers.ReLU``) or gradlab's."""
    return (isinstance(fn, (ReLUGradientActivation, ReLUGradient)) or _relu_sites.is_plain_relu(fn)
            or _relu_sites.is_plain_relu_layer(fn))


def _sites_in(layer) -> Tuple[bool, List[Tuple[int, str]]]:
    """(replace ``layer`` by a ReLUGradient?, [(holder index, attribute)] of activations to swap)."""
    return (True, []) if isinstance(layer, ReLUGradient) else _relu_sites.relu_sites(layer, _is_replaceable)


def _own_sites(layer) -> Tuple[bool, List[Tuple[int, str]]]:
    """Like ``_sites_in`` for a sublayer of a layer: only its own attributes (its cells are sublayers too)."""
    if isinstance(layer, ReLUGradient):
        return True, []
    return _relu_sites.relu_sites(layer, _is_replaceable, holders_of=lambda holder: [holder])


def _new_relu(old, rule: str, alpha: float, holder):
    """What replaces the plain ReLU activation ``old`` of ``holder``: a ReLUGradientActivation, or a
    ReLUGradient with ``old``'s dtype policy if ``old`` is a ReLU layer that computes in another dtype
    than ``holder`` (it casts its input: so must its replacement)."""
    if isinstance(old, keras.layers.Layer) and old.compute_dtype != getattr(holder, "compute_dtype", None):
        return ReLUGradient(rule, alpha=alpha, name=old.name, dtype=old.dtype_policy)
    return ReLUGradientActivation(rule, alpha)


def _swap(holder, attr: str, value) -> None:
    """Sets ``holder.attr = value``; a layer it replaces is no longer tracked as ``holder``'s sublayer."""
    old = vars(holder)[attr]
    _setattr_unlocked(holder, attr, value)
    if isinstance(old, keras.layers.Layer) and isinstance(holder, keras.layers.Layer):
        _retrack(holder, old, value)


def _retrack(container, old, new) -> None:
    """Puts ``new`` in ``old``'s place among ``container``'s tracked sublayers."""
    tracked = container._layers
    indices = [i for i, layer in enumerate(tracked) if layer is old]
    if indices and isinstance(new, keras.layers.Layer):
        for i in reversed([i for i, layer in enumerate(tracked) if layer is new]):
            del tracked[i]                          # appended by setattr
        tracked[indices[0]] = new
    else:
        tracked[:] = [layer for layer in tracked if layer is not old]


def _setattr_unlocked(layer, attr: str, value) -> None:
    """``setattr`` on a built Keras layer, whose tracker refuses new state once it is built."""
    tracker = getattr(layer, "_tracker", None)
    locked = bool(getattr(tracker, "locked", False))
    if locked:
        tracker.unlock()
    try:
        setattr(layer, attr, value)
    finally:
        if locked:
            tracker.lock()


def _replace_sublayer(root, old, new) -> bool:
    """Replaces the sublayer ``old`` of ``root`` by ``new`` where an attribute or a list holds it."""
    found = False
    for container in root._flatten_layers(include_self=True):
        for attr, value in list(vars(container).items()):
            if value is old:
                _setattr_unlocked(container, attr, new)
                found = True
            elif isinstance(value, list) and any(item is old for item in value):
                for i, item in enumerate(value):
                    if item is old:
                        value[i] = new
                found = True
            else:
                continue
            _retrack(container, old, new)
    return found


def _set_rule(layer: "ReLUGradient", rule: str, alpha: float) -> None:
    """Gives a ReLUGradient (a sublayer, or an activation) ``rule``; its config follows."""
    layer._relu = ReLUGradientActivation(rule, alpha)
    layer.rule, layer.alpha = rule, layer._relu.alpha


def _opaque(layer) -> bool:
    """Whether with_relu_gradient must trace ``layer`` to see its ReLUs: it holds a class or a
    function from outside Keras, TensorFlow and gradlab, whose ``call()`` may build a ReLU op."""
    if not isinstance(layer, keras.layers.Layer):   # a Keras op of a functional model
        return False
    for sub in layer._flatten_layers(include_self=True):
        if not _relu_sites.is_known(sub):
            return True
        for attr in ("activation", "recurrent_activation", "function"):
            fn = vars(sub).get(attr)
            if fn is not None and not _is_replaceable(fn) and not _relu_sites.is_known(fn):
                return True
    return False


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


def _config_of(layer) -> dict:
    """``layer``'s config from its class's ``get_config`` (not the guard a copy's layer may carry)."""
    return type(layer).get_config(layer)


def _rebuilt(layer, overrides: Optional[dict] = None) -> keras.layers.Layer:
    """A new, unbuilt ``layer`` from its config updated with ``overrides``, with ``layer``'s name and
    dtype policy (its weights are copied later).

    Raises:
      _CannotCopy: naming the layer, if Keras cannot rebuild it from ``get_config()``.
    """
    try:
        with keras.saving.custom_object_scope(_initializers_by_class_name()):
            new = layer.__class__.from_config({**_config_of(layer), **(overrides or {})})
    except (TypeError, ValueError, NotImplementedError) as error:
        raise _CannotCopy(
            f"layer {layer.name!r} ({type(layer).__name__}) cannot be copied: Keras {keras.__version__} "
            f"cannot rebuild it from its config ({type(error).__name__}: {str(error).strip()}). Give the "
            "layer a get_config() that returns every argument of its __init__ (and a from_config() if "
            "they are not plain values)."
        ) from error
    if not isinstance(layer, keras.layers.Layer):          # a Keras op of a functional model
        return new
    if new.dtype_policy.name != layer.dtype_policy.name:   # a config without "dtype" takes the global one
        new.dtype_policy = layer.dtype_policy
    if new.name != layer.name:                             # nor does one without "name" keep it
        new.name = layer.name
    return new


def _layer_pairs(model, copy) -> List[tuple]:
    """(original, copy) of each layer of ``model`` (a ``keras.ops.relu`` op's copy is a layer)."""
    pairs = zip(_operations(model), _operations(copy), strict=True)
    return [(old, new) for old, new in pairs if isinstance(old, keras.layers.Layer)]


def _copy_weights(model, copy) -> None:
    """Sets every layer of ``copy`` to the weights of its original in ``model``, value for value.

    Raises:
      _CannotCopy: naming the layer, if a rebuilt layer's weights differ in number or shape from
        the original's (its config does not describe it).
    """
    for old, new in _layer_pairs(model, copy):
        old_shapes = [tuple(w.shape) for w in old.weights]
        new_shapes = [tuple(w.shape) for w in new.weights]
        if old_shapes != new_shapes:
            raise _CannotCopy(
                f"layer {old.name!r} ({type(old).__name__}) cannot be copied: rebuilt from its config it "
                f"has weights of shapes {new_shapes}, the original {old_shapes}, so its get_config() does "
                "not describe it. Give it a get_config() that returns every argument of its __init__."
            )
        new.set_weights(old.get_weights())


class _GlobalPolicy:
    """Sets Keras' global dtype policy for a block, and restores it (also on an exception)."""

    def __init__(self, policy):
        self.policy, self.saved = policy, None

    def __enter__(self):
        self.saved = keras.config.dtype_policy()
        if getattr(self.policy, "quantization_mode", None) is None:   # a quantized policy is a layer's only
            keras.config.set_dtype_policy(self.policy.name)

    def __exit__(self, *exc_info):
        keras.config.set_dtype_policy(self.saved)


def _check_sublayers(layer) -> None:
    """Refuses, before cloning, a ReLU variant or a ReLU in a function of yours in ``layer``'s sublayers."""
    for sub in layer._flatten_layers(include_self=False):
        try:
            _own_sites(sub)
        except ValueError as error:
            raise ValueError(f"in layer {layer.name!r} ({type(layer).__name__}), {error}") from error


def _check_policies(old, new) -> None:
    """Refuses a rebuilt layer whose sublayers did not get the original's dtype policies."""
    pairs = zip(old._flatten_layers(include_self=False), new._flatten_layers(include_self=False))
    for before, after in pairs:
        if type(before) is type(after) and before.dtype_policy.name != after.dtype_policy.name:
            raise _CannotCopy(
                f"layer {old.name!r} ({type(old).__name__}) cannot be copied: rebuilt from its config, its "
                f"sublayer {after.name!r} ({type(after).__name__}) has the dtype policy "
                f"{after.dtype_policy.name!r} where the original's {before.name!r} has "
                f"{before.dtype_policy.name!r}, so the copy's forward pass would differ. Create the "
                "sublayers with dtype=self.dtype_policy (or another explicit dtype) in the layer's __init__."
            )


def _shares(original, sub) -> "_CannotCopy":
    """The refusal of a rebuilt layer that holds ``sub``, a sublayer of ``original`` with a ReLU."""
    return _CannotCopy(
        f"layer {original.name!r} ({type(original).__name__}) cannot be copied: rebuilt from its config it "
        f"still holds the original's sublayer {sub.name!r} ({type(sub).__name__}), so giving that "
        "sublayer's ReLU the rule would change the original model too. Create the sublayers in the "
        "layer's __init__ or build(), not once for all its instances."
    )


def _swap_sublayers(original, layer, rule: str, alpha: float) -> None:
    """Gives the plain ReLUs in ``layer``'s sublayers (a built copy's) ``rule``.

    Raises:
      _CannotCopy: naming the layer, if a sublayer with a ReLU is the original's own object (not
        rebuilt from the config): replacing its ReLU would change the original model too.
    """
    originals = {id(sub) for sub in original._flatten_layers(include_self=False)}
    for sub in layer._flatten_layers(include_self=False):
        if id(sub) in originals and (isinstance(sub, ReLUGradient) or any(_own_sites(sub))):
            raise _shares(original, sub)
        if isinstance(sub, ReLUGradient):
            _set_rule(sub, rule, alpha)
            continue
        whole, sites = _own_sites(sub)
        if whole and not sites:                               # a keras.layers.ReLU(): a layer in its place
            _replace_sublayer(layer, sub, ReLUGradient(rule, alpha=alpha, name=sub.name, dtype=sub.dtype_policy))
        for _, attr in sites:                                 # an activation, or an Activation's function
            _swap(sub, attr, _new_relu(vars(sub)[attr], rule, alpha, sub))


def _relu_ops_called(layer, arguments=None) -> List[str]:
    """The names of the ReLU ops ``layer`` builds when called on ``arguments`` (a Keras node's
    ``SymbolicArguments``; by default those of its first call in its model)."""
    arguments = arguments or layer._inbound_nodes[0].arguments
    structure = (list(arguments.args), dict(arguments.kwargs))
    leaves = tf.nest.flatten(structure)
    where = [i for i, leaf in enumerate(leaves) if isinstance(leaf, keras.KerasTensor)]

    def call(*tensors):
        filled = list(leaves)
        for i, tensor in zip(where, tensors):
            filled[i] = tensor
        args, kwargs = tf.nest.pack_sequence_as(structure, filled)
        return layer(*args, **kwargs)

    specs = [tf.TensorSpec(leaves[i].shape, leaves[i].dtype) for i in where]
    return _relu_sites.relu_ops(_relu_sites.trace(call, specs))


def _config_keeps_rule(layer, rule: str) -> bool:
    """Whether ``layer`` (a copy's), rebuilt from its config as ``load_model`` would, builds only
    ``rule``'s ReLUs: whether a ``.keras`` file or a clone of the copy keeps the rule."""
    arguments = layer._inbound_nodes[0].arguments

    def fresh(leaf):             # a Keras tensor of the same spec, not connected to the copy's graph
        return keras.KerasTensor(leaf.shape, dtype=leaf.dtype) if isinstance(leaf, keras.KerasTensor) else leaf

    args, kwargs = tf.nest.map_structure(fresh, (list(arguments.args), dict(arguments.kwargs)))
    try:
        again = _rebuilt(layer)
        again(*args, **kwargs)                                  # builds it
        names = _relu_ops_called(again, again._inbound_nodes[0].arguments)
    except Exception:  # noqa: BLE001 - whatever fails, the config does not give back the copy
        return False
    return all(_relu_sites.marker(rule) in name for name in names)


def _guard_config(layer) -> None:
    """Makes ``get_config()`` of a copy's layer whose config does not record its replaced ReLUs refuse."""
    def get_config():
        raise ValueError(
            f"layer {layer.name!r} ({type(layer).__name__}) of with_relu_gradient's copy has ReLUs replaced "
            "inside it (in its sublayers) that its get_config() does not record: saved (model.save) or "
            "cloned, it would come back with their plain gradient. Save or clone the original model and "
            "call with_relu_gradient on it again."
        )
    layer.get_config = get_config


def _last_line(error: Exception) -> str:
    """``Type: last line`` of an error's message (a tf.function error ends with its cause)."""
    lines = [line.strip() for line in str(error).splitlines() if line.strip()]
    line = lines[-1] if lines else ""
    return line if line.split(":")[0].endswith(("Error", "Exception")) else f"{type(error).__name__}: {line}"


def _check_traced(layer, rule: str) -> int:
    """Traces a copy's opaque ``layer``: refuses a ReLU op it builds that is not ``rule``'s; the count of those.

    Raises:
      ValueError: naming the layer, if it builds a ReLU op that is not gradlab's with ``rule``, or if
        it cannot be traced on its input (then whether it builds one is not known).
    """
    try:
        names = _relu_ops_called(layer)
    except Exception as error:  # noqa: BLE001 - a user's call() may raise anything on a symbolic tensor
        raise ValueError(
            f"layer {layer.name!r} ({type(layer).__name__}) cannot be traced on its input "
            f"({_last_line(error)}), so with_relu_gradient cannot tell whether "
            "it builds a ReLU op it would leave with the plain gradient. Make its call() run in a "
            "tf.function on a tensor of its input's shape, or put gradlab.layers.ReLUGradient(rule) in it "
            "yourself and leave it out of with_relu_gradient."
        ) from error
    ours = [name for name in names if _relu_sites.marker(rule) in name]
    others = [name for name in names if _relu_sites.marker(rule) not in name]
    if others:
        raise _relu_sites.function_message(
            layer, f"builds a ReLU op in its call() that it could not replace (graph nodes "
                   f"{', '.join(sorted(set(others))[:5])}: a keras.ops.relu or tf.nn.relu called there, a function "
                   "of yours, or a sublayer it does not hold in an attribute or a list)")
    return len(ours)


def _activation_names(model) -> List[str]:
    """The activations found in ``model`` (every layer, nested ones too), for an error message."""
    names = set()
    for layer in model._flatten_layers(include_self=False):
        for holder in _relu_sites.holders(layer):
            for attr in ("activation", "recurrent_activation", "function"):
                fn = vars(holder).get(attr)
                if fn is not None:
                    names.add(getattr(fn, "__name__", None) or type(fn).__name__)
        if type(layer).__module__.startswith("keras.src.layers.activations") and not isinstance(
                layer, keras.layers.Activation):
            names.add(type(layer).__name__)
    return sorted(names - {"linear"})


def _no_relu(model, rule: str) -> ValueError:
    names = _activation_names(model)
    found = f"its activations are {', '.join(map(repr, names))}" if names else "it has no activation function"
    return ValueError(
        f"model {model.name!r} has no ReLU for with_relu_gradient to change ({found}; none is a plain "
        f"ReLU), so a copy with rule {rule!r} would give exactly the model's plain gradient. The rules "
        "(guided backpropagation, deconvnet, leaky) act only at ReLUs: on this model take the plain "
        "gradient, or an attribution method that does not need ReLUs (e.g. integrated gradients)."
    )


def _operations(model) -> list:
    """The layers of ``model`` and, in a functional model, the Keras ops called on its tensors."""
    return list(getattr(model, "operations", None) or model.layers)


def _policy_of(layer):
    """The dtype policy a ReLUGradient in ``layer``'s place needs to compute as ``layer`` did.

    A layer's own; for a ``keras.ops.relu`` op of a functional model, which computes in its input's
    dtype, that dtype.
    """
    if isinstance(layer, keras.layers.Layer):
        return layer.dtype_policy
    return layer._inbound_nodes[0].arguments.keras_tensors[0].dtype


def _with_rule(model, rule: str, alpha: float) -> Tuple[keras.Model, int]:
    """(a copy of ``model`` whose ReLUs follow ``rule``, how many ReLUs it replaced)."""
    if not model.built:
        raise ValueError(f"model {model.name!r} is not built: call it on data or give it an Input first.")

    def check(layers):                # refuse ReLUs that cannot be replaced before cloning anything
        for layer in layers:
            if isinstance(layer, keras.Model):
                check(_operations(layer))
            else:
                _sites_in(layer)
                if _opaque(layer):
                    _check_sublayers(layer)

    check(_operations(model))
    replaced = 0

    def clone(layer):
        nonlocal replaced
        if isinstance(layer, keras.Model):
            copy, count = _with_rule(layer, rule, alpha)
            replaced += count
            return copy
        whole, sites = _sites_in(layer)
        if whole:
            replaced += 1
            return ReLUGradient(rule, alpha=alpha, name=layer.name, dtype=_policy_of(layer))
        # Keras 3.3 cannot rebuild a layer whose activation is a layer: it is replaced just below
        swapped_layers = {attr: None for index, attr in sites
                          if index == 0 and isinstance(vars(layer)[attr], keras.layers.Layer)}
        new = _rebuilt(layer, swapped_layers)
        holders, old_holders = _relu_sites.holders(new), _relu_sites.holders(layer)
        originals = {id(sub) for sub in layer._flatten_layers()} if sites else set()
        for index, attr in sites:
            if id(holders[index]) in originals:
                raise _shares(layer, holders[index])
            _swap(holders[index], attr, _new_relu(vars(old_holders[index])[attr], rule, alpha, holders[index]))
        if not _opaque(layer):        # an opaque layer's ReLUs are counted when it is traced
            replaced += len(sites)
        return new

    try:
        # Sublayers a layer creates without a dtype take the global policy: the one the model was built under.
        with _GlobalPolicy(model.dtype_policy):
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
    for old, new in _layer_pairs(model, copy):
        if isinstance(old, keras.Model) or not _opaque(old):
            continue
        _check_policies(old, new)
        _swap_sublayers(old, new, rule, alpha)
        count = _check_traced(new, rule)
        if count and not _config_keeps_rule(new, rule):
            _guard_config(new)
        replaced += count
    return copy, replaced


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
    alpha = _check_rule(rule, alpha)
    copy, replaced = _with_rule(model, rule, alpha)
    if not replaced:
        raise _no_relu(model, rule)
    return copy
