"""Graph-mode gradient overrides without the traps: ``register_gradient`` and ``gradient_override``.

TensorFlow's ``tf.RegisterGradient`` and ``Graph.gradient_override_map`` replace the gradient of
every op of a given *type* built inside a block. They work in TF1 graphs and inside
``tf.function``, but they come with five silent or confusing failures that these helpers remove:

* registering a name twice raises ``KeyError``, so re-running a notebook cell fails;
* in eager mode the override map is silently ignored;
* a ``tf.GradientTape`` that records the ops (one opened inside the ``tf.function``) silently
  ignores it too;
* a misspelled op type (``"relu"`` for ``"Relu"``) is silently ignored;
* so is a real op type that the block never builds (``{"Cast": ...}`` around ``tf.sign``, which
  builds a ``Sign`` op and no ``Cast``).
"""
from __future__ import annotations

import contextlib
import difflib
import itertools
from typing import Callable, Dict, Iterable, Iterator, Mapping, Optional, Union

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


# What TensorFlow's gradient registry says about a name. TensorFlow has no public lookup, so this
# reads a private one; if that moved, the answer is "unknown" and registering is the test.
_TAKEN, _FREE, _UNKNOWN = "taken", "free", "unknown"
# How many fresh names _register_for_override tries before giving up (it needs one).
_MAX_NAME_ATTEMPTS = 100


def _registry_state(name: str) -> str:
    """``"taken"``, ``"free"`` or ``"unknown"``: whether TensorFlow's gradient registry holds ``name``.

    Best effort through TensorFlow's private ``ops._gradient_registry``; ``"unknown"`` when that
    API is missing or behaves unexpectedly, and callers then try to register and catch the
    ``KeyError`` TensorFlow raises for a duplicate name.
    """
    try:
        from tensorflow.python.framework import ops as tf_ops

        lookup = tf_ops._gradient_registry.lookup  # pylint: disable=protected-access
    except Exception:  # the private API moved
        return _UNKNOWN
    try:
        lookup(name)
    except LookupError:
        return _FREE
    except Exception:
        return _UNKNOWN
    return _TAKEN


def _taken_error(name: str) -> ValueError:
    return ValueError(
        f"name {name!r} already names a gradient that gradlab did not register (a built-in op "
        "type, or one registered with tf.RegisterGradient); TensorFlow cannot replace it. "
        "Choose another name and map the op type to it with gradient_override."
    )


