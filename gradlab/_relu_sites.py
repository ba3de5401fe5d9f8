"""Which ReLUs :func:`gradlab.layers.with_relu_gradient` replaces in a Keras model (private module).

It finds, in a layer and in what calls activations for it (RNN cells, wrapped layers), the plain
ReLU activations to swap, and refuses, naming the layer, a ReLU it cannot replace (a variant, a ReLU
with arguments, or a function of yours that builds a ReLU op). It also lists the ``Relu`` ops a
layer builds when called, so that a ReLU hidden in a ``call()`` is refused rather than left plain.
"""
from __future__ import annotations

import functools
import inspect
from typing import Any, Callable, List, Optional, Tuple

import keras
import tensorflow as tf

# The plain ReLUs. keras.ops.nn.relu, tf.keras.activations.relu and tf.compat.v1.nn.relu are the
# same objects as these (Keras 3.15, TF 2.21); tf.raw_ops.Relu takes keyword arguments only.
PLAIN_RELUS = (keras.activations.relu, keras.ops.relu, tf.nn.relu)

# The ops a ReLU builds: the plain one, and the variants gradlab has no rule for.
RELU_OPS = ("Relu", "Relu6", "LeakyRelu")

# Packages whose functions and layers with_relu_gradient knows (it reads their arguments); a layer
# or function from anywhere else is traced to see the ReLU ops it builds.
KNOWN_PACKAGES = ("keras", "tensorflow", "gradlab")

_RELU_ARGUMENTS = {"max_value": None, "negative_slope": 0.0, "threshold": 0.0}


def marker(rule: str) -> str:
    """The name gradlab gives the ``Relu`` op of a ReLU whose gradient follows ``rule``."""
    return f"gradlab_relu_{rule}"


def is_plain_relu(fn) -> bool:
    """Whether ``fn`` is one of the plain ReLU functions (not a variant, not a wrapper)."""
    return any(fn is relu for relu in PLAIN_RELUS)


def relu_arguments(layer: keras.layers.ReLU) -> List[str]:
    """The arguments of a ``keras.layers.ReLU`` that make it a variant, as ``name=value``."""
    config = layer.get_config()
    return [f"{k}={config.get(k)!r}" for k, default in _RELU_ARGUMENTS.items() if config.get(k, default) != default]


def is_plain_relu_layer(obj) -> bool:
    """Whether ``obj`` is a ``keras.layers.ReLU`` with default arguments (a plain ``max(x, 0)``)."""
    return isinstance(obj, keras.layers.ReLU) and not relu_arguments(obj)


def package_of(obj) -> str:
    """The top-level package a function (or a callable object's class) comes from."""
    while isinstance(obj, functools.partial):
        obj = obj.func
    plain = inspect.isfunction(obj) or inspect.ismethod(obj) or inspect.isbuiltin(obj) or isinstance(obj, type)
    module = getattr(obj, "__module__", None) if plain else type(obj).__module__
    return (module or "").split(".")[0]


def is_known(obj) -> bool:
    """Whether ``obj`` (a function or a layer) comes from Keras, TensorFlow or gradlab."""
    if isinstance(obj, keras.layers.Layer):
        return type(obj).__module__.split(".")[0] in KNOWN_PACKAGES
    return package_of(obj) in KNOWN_PACKAGES


def name_of(fn) -> str:
    """A readable name of a function for error messages (``functools.partial`` spelled out)."""
    if isinstance(fn, functools.partial):
        args = [repr(a) for a in fn.args] + [f"{k}={value!r}" for k, value in fn.keywords.items()]
        return f"functools.partial({', '.join([name_of(fn.func), *args])})"
    if isinstance(fn, keras.layers.Layer):
        return f"a {type(fn).__name__} layer {fn.name!r}"
    module, name = getattr(fn, "__module__", None), getattr(fn, "__qualname__", None) or type(fn).__name__
    return f"{module}.{name}" if module else name


