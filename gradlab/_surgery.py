"""Keras model surgery: rebuild a layer from its config, copy weights, swap what a built layer holds.

The generic half of :func:`gradlab.layers.with_relu_gradient` (private module; which ReLUs it
replaces, and by what, is ``_relu_surgery``). Keras clones a functional or Sequential model layer
by layer (``keras.models.clone_model``); these helpers make each layer's copy faithful and say,
naming the layer, when it cannot be:

* :func:`rebuilt`: a new layer from ``get_config()``, with the original's name and dtype policy;
* :func:`copy_weights`: the original's weights, value for value, matched by path (:func:`weight_keys`),
  refused where the paths or shapes differ;
* :func:`check_policies`: refuses a rebuilt layer whose sublayers compute in another dtype;
* :func:`swap` and :func:`replace_sublayer`: set an attribute of a *built* layer (whose tracker
  refuses new state) and keep its list of tracked sublayers right;
* :class:`GlobalPolicy`: the global dtype policy a model was built under, while it is cloned.
"""
from __future__ import annotations

import re
from typing import List, Optional, Tuple

import keras


def setattr_unlocked(layer, attr: str, value) -> None:
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


def retrack(container, old, new) -> None:
    """Puts ``new`` in ``old``'s place among ``container``'s tracked sublayers."""
    tracked = container._layers
    indices = [i for i, layer in enumerate(tracked) if layer is old]
    if indices and isinstance(new, keras.layers.Layer):
        for i in reversed([i for i, layer in enumerate(tracked) if layer is new]):
            del tracked[i]                          # appended by setattr
        tracked[indices[0]] = new
    else:
        tracked[:] = [layer for layer in tracked if layer is not old]


def swap(holder, attr: str, value) -> None:
    """Sets ``holder.attr = value``; a layer it replaces is no longer tracked as ``holder``'s sublayer."""
    old = vars(holder)[attr]
    setattr_unlocked(holder, attr, value)
    if isinstance(old, keras.layers.Layer) and isinstance(holder, keras.layers.Layer):
        retrack(holder, old, value)


def replace_sublayer(root, old, new) -> bool:
    """Replaces the sublayer ``old`` of ``root`` by ``new`` where an attribute or a list holds it."""
    found = False
    for container in root._flatten_layers(include_self=True):
        for attr, value in list(vars(container).items()):
            if value is old:
                setattr_unlocked(container, attr, new)
                found = True
            elif isinstance(value, list) and any(item is old for item in value):
                for i, item in enumerate(value):
                    if item is old:
                        value[i] = new
                found = True
            else:
                continue
            retrack(container, old, new)
    return found


def initializers_by_class_name() -> dict:
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


class CannotCopy(ValueError):
    """A layer or model that with_relu_gradient cannot copy; the message names it and says why."""


def config_of(layer) -> dict:
    """``layer``'s config from its class's ``get_config`` (not the guard a copy's layer may carry)."""
    return type(layer).get_config(layer)


