"""Graph-mode gradient overrides without the traps: ``register_gradient`` and ``gradient_override``.

TensorFlow's ``tf.RegisterGradient`` and ``Graph.gradient_override_map`` replace the gradient of
every op of a given *type* built inside a block. They work in TF1 graphs and inside
``tf.function``, but they come with three silent or confusing failures that these helpers remove:

* registering a name twice raises ``KeyError``, so re-running a notebook cell fails;
* in eager mode the override map is silently ignored;
* a misspelled op type (``"relu"`` for ``"Relu"``) is silently ignored.
"""
from __future__ import annotations

import contextlib
import difflib
import itertools
from typing import Callable, Dict, Iterator, Mapping, Optional, Union

import tensorflow as tf

from gradlab import _validation as v

__all__ = ["register_gradient", "gradient_override"]

#: A graph-mode gradient function, as for ``tf.RegisterGradient``: ``fn(op, *grads)`` returns one
#: gradient (or ``None``) per input of ``op``.
GraphGradientFn = Callable[..., object]

# name -> the current function. TensorFlow's registry holds, once per name, a small trampoline that
# looks the function up here at gradient time, so registering a name again replaces its function.
_REGISTERED: Dict[str, GraphGradientFn] = {}
_lambda_counter = itertools.count(1)
# gradient function -> the name gradient_override registered it under. Each function gets its own
# name: two closures with one qualified name (``make(2.0)``, ``make(3.0)``) must not replace each
# other's gradient in ops that were already built.
_OVERRIDE_NAMES: Dict[GraphGradientFn, str] = {}
_override_counter = itertools.count(1)


def _default_name(fn: GraphGradientFn) -> str:
    qualname = getattr(fn, "__qualname__", None) or type(fn).__name__
    module = getattr(fn, "__module__", None) or "__main__"
    name = f"gradlab:{module}.{qualname}"
    if "<lambda>" in qualname:  # lambdas cannot be told apart by name
        name = f"{name}#{next(_lambda_counter)}"
    return name


def _is_registered(name: str) -> bool:
    """Whether TensorFlow's gradient registry holds ``name`` (best effort through a private API)."""
    try:
        from tensorflow.python.framework import ops as tf_ops

        tf_ops._gradient_registry.lookup(name)  # pylint: disable=protected-access
    except LookupError:
        return False
    except Exception:  # the private API moved: assume it exists, TensorFlow will complain if not
        return True
    return True


def register_gradient(fn: GraphGradientFn, name: Optional[str] = None) -> str:
    """Registers a graph-mode gradient function and returns the name to use in an override map.

    Like ``@tf.RegisterGradient(name)``, but safe to run twice: registering a name that gradlab
    registered before replaces its function (so re-running a notebook cell after editing it takes
    effect), instead of TensorFlow's ``KeyError: Registering two gradient with name ...``. The
    source material's workaround, a random suffix per run, leaks a registry entry every time.

    ``fn(op, *grads)`` receives the forward op (``op.inputs``, ``op.outputs``, ``op.get_attr``) and
    one upstream gradient per output, and returns one gradient (or ``None``) per input::

        def clipped_identity_grad(op, grad):
            return tf.clip_by_value(grad, -0.1, 0.1)

    Args:
      fn: the gradient function.
      name: the registry name. Defaults to one derived from ``fn``'s module and qualified name
        (a fresh one for each lambda).

    Returns:
      The registered name, for ``gradient_override`` or ``Graph.gradient_override_map``.

    Raises:
      TypeError: if ``fn`` is not callable or ``name`` is not a string.
      ValueError: if ``name`` is empty, or already names a gradient that gradlab did not register
        (a built-in op type such as ``"Relu"``, or one registered with ``tf.RegisterGradient``).

    Example:
      >>> import tensorflow as tf, gradlab
      >>> def five_times(op, grad):
      ...     return 5.0 * grad
      >>> name = gradlab.register_gradient(five_times, "FiveTimes")
      >>> gradlab.register_gradient(five_times, "FiveTimes")  # running the cell again is fine
      'FiveTimes'
    """
    v.check_callable(fn, "fn")
    if name is None:
        name = _default_name(fn)
    if not isinstance(name, str):
        raise TypeError(f"name must be a string; got {type(name).__name__} {name!r}.")
    if not name:
        raise ValueError("name must be a non-empty string; got ''.")
    if name in _REGISTERED:
        _REGISTERED[name] = fn
        return name
    if _is_registered(name):
        raise ValueError(
            f"name {name!r} already names a gradient that gradlab did not register (a built-in op "
            "type, or one registered with tf.RegisterGradient); TensorFlow cannot replace it. "
            "Choose another name and map the op type to it with gradient_override."
        )

    def trampoline(op, *grads):
        return _REGISTERED[name](op, *grads)

    trampoline.__name__ = f"gradlab_gradient_{name}"
    tf.RegisterGradient(name)(trampoline)
    _REGISTERED[name] = fn
    return name


