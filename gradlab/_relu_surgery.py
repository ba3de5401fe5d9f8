"""How :func:`gradlab.layers.with_relu_gradient` copies a model with every ReLU following a rule.

Private module. It clones the model layer by layer (the generic surgery is ``_surgery``): a plain
ReLU layer becomes a :class:`~gradlab.layers.ReLUGradient`, a plain ReLU activation a
:class:`~gradlab.layers.ReLUGradientActivation` (``_relu_sites`` finds them and refuses the ones it
cannot replace), and every other layer is rebuilt from its config with its weights copied. A
layer of your own is also traced after the copy, so that a ReLU op it still builds is refused
rather than left with the plain gradient. It counts the ReLUs it replaced: a model without any is
refused too.
"""
from __future__ import annotations

from typing import List, Tuple

import keras
import tensorflow as tf

from gradlab import _relu_sites
from gradlab import _surgery as surgery
from gradlab._relu_layers import ReLUGradient, ReLUGradientActivation


def copy_with_rule(model: keras.Model, rule: str, alpha: float) -> keras.Model:
    """A copy of ``model`` whose every ReLU follows ``rule`` (the arguments already checked).

    Raises:
      ValueError: as :func:`gradlab.layers.with_relu_gradient` documents; also when ``model`` has
        no ReLU to replace.
    """
    copy, replaced = _with_rule(model, rule, alpha)
    if not replaced:
        raise _no_relu(model, rule)
    return copy


def _with_rule(model, rule: str, alpha: float) -> Tuple[keras.Model, int]:
    """(a copy of ``model`` whose ReLUs follow ``rule``, how many ReLUs it replaced)."""
    if not model.built:
        raise ValueError(f"model {model.name!r} is not built: call it on data or give it an Input first.")

    def check(layers):                # refuse ReLUs that cannot be replaced before cloning anything
        for layer in layers:
            if isinstance(layer, keras.Model):
                check(surgery.operations(layer))
            else:
                _sites_in(layer)
                if _opaque(layer):
                    _check_sublayers(layer)

    check(surgery.operations(model))
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
        new = surgery.rebuilt(layer, swapped_layers)
        holders, old_holders = _relu_sites.holders(new), _relu_sites.holders(layer)
        originals = {id(sub) for sub in layer._flatten_layers()} if sites else set()
        for index, attr in sites:
            if id(holders[index]) in originals:
                raise _shares(layer, holders[index])
            surgery.swap(holders[index], attr, _new_relu(vars(old_holders[index])[attr], rule, alpha, holders[index]))
        if not _opaque(layer):        # an opaque layer's ReLUs are counted when it is traced
            replaced += len(sites)
        return new

    try:
        # Sublayers a layer creates without a dtype take the global policy: the one the model was built under.
        with surgery.GlobalPolicy(model.dtype_policy):
            copy = keras.models.clone_model(model, clone_function=clone)
    except surgery.CannotCopy:
        raise                         # a layer or nested model that says itself why
    except ValueError as error:
        raise surgery.CannotCopy(
            f"model {model.name!r} ({type(model).__name__}) cannot be cloned: Keras clones only "
            "functional and Sequential models, each layer rebuilt from its config. Rebuild it as one of "
            f"those, or use ReLUGradient in its call(). (Keras: {str(error).strip()})"
        ) from error
    surgery.copy_weights(model, copy)
    for old, new in surgery.layer_pairs(model, copy):
        if isinstance(old, keras.Model) or not _opaque(old):
            continue
        surgery.check_policies(old, new)
        _swap_sublayers(old, new, rule, alpha)
        count = _check_traced(new, rule)
        if count and not _config_keeps_rule(new, rule):
            _guard_config(new)
        replaced += count
    return copy, replaced


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


def _policy_of(layer):
    """The dtype policy a ReLUGradient in ``layer``'s place needs to compute as ``layer`` did.

    A layer's own; for a ``keras.ops.relu`` op of a functional model, which computes in its input's
    dtype, that dtype.
    """
    if isinstance(layer, keras.layers.Layer):
        return layer.dtype_policy
    return layer._inbound_nodes[0].arguments.keras_tensors[0].dtype


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


def _check_sublayers(layer) -> None:
    """Refuses, before cloning, a ReLU variant or a ReLU in a function of yours in ``layer``'s sublayers."""
    for sub in layer._flatten_layers(include_self=False):
        try:
            _own_sites(sub)
        except ValueError as error:
            raise ValueError(f"in layer {layer.name!r} ({type(layer).__name__}), {error}") from error


def _shares(original, sub) -> surgery.CannotCopy:
    """The refusal of a rebuilt layer that holds ``sub``, a sublayer of ``original`` with a ReLU."""
    return surgery.CannotCopy(
        f"layer {original.name!r} ({type(original).__name__}) cannot be copied: rebuilt from its config it "
        f"still holds the original's sublayer {sub.name!r} ({type(sub).__name__}), so giving that "
        "sublayer's ReLU the rule would change the original model too. Create the sublayers in the "
        "layer's __init__ or build(), not once for all its instances."
    )


def _swap_sublayers(original, layer, rule: str, alpha: float) -> None:
    """Gives the plain ReLUs in ``layer``'s sublayers (a built copy's) ``rule``.

    Raises:
      surgery.CannotCopy: naming the layer, if a sublayer with a ReLU is the original's own object (not
        rebuilt from the config): replacing its ReLU would change the original model too.
    """
    originals = {id(sub) for sub in original._flatten_layers(include_self=False)}
    for sub in layer._flatten_layers(include_self=False):
        if id(sub) in originals and (isinstance(sub, ReLUGradient) or any(_own_sites(sub))):
            raise _shares(original, sub)
        if isinstance(sub, ReLUGradient):
            sub._set_rule(rule, alpha)
            continue
        whole, sites = _own_sites(sub)
        if whole and not sites:                               # a keras.layers.ReLU(): a layer in its place
            surgery.replace_sublayer(layer, sub, ReLUGradient(rule, alpha=alpha, name=sub.name, dtype=sub.dtype_policy))
        for _, attr in sites:                                 # an activation, or an Activation's function
            surgery.swap(sub, attr, _new_relu(vars(sub)[attr], rule, alpha, sub))


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
        again = surgery.rebuilt(layer)
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