def rebuilt(layer, overrides: Optional[dict] = None) -> keras.layers.Layer:
    """A new, unbuilt ``layer`` from its config updated with ``overrides``, with ``layer``'s name and
    dtype policy (its weights are copied later).

    Raises:
      CannotCopy: naming the layer, if Keras cannot rebuild it from ``get_config()``.
    """
    try:
        with keras.saving.custom_object_scope(initializers_by_class_name()):
            new = layer.__class__.from_config({**config_of(layer), **(overrides or {})})
    except (TypeError, ValueError, NotImplementedError) as error:
        raise CannotCopy(
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


def operations(model) -> list:
    """The layers of ``model`` and, in a functional model, the Keras ops called on its tensors."""
    return list(getattr(model, "operations", None) or model.layers)


def layer_pairs(model, copy) -> List[tuple]:
    """(original, copy) of each layer of ``model`` (a ``keras.ops.relu`` op's copy is a layer)."""
    pairs = zip(operations(model), operations(copy), strict=True)
    return [(old, new) for old, new in pairs if isinstance(old, keras.layers.Layer)]


#: The names Keras gives a weight created without one (its variable class's name, made unique).
_AUTO_NAME = re.compile(r"^variable(_\d+)?$")


def weight_keys(layer) -> List[Tuple[str, int]]:
    """Each of ``layer``'s weights, in order, as (its path below the layer, its rank among equal paths).

    A Keras 3 variable's ``path`` is the name scopes it was created in: ``dense/kernel``, or
    ``sequential/dense/kernel`` for a layer built inside a Sequential model. The leading scopes all of
    a layer's weights share (where it was built) are dropped, the variable's own name always kept, so
    a layer and its rebuilt copy give the same keys whatever the order they create their weights in
    (a float8-quantized ``Dense`` creates its scales before its kernel when built from its config,
    after it when quantized). A name Keras made up (``add_weight`` without a name: ``variable``,
    ``variable_1``..., counted across the process, so a copy's differ) counts as ``variable``. The
    rank tells apart weights of one path (those, or ``add_weight`` twice under one name), in their order.

    Example:
      >>> import keras
      >>> from gradlab._surgery import weight_keys
      >>> dense = keras.layers.Dense(2, name="dense")
      >>> dense.build((None, 3))
      >>> weight_keys(dense)
      [('kernel', 0), ('bias', 0)]
    """
    paths = [weight.path.split("/") for weight in layer.weights]
    shared = 0
    while paths and shared < min(map(len, paths)) - 1 and len({tuple(p[:shared + 1]) for p in paths}) == 1:
        shared += 1
    seen: dict = {}
    keys = []
    for path in paths:
        below = "/".join(path[shared:-1] + [_AUTO_NAME.sub("variable", path[-1])])
        keys.append((below, seen.get(below, 0)))
        seen[below] = seen.get(below, 0) + 1
    return keys


def _undescribed(layer, how: str) -> CannotCopy:
    """The refusal of a layer whose rebuilt copy's weights differ from its own (``how``)."""
    return CannotCopy(
        f"layer {layer.name!r} ({type(layer).__name__}) cannot be copied: rebuilt from its config it "
        f"{how}, so its get_config() does not describe it. Give it a get_config() that returns every "
        "argument of its __init__."
    )


def copy_weights(model, copy) -> None:
    """Sets every layer of ``copy`` to the weights of its original in ``model``, value for value.

    Weights are matched by path below the layer (:func:`weight_keys`), not by position: a layer
    rebuilt from its config may create the same weights in another order.

    Raises:
      CannotCopy: naming the layer, if a rebuilt layer's weights differ in paths or shapes from
        the original's (its config does not describe it).
    """
    for old, new in layer_pairs(model, copy):
        old_keys, new_keys = weight_keys(old), weight_keys(new)
        values = dict(zip(old_keys, old.get_weights()))
        if sorted(old_keys) != sorted(new_keys):
            paths = lambda keys: sorted(path for path, _ in keys)  # noqa: E731
            raise _undescribed(old, f"has the weights {paths(new_keys)}, the original {paths(old_keys)}")
        new_shapes = [tuple(weight.shape) for weight in new.weights]
        old_shapes = [tuple(values[key].shape) for key in new_keys]   # in the copy's order
        if old_shapes != new_shapes:
            raise _undescribed(old, f"has weights of shapes {new_shapes}, the original {old_shapes}")
        new.set_weights([values[key] for key in new_keys])


class GlobalPolicy:
    """Sets Keras' global dtype policy for a block, and restores it (also on an exception)."""

    def __init__(self, policy):
        self.policy, self.saved = policy, None

    def __enter__(self):
        self.saved = keras.config.dtype_policy()
        if getattr(self.policy, "quantization_mode", None) is None:   # a quantized policy is a layer's only
            keras.config.set_dtype_policy(self.policy.name)

    def __exit__(self, *exc_info):
        keras.config.set_dtype_policy(self.saved)


def check_policies(old, new) -> None:
    """Refuses a rebuilt layer whose sublayers did not get the original's dtype policies."""
    pairs = zip(old._flatten_layers(include_self=False), new._flatten_layers(include_self=False))
    for before, after in pairs:
        if type(before) is type(after) and before.dtype_policy.name != after.dtype_policy.name:
            raise CannotCopy(
                f"layer {old.name!r} ({type(old).__name__}) cannot be copied: rebuilt from its config, its "
                f"sublayer {after.name!r} ({type(after).__name__}) has the dtype policy "
                f"{after.dtype_policy.name!r} where the original's {before.name!r} has "
                f"{before.dtype_policy.name!r}, so the copy's forward pass would differ. Create the "
                "sublayers with dtype=self.dtype_policy (or another explicit dtype) in the layer's __init__."
            )