def _register_for_override(fn: GraphGradientFn) -> str:
    """Registers a function passed to ``gradient_override`` under a name of its own.

    The same function always gets the same name, so tracing a ``tf.function`` again registers
    nothing new; a different function never shares a name with another one.
    """
    try:
        hash(fn)
    except TypeError:  # an unhashable callable object: a fresh name every time
        hashable = False
    else:
        hashable = True
        if fn in _OVERRIDE_NAMES:
            return _OVERRIDE_NAMES[fn]
    qualname = getattr(fn, "__qualname__", None) or type(fn).__name__
    module = getattr(fn, "__module__", None) or "__main__"
    name = f"gradlab:{module}.{qualname}#override{next(_override_counter)}"
    while name in _REGISTERED or _is_registered(name):
        name = f"gradlab:{module}.{qualname}#override{next(_override_counter)}"
    register_gradient(fn, name)
    if hashable:
        _OVERRIDE_NAMES[fn] = name
    return name


def _known_op_types() -> Optional[set]:
    names = {n for n in dir(tf.raw_ops) if n[:1].isupper()}
    return names or None


def _check_op_type(op_type: object) -> None:
    if not isinstance(op_type, str):
        raise TypeError(f"op types in the mapping must be strings such as 'Identity'; got {op_type!r}.")
    known = _known_op_types()
    if known is None or op_type in known:
        return
    by_lower = {k.lower(): k for k in known}
    guesses = [by_lower[op_type.lower()]] if op_type.lower() in by_lower else []
    guesses += [g for g in difflib.get_close_matches(op_type, known, n=3) if g not in guesses]
    hint = f" Did you mean {' or '.join(repr(g) for g in guesses[:3])}?" if guesses else ""
    raise ValueError(
        f"{op_type!r} is not a TensorFlow op type, so an override for it would be silently ignored."
        f"{hint} Op types are CamelCase names such as 'Identity', 'Relu', 'MatMul' "
        "(see op.type, or tf.raw_ops)."
    )


@contextlib.contextmanager
def gradient_override(mapping: Mapping[str, Union[str, GraphGradientFn]]) -> Iterator[Dict[str, str]]:
    """Overrides the gradient of op types created inside the block (graph mode / ``tf.function``).

    A checked ``tf.compat.v1.get_default_graph().gradient_override_map(...)``: every op of a mapped
    type created inside the ``with`` block gets the mapped gradient; ops created elsewhere keep
    theirs. Values may be names from :func:`register_gradient` (or ``tf.RegisterGradient``), or
    gradient functions ``fn(op, *grads)``, which are registered for you (each function under a
    name of its own).

    Which differentiation sees the override (measured on TensorFlow 2.21):

    * ``tf.gradients`` in a ``tf.Graph`` or inside the same ``tf.function``: yes;
    * a ``tf.GradientTape`` *outside* a ``tf.function`` that built the ops: yes (the function's
      backward pass is built symbolically, like ``tf.gradients``);
    * a ``tf.GradientTape`` opened *inside* the ``tf.function``: **no**, the tape looks gradients up
      by op type and ignores override maps;
    * eager ops: **no**, so this raises ``RuntimeError`` there.

    For tapes, prefer :func:`gradlab.map_gradient` or ``tf.custom_gradient``.

    Args:
      mapping: op type (``"Identity"``, ``"Relu"``...) -> registered name or gradient function.

    Yields:
      The resolved ``{op type: registered name}`` mapping.

    Raises:
      RuntimeError: in eager mode, where TensorFlow silently ignores override maps. Build the ops
        inside a ``tf.function`` or a ``tf.Graph`` instead.
      TypeError: if ``mapping`` is not a mapping, or a value is neither a string nor callable.
      ValueError: if a key is not an op type (for instance ``"relu"``), or a name is not registered.

    Example:
      >>> import tensorflow as tf, gradlab
      >>> @tf.function
      ... def gradient_of_identity(x):
      ...     with gradlab.gradient_override({"Identity": lambda op, grad: 5.0 * grad}):
      ...         y = tf.identity(x)
      ...     return tf.gradients(y, x)[0]
      >>> float(gradient_of_identity(tf.constant(1.0)))
      5.0
    """
    if not isinstance(mapping, Mapping):
        raise TypeError(
            f"mapping must be a dict of op type -> gradient; got {type(mapping).__name__} {mapping!r}."
        )
    if tf.executing_eagerly():
        raise RuntimeError(
            "gradient_override has no effect in eager mode: TensorFlow silently ignores "
            "gradient_override_map for eagerly executed ops. Build the ops inside a @tf.function "
            "(or a tf.Graph), or use an eager-friendly op such as gradlab.map_gradient or "
            "tf.custom_gradient."
        )
    resolved: Dict[str, str] = {}
    for op_type, gradient in mapping.items():
        _check_op_type(op_type)
        if isinstance(gradient, str):
            if gradient not in _REGISTERED and not _is_registered(gradient):
                raise ValueError(
                    f"no gradient is registered under {gradient!r} (for op type {op_type!r}). "
                    "Register it first with gradlab.register_gradient(fn, name), or pass the "
                    "gradient function itself."
                )
            resolved[op_type] = gradient
        elif callable(gradient):
            resolved[op_type] = _register_for_override(gradient)
        else:
            raise TypeError(
                f"the gradient for op type {op_type!r} must be a registered name or a function "
                f"fn(op, *grads); got {type(gradient).__name__} {gradient!r}."
            )
    with tf.compat.v1.get_default_graph().gradient_override_map(resolved):
        yield resolved