def relu_ops(graph_def) -> List[str]:
    """The names of the ``Relu``, ``Relu6`` and ``LeakyRelu`` nodes of a graph and its functions."""
    nodes = list(graph_def.node) + [n for f in graph_def.library.function for n in f.node_def]
    return [node.name for node in nodes if node.op in RELU_OPS]


def trace(fn, specs) -> Any:
    """The GraphDef of ``fn(*tensors)`` for tensors of ``specs`` (exceptions of ``fn`` propagate)."""
    return tf.function(lambda *tensors: fn(*tensors)).get_concrete_function(*specs).graph.as_graph_def()


def builds_a_relu_op(fn, spec: Optional[tf.TensorSpec]) -> Optional[bool]:
    """Whether ``fn`` builds a Relu, Relu6 or LeakyRelu op on a tensor of ``spec``; None if unknown.

    Unknown: no ``spec`` (the shape the function sees is not known), or ``fn`` fails on it.
    """
    if spec is None:
        return None
    try:
        return bool(relu_ops(trace(fn, [spec])))
    except Exception:  # noqa: BLE001 - a user's function may raise anything on a symbolic tensor
        return None


def variant_of(fn, replaceable: Callable[[Any], bool], spec: Optional[tf.TensorSpec] = None
               ) -> Optional[Tuple[str, str]]:
    """(kind, description) of a ReLU in ``fn`` that with_relu_gradient cannot replace, or None.

    ``kind`` is ``"variant"`` (a ReLU variant or a ReLU with arguments, for which gradlab has no
    rule) or ``"function"`` (a function of yours that builds a ReLU op, traced on ``spec``).
    """
    if replaceable(fn):
        return None
    if isinstance(fn, keras.layers.Layer):                   # a layer given as the activation
        if isinstance(fn, keras.layers.ReLU):
            return "variant", f"{name_of(fn)}, a ReLU with {', '.join(relu_arguments(fn))}"
        if isinstance(fn, (keras.layers.LeakyReLU, keras.layers.PReLU)):
            return "variant", f"{name_of(fn)}, a ReLU variant"
        return None
    inner = fn
    while isinstance(inner, functools.partial):  # functools.wraps keeps __name__ and __module__
        inner = inner.func
    if "relu" in (getattr(inner, "__name__", None) or type(inner).__name__).lower():
        return "variant", f"{name_of(fn)}, a ReLU variant or a ReLU with arguments"
    if not is_known(fn) and builds_a_relu_op(fn, spec):
        return "function", f"{name_of(fn)}, which builds a ReLU op"
    return None


def holders(layer) -> List[object]:
    """``layer`` and what calls activations for it: RNN cells, the layers wrapped by a wrapper."""
    subs = [getattr(layer, a, None) for a in ("cell", "layer", "forward_layer", "backward_layer")]
    subs += list(getattr(layer, "cells", None) or ())
    return [layer] + [h for sub in subs if isinstance(sub, keras.layers.Layer) and sub is not layer
                      for h in holders(sub)]


def first_call(layer) -> Optional[Tuple[list, list]]:
    """(input KerasTensors, output KerasTensors) of the first call of ``layer`` in a model, or None."""
    nodes = getattr(layer, "_inbound_nodes", None) or []
    if not nodes:
        return None
    return list(nodes[0].arguments.keras_tensors), list(nodes[0].outputs)


def _spec(tensors) -> Optional[tf.TensorSpec]:
    return tf.TensorSpec(tensors[0].shape, tensors[0].dtype) if len(tensors) == 1 else None


def activation_spec(layer, holder_index: int, attr: str) -> Optional[tf.TensorSpec]:
    """The spec of what ``attr`` of holder ``holder_index`` of ``layer`` is applied to, if known.

    An ``Activation``'s or ``Lambda``'s function sees the layer's input; another layer's own
    activation sees a tensor shaped like its output. A cell's activation is not known here.
    """
    call = first_call(layer)
    if call is None or holder_index != 0 or attr == "recurrent_activation":
        return None
    inputs, outputs = call
    whole = isinstance(layer, (keras.layers.Activation, keras.layers.Lambda))
    return _spec(inputs if whole else outputs)


