"""Which ReLUs :func:`gradlab.layers.with_relu_gradient` replaces in a Keras model (private module).

It finds, in a layer and in what calls activations for it (RNN cells, wrapped layers), the plain
ReLU activations to swap, and refuses, naming the layer, a ReLU it cannot replace (a variant, a ReLU
with arguments, or a function of yours that builds a ReLU op).
"""
from __future__ import annotations

import functools
from typing import Any, Callable, List, Optional, Tuple

import keras
import tensorflow as tf

# The plain ReLUs. keras.ops.nn.relu, tf.keras.activations.relu and tf.compat.v1.nn.relu are the
# same objects as these (Keras 3.15, TF 2.21); tf.raw_ops.Relu takes keyword arguments only.
PLAIN_RELUS = (keras.activations.relu, keras.ops.relu, tf.nn.relu)


def is_plain_relu(fn) -> bool:
    """Whether ``fn`` is one of the plain ReLU functions (not a variant, not a wrapper)."""
    return any(fn is relu for relu in PLAIN_RELUS)


def name_of(fn) -> str:
    """A readable name of a function for error messages (``functools.partial`` spelled out)."""
    if isinstance(fn, functools.partial):
        args = [repr(a) for a in fn.args] + [f"{k}={value!r}" for k, value in fn.keywords.items()]
        return f"functools.partial({', '.join([name_of(fn.func), *args])})"
    module, name = getattr(fn, "__module__", None), getattr(fn, "__qualname__", None) or type(fn).__name__
    return f"{module}.{name}" if module else name


def builds_a_relu_op(fn) -> bool:
    """Whether ``fn`` (a lambda, a function of yours...) builds a Relu, Relu6 or LeakyRelu op."""
    try:
        spec = tf.TensorSpec([2, 2], tf.float32)
        graph_def = tf.function(lambda x: fn(x)).get_concrete_function(spec).graph.as_graph_def()
    except Exception:  # it does not run on a float32 matrix: nothing to tell
        return False
    nodes = list(graph_def.node) + [n for f in graph_def.library.function for n in f.node_def]
    return any(node.op in ("Relu", "Relu6", "LeakyRelu") for node in nodes)


def relu_variant(fn, replaceable: Callable[[Any], bool]) -> Optional[str]:
    """Why ``fn`` is a ReLU that with_relu_gradient cannot replace, or None if it is not one."""
    if replaceable(fn):
        return None
    inner = fn
    while isinstance(inner, functools.partial):  # functools.wraps keeps __name__ and __module__
        inner = inner.func
    if "relu" in (getattr(inner, "__name__", None) or type(inner).__name__).lower():
        return f"{name_of(fn)}, a ReLU variant or a ReLU with arguments"
    module = (getattr(inner, "__module__", None) or "").split(".")[0]
    if module not in ("keras", "tensorflow") and builds_a_relu_op(fn):
        return f"{name_of(fn)}, which builds a ReLU op"
    return None


def holders(layer) -> List[object]:
    """``layer`` and what calls activations for it: RNN cells, the layers wrapped by a wrapper."""
    subs = [getattr(layer, a, None) for a in ("cell", "layer", "forward_layer", "backward_layer")]
    subs += list(getattr(layer, "cells", None) or ())
    return [layer] + [h for sub in subs if isinstance(sub, keras.layers.Layer) and sub is not layer
                      for h in holders(sub)]


def relu_sites(layer, replaceable: Callable[[Any], bool]) -> Tuple[bool, List[Tuple[int, str]]]:
    """(replace ``layer`` by a ReLUGradient?, [(holder index, attribute)] of ReLU activations to swap).

    ``replaceable(fn)`` says whether an activation function is one to swap. Raises ValueError,
    naming the layer, for a ReLU that cannot be replaced.
    """
    def refuse(what: str):
        return ValueError(
            f"layer {layer.name!r} ({type(layer).__name__}) {what}: with_relu_gradient replaces only "
            "the plain max(x, 0) (activation='relu', keras.activations.relu, keras.ops.relu, "
            "tf.nn.relu, keras.layers.ReLU() with default arguments), so this ReLU would keep its "
            "plain gradient. Use one of those in the model, or put gradlab.layers.ReLUGradient(rule) "
            "in it yourself."
        )

    if isinstance(layer, keras.layers.ReLU):
        config = layer.get_config()
        defaults = {"max_value": None, "negative_slope": 0.0, "threshold": 0.0}
        set_ = [f"{k}={config.get(k)!r}" for k, default in defaults.items() if config.get(k, default) != default]
        if set_:
            raise refuse(f"is a ReLU with {', '.join(set_)}")
        return True, []
    if isinstance(layer, (keras.layers.LeakyReLU, keras.layers.PReLU)):
        raise refuse(f"is a {type(layer).__name__} layer")
    sites, whole = [], isinstance(layer, (keras.layers.Activation, keras.layers.Lambda))
    attrs = ("activation", "recurrent_activation") + (("function",) if whole else ())
    for index, holder in enumerate(holders(layer)):
        for attr in attrs:
            fn = vars(holder).get(attr)  # an instance attribute: a property (LSTM) reads its cell's
            if fn is None:
                continue
            why = relu_variant(fn, replaceable)
            if why is not None:
                raise refuse(f"has {attr}={why}")
            if replaceable(fn):
                sites.append((index, attr))
    return (True, []) if whole and sites else (False, sites)