def _try_register(fn: GraphGradientFn, name: str) -> bool:
    """Registers ``fn`` under the new ``name``; False if TensorFlow already holds that name."""

    def trampoline(op, *grads):
        return _REGISTERED[name](op, *grads)

    trampoline.__name__ = f"gradlab_gradient_{name}"
    try:
        tf.RegisterGradient(name)(trampoline)
    except KeyError:  # "Registering two gradient with name ...": the name is taken
        return False
    _REGISTERED[name] = fn
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
        Whether a name is taken is read from TensorFlow's private registry; if that cannot be
        read, registering is the test (TensorFlow's ``KeyError`` becomes this ``ValueError``).

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
    if _registry_state(name) == _TAKEN or not _try_register(fn, name):
        raise _taken_error(name)
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
    for _ in range(_MAX_NAME_ATTEMPTS):
        name = f"gradlab:{module}.{qualname}#override{next(_override_counter)}"
        if name in _REGISTERED or _registry_state(name) == _TAKEN:
            continue
        if _try_register(fn, name):
            break
    else:
        raise RuntimeError(
            f"gradient_override found no free gradient-registry name for {qualname!r} in "
            f"{_MAX_NAME_ATTEMPTS} attempts (TensorFlow's registry reports every candidate as "
            "taken, which suggests its private API changed). Register the function yourself with "
            "gradlab.register_gradient(fn, 'SomeUniqueName') and pass that name instead."
        )
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


def _tape_probe() -> Optional[tuple]:
    """``(add_op_callback, remove_op_callback, gradient_types)`` from TensorFlow, or None.

    Private TensorFlow APIs (measured on TF 2.21; tfdbg has used them since TF 2.2): op callbacks
    see each op as it is built, and ``TFE_Py_TapeSetPossibleGradientTypes(inputs)`` is nonzero
    when a ``GradientTape`` or ``ForwardAccumulator`` records an op on those inputs (TensorFlow's
    own test). If they moved, None, and the tape check is skipped.
    """
    try:
        from tensorflow.python import pywrap_tfe
        from tensorflow.python.framework import op_callbacks

        probe = (op_callbacks.add_op_callback, op_callbacks.remove_op_callback,
                 pywrap_tfe.TFE_Py_TapeSetPossibleGradientTypes)
    except Exception:  # the private API moved
        return None
    return probe if all(callable(f) for f in probe) else None


def _tape_error(op_name: str, op_type: str) -> RuntimeError:
    return RuntimeError(
        f"gradient_override cannot change the gradient of op {op_name!r} (type {op_type!r}): a "
        "tf.GradientTape (or tf.autodiff.ForwardAccumulator) is recording it, and tapes look "
        "gradients up by op type, ignoring override maps, so the override would be silently "
        "ignored. With a tape, use gradlab.map_gradient or tf.custom_gradient instead; to keep "
        "gradient_override, differentiate with tf.gradients (inside the same tf.function, or in "
        "a tf.Graph), and build these ops outside the tape or under `with tape.stop_recording():`."
    )


@contextlib.contextmanager
def _watch_ops(target: tf.Graph, op_types: Iterable[str]) -> Iterator[Optional[Dict[str, int]]]:
    """Yields a dict ``{op type: count}`` of the ops built inside the block, and refuses tapes.

    Every op built while the block runs is counted, in ``target`` and in the graphs nested in it
    (``tf.cond`` branches, loop bodies), which the override map reaches too. Raises
    ``_tape_error`` as soon as an op of ``op_types`` is built in ``target`` while a tape records
    it. Yields None (no count, no tape check) when TensorFlow's private op-callback API is missing.
    """
    probe = _tape_probe()
    if probe is None:
        yield None
        return
    add_callback, remove_callback, gradient_types = probe
    op_types = frozenset(op_types)
    built: Dict[str, int] = {}

    def callback(op_type, inputs, attrs, outputs, op_name=None, graph=None):
        op_type = op_type.decode() if isinstance(op_type, bytes) else str(op_type)
        built[op_type] = built.get(op_type, 0) + 1
        if graph is not target or op_type not in op_types:
            return None
        try:
            recorded = bool(gradient_types(list(inputs)))
        except Exception:  # the private API changed: do not break the user's op
            return None
        if recorded:
            raise _tape_error(op_name, op_type)
        return None

    add_callback(callback)
    try:
        yield built
    finally:
        remove_callback(callback)


def _check_all_built(op_types: Iterable[str], built: Optional[Dict[str, int]]) -> None:
    """Raises ``ValueError`` for the mapped op types of which the block built no op."""
    if built is None:  # the op-callback API is missing: nothing was counted
        return
    missing = [t for t in op_types if not built.get(t)]
    if not missing:
        return
    names = ", ".join(repr(t) for t in missing)
    seen = sorted(built)
    shown = ", ".join(repr(t) for t in seen[:12]) + (", ..." if len(seen) > 12 else "")
    what = f"The block built ops of type {shown}." if seen else "The block built no op at all."
    raise ValueError(
        f"gradient_override: no op of type {names} was built inside the block, so its override "
        f"changed no gradient. {what} Map the type of the op whose gradient you want to change "
        "(op.type, e.g. 'Sign' for tf.sign), build that op inside the block, or remove the entry."
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

    * ``tf.gradients`` inside the same ``tf.function``, or in a ``tf.compat.v1`` ``tf.Graph``
      (with a ``Session``): **yes**;
    * a ``tf.GradientTape`` opened *outside* a ``tf.function`` that built the ops: **yes** (the
      function's backward pass is built symbolically, like ``tf.gradients``), also when the
      function was first traced under that tape;
    * a ``tf.GradientTape`` (or ``tf.autodiff.ForwardAccumulator``) that records the ops, that is
      one opened *inside* the ``tf.function`` (Keras' ``fit`` does this), or inside a
      ``tf.Graph``, with or without ``jit_compile``: **no**, the tape looks gradients up by op
      type. This raises ``RuntimeError`` when such an op is built; ops built under
      ``tape.stop_recording()`` are not recorded, so they are fine for ``tf.gradients``;
    * eager ops: **no**, so this raises ``RuntimeError`` on entering the block.

    For tapes, use :func:`gradlab.map_gradient` or ``tf.custom_gradient``.

    Every mapped op type must be built inside the block (in the graph, or in a ``tf.cond`` or
    loop body nested in it): an entry that matches no op, such as ``{"Cast": "Identity"}`` around
    ``tf.sign`` (which builds a ``Sign`` op), raises ``ValueError`` when the block ends, listing
    the op types it did build. A block that raises is not checked. The tape check and this count
    rely on private TensorFlow APIs (op callbacks and the tape set); if a future TensorFlow moves
    them, both are skipped: a recording tape and an unmatched entry are again silently ignored.

    Args:
      mapping: op type (``"Identity"``, ``"Relu"``...) -> registered name or gradient function.

    Yields:
      The resolved ``{op type: registered name}`` mapping.

    Raises:
      RuntimeError: in eager mode, where TensorFlow silently ignores override maps (build the ops
        inside a ``tf.function`` or a ``tf.Graph`` instead); or when an op of a mapped type is
        built while a tape records it, which ignores override maps too.
      TypeError: if ``mapping`` is not a mapping, or a value is neither a string nor callable.
      ValueError: if a key is not an op type (for instance ``"relu"``), or a name is not registered
        (when TensorFlow's private registry cannot be read, a name is accepted unchecked); when
        the block ends, if no op of a mapped type was built inside it.

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
            if gradient not in _REGISTERED and _registry_state(gradient) == _FREE:
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
    graph = tf.compat.v1.get_default_graph()
    with _watch_ops(graph, resolved) as built, graph.gradient_override_map(resolved):
        yield resolved
    _check_all_built(resolved, built)