def variant_message(layer, what: str) -> ValueError:
    """The refusal of a ReLU variant (ReLU6, leaky, PReLU, a ReLU with arguments) in ``layer``."""
    return ValueError(
        f"layer {layer.name!r} ({type(layer).__name__}) {what}: gradlab's rules (guided, deconvnet, "
        "leaky) are defined for the plain ReLU max(x, 0), and it has none for this variant, so "
        "with_relu_gradient refuses rather than leave it with its plain gradient (a ReLUGradient in its "
        "place would change the forward pass). To apply a rule to it, write the variant's forward "
        "under tf.custom_gradient in a layer of yours; to compare with the plain gradient, use the "
        "model as it is."
    )


def function_message(layer, what: str) -> ValueError:
    """The refusal of a plain ReLU that with_relu_gradient cannot reach (a function of yours)."""
    return ValueError(
        f"layer {layer.name!r} ({type(layer).__name__}) {what}: with_relu_gradient replaces only "
        "the plain max(x, 0) given as activation='relu', keras.activations.relu, keras.ops.relu, "
        "tf.nn.relu or keras.layers.ReLU() (in a layer's activation, an Activation or Lambda layer, or "
        "a sublayer), so this ReLU would keep its plain gradient. Use one of those in the model, or put "
        "gradlab.layers.ReLUGradient(rule) or ReLUGradientActivation(rule) in it yourself."
    )


def relu_sites(layer, replaceable: Callable[[Any], bool], *, holders_of: Callable = holders
               ) -> Tuple[bool, List[Tuple[int, str]]]:
    """(replace ``layer`` by a ReLUGradient?, [(holder index, attribute)] of ReLU activations to swap).

    ``layer`` may also be a Keras op in a functional model (``keras.ops.relu`` called on a Keras
    tensor), replaced whole. ``replaceable(fn)`` says whether an activation function is one to swap; ``holders_of(layer)``
    lists the objects whose attributes are read (``holders`` by default). For an ``Activation`` or
    ``Lambda`` of a plain ReLU both are given: the layer can be replaced whole, or its function
    swapped. Raises ValueError, naming the layer, for a ReLU that cannot be replaced.
    """
    if not isinstance(layer, keras.layers.Layer):  # keras.ops.relu(...) on a Keras tensor: an op of the model
        kind = type(layer).__name__
        if kind == "Relu" and is_known(layer):
            return True, []
        if "relu" in kind.lower():
            raise variant_message(layer, f"is a keras.ops call ({kind}), a ReLU variant")
        return False, []
    if isinstance(layer, keras.layers.ReLU):
        if relu_arguments(layer):
            raise variant_message(layer, f"is a ReLU with {', '.join(relu_arguments(layer))}")
        return True, []
    if isinstance(layer, (keras.layers.LeakyReLU, keras.layers.PReLU)):
        raise variant_message(layer, f"is a {type(layer).__name__} layer")
    sites, whole = [], isinstance(layer, (keras.layers.Activation, keras.layers.Lambda))
    attrs = ("activation", "recurrent_activation") + (("function",) if whole else ())
    for index, holder in enumerate(holders_of(layer)):
        for attr in attrs:
            fn = vars(holder).get(attr)  # an instance attribute: a property (LSTM) reads its cell's
            if fn is None:
                continue
            why = variant_of(fn, replaceable, activation_spec(layer, index, attr))
            if why is not None:
                kind, description = why
                message = variant_message if kind == "variant" else function_message
                raise message(layer, f"has {attr}={description}")
            if replaceable(fn):
                sites.append((index, attr))
    return whole and bool(sites), sites
