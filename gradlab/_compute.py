"""The TensorFlow computations behind :mod:`gradlab.plots` and :mod:`gradlab.widgets` (private).

One core computes what both draw: the forward values of elementwise functions on a 1-D grid and
their gradients, as the functions' own backward passes define them::

    values:    y_i = f(x_i; params)
    gradient:  g_i = d sum(y) / d x_i          (None, i.e. no path to x, becomes 0)

:func:`curves` is that computation, run as it is (eagerly) by :func:`gradlab.plots.values_and_gradients`.
:class:`CompiledCurves` runs the same function in one ``tf.function`` per choice of non-numeric
parameters, with the numeric ones passed as tensors, so that an explorer's slider calls the same
concrete graph again instead of retracing. :func:`layer_gradient_norms` is the other computation the
plots need. Importing this module imports neither matplotlib nor ipywidgets.
"""
from __future__ import annotations

import functools
import math
import numbers
from typing import Any, Callable, Mapping, Sequence

import numpy as np
import tensorflow as tf

from gradlab import _validation as v

#: The default grid: 401 points on [-3, 3] (float32), fine enough for smooth curves and kinks.
DEFAULT_X = np.linspace(-3.0, 3.0, 401, dtype=np.float32)

GridFn = Callable[..., tf.Tensor]


def grid(x, name: str = "x") -> tf.Tensor:
    """``x`` as a 1-D floating-point tensor of at least 2 finite points (``DEFAULT_X`` if None).

    Example:
      >>> from gradlab._compute import grid
      >>> grid([0.0, 1.0]).numpy()
      array([0., 1.], dtype=float32)
    """
    if x is None:
        return tf.constant(DEFAULT_X)
    tensor = v.as_float_tensor(x, name)
    if tensor.shape.rank != 1 or tensor.shape[0] < 2:
        raise ValueError(
            f"{name} must be a 1-D grid of at least 2 points, e.g. np.linspace(-3, 3, 401); "
            f"got shape {tensor.shape}."
        )
    if not bool(tf.reduce_all(tf.math.is_finite(tensor))):
        raise ValueError(f"{name} must hold finite values only; it contains inf or nan.")
    return tensor


def curves(functions: Mapping[str, GridFn], x: tf.Tensor, params: Mapping[str, Any]) -> dict:
    """``{label: (values, gradient)}`` of each ``fn(x, **params)`` on the grid ``x``, one tape.

    Args:
      functions: ``{label: fn}``; ``label`` names ``fn`` in error messages, e.g. ``"fn"``.
      x: the grid, a 1-D float tensor (from :func:`grid`).
      params: keyword arguments passed to every function.

    Returns:
      ``{label: (values, gradient)}``, two tensors of ``x``'s shape and dtype each.

    Raises:
      TypeError: if a function's output is not floating-point.
      ValueError: if a function's output does not have ``x``'s shape (it is not elementwise).

    Example:
      >>> import tensorflow as tf
      >>> from gradlab._compute import curves
      >>> y, g = curves({"fn": lambda t, k: k * t * t}, tf.constant([1.0, 2.0]), {"k": 3.0})["fn"]
      >>> y.numpy().tolist(), g.numpy().tolist()
      ([3.0, 12.0], [6.0, 12.0])
    """
    with tf.GradientTape(persistent=True) as tape:
        tape.watch(x)
        outputs = {label: fn(x, **params) for label, fn in functions.items()}
    result = {}
    for label, value in outputs.items():
        value = v.as_float_tensor(value, f"{label}(x)")
        if value.shape != x.shape:
            raise ValueError(
                f"{label} must be elementwise and return x's shape {x.shape}; {label}(x) has "
                f"shape {value.shape}."
            )
        gradient = tape.gradient(value, x)
        gradient = tf.zeros_like(x) if gradient is None else tf.cast(gradient, x.dtype)
        result[label] = (tf.cast(value, x.dtype), gradient)
    return result


def is_numeric(value: Any) -> bool:
    """Whether a parameter value is passed as a tensor: a number, or a tuple/list of numbers."""
    def number(item):
        return isinstance(item, numbers.Real) and not isinstance(item, (bool, np.bool_))

    if number(value):
        return True
    return isinstance(value, (tuple, list)) and len(value) > 0 and all(map(number, value))


def _freeze(static: Mapping[str, Any]) -> tuple:
    """A cache key for the non-numeric parameter values (unhashable ones by identity)."""
    items = []
    for name, value in sorted(static.items()):
        try:
            hash(value)
        except TypeError:
            value = ("id", id(value))
        items.append((name, value))
    return tuple(items)


class CompiledCurves:
    """:func:`curves` on a fixed grid, compiled once per choice of the non-numeric parameters.

    Numeric parameters (numbers, ``(low, high)`` pairs) reach the functions as float tensors of the
    grid's dtype, so new values call the same concrete graph; other values (a function chosen in a
    dropdown) are part of the cache key and are traced once each.

    Example:
      >>> import tensorflow as tf
      >>> from gradlab._compute import CompiledCurves
      >>> square = CompiledCurves({"fn": lambda t, k: k * t * t}, tf.constant([1.0, 2.0]))
      >>> square({"k": 3.0})["fn"][1].tolist(), square({"k": 0.5})["fn"][1].tolist()
      ([6.0, 12.0], [1.0, 2.0])
      >>> square.tracing_count()
      1
    """

    def __init__(self, functions: Mapping[str, GridFn], x: tf.Tensor):
        self._functions = dict(functions)
        self._x = x
        self._compiled: dict[tuple, Any] = {}

    def __call__(self, params: Mapping[str, Any]) -> dict[str, tuple[np.ndarray, np.ndarray]]:
        """``{label: (values, gradient)}`` as NumPy arrays for one setting of the parameters."""
        return self.run(*self.split(params))

    def run(self, tensors: Mapping[str, tf.Tensor], static: Mapping[str, Any]) -> dict:
        """As calling it, with the parameters already split by :meth:`split`."""
        result = self._compiled_for(static)(tensors)
        return {label: (values.numpy(), gradient.numpy()) for label, (values, gradient) in result.items()}

    def split(self, params: Mapping[str, Any]) -> tuple[dict, dict]:
        """``(numeric parameters as tensors of the grid's dtype, the other parameters)``."""
        tensors = {k: tf.constant(val, self._x.dtype) for k, val in params.items() if is_numeric(val)}
        return tensors, {k: val for k, val in params.items() if k not in tensors}

    def tracing_count(self) -> int:
        """How many times TensorFlow traced the functions (one per non-numeric choice)."""
        return sum(f.experimental_get_tracing_count() for f in self._compiled.values())

    def compiled_count(self) -> int:
        """How many ``tf.function`` s exist (one per non-numeric choice seen so far)."""
        return len(self._compiled)

    def _compiled_for(self, static: Mapping[str, Any]):
        key = _freeze(static)
        compiled = self._compiled.get(key)
        if compiled is None:
            # A partial, not a closure: TensorFlow's "frequent retracing" warning groups functions
            # by their code object, and these are distinct functions traced once each.
            evaluate = functools.partial(self._evaluate, static=dict(static))
            compiled = tf.function(evaluate, autograph=False, reduce_retracing=True)
            self._compiled[key] = compiled
        return compiled

    def _evaluate(self, tensors, static):
        return curves(self._functions, self._x, {**static, **tensors})


def _group_name(variable) -> str:
    path = getattr(variable, "path", None)  # Keras 3: "dense/kernel", "sequential/dense/kernel"
    if not isinstance(path, str):
        path = getattr(variable, "name", None)
    if not isinstance(path, str) or not path:
        raise TypeError(
            f"variables must be Keras or TensorFlow variables with a path or name; got "
            f"{v.describe(variable)}."
        )
    path = path.split(":")[0]
    return path.rsplit("/", 1)[0] if "/" in path else path


def squared_norm(gradient) -> float:
    """The squared L2 norm of one gradient, in float64; an ``IndexedSlices`` counts as its dense sum.

    ::

        squared_norm(g) = sum(dense(g) ** 2),    dense(g)[i] = sum of the slices with index i

    A ``tf.IndexedSlices`` (the gradient of an ``Embedding`` table, of ``tf.gather``) holds one
    slice per lookup, and a row read twice holds two: its dense value is their *sum*. Squaring each
    slice instead (what ``tf.linalg.global_norm`` and ``tf.clip_by_global_norm`` do) gives
    ``a**2 + b**2`` for a row whose gradient is ``a + b``. The repeated rows are summed first here
    (``tf.unique`` and ``tf.math.unsorted_segment_sum``: the rows read, never the whole table), in
    float64 so that half-precision or large gradients do not overflow.

    Example:
      >>> import tensorflow as tf
      >>> from gradlab._compute import squared_norm
      >>> rows = tf.IndexedSlices(tf.constant([[1.0], [2.0]]), tf.constant([0, 0]), [3, 1])
      >>> squared_norm(rows)    # row 0 receives 1 + 2 = 3 (not 1**2 + 2**2 = 5)
      9.0
    """
    if isinstance(gradient, tf.IndexedSlices):
        rows, position = tf.unique(gradient.indices)
        values = tf.math.unsorted_segment_sum(
            tf.cast(gradient.values, tf.float64), position, tf.size(rows))
    else:
        values = tf.cast(tf.convert_to_tensor(gradient), tf.float64)
    return float(tf.reduce_sum(tf.square(values)))


def layer_gradient_norms(gradients: Sequence, variables: Sequence) -> dict[str, float]:
    """The L2 norm of the gradient of each layer's variables, in order of first appearance.

    ::

        norm(layer) = sqrt(sum over the layer's variables v of sum(dense(grad_v) ** 2))

    Variables are grouped by their path without the last component (Keras 3 ``variable.path``,
    e.g. ``"dense_1/kernel"`` and ``"dense_1/bias"`` form ``"dense_1"``). A ``None`` gradient
    (no path from the loss to that variable) counts as zero. A ``tf.IndexedSlices`` gradient (an
    ``Embedding`` table) counts as its dense value, whose row read several times is the *sum* of
    its slices, so the norm is the dense gradient's (``tf.linalg.global_norm`` squares each slice
    instead and is wrong when a row repeats). Computed in float64.

    Args:
      gradients: what ``tape.gradient(loss, variables)`` returned, aligned with ``variables``:
        tensors, ``tf.IndexedSlices`` or ``None``.
      variables: the variables, e.g. ``model.trainable_variables``.

    Returns:
      ``{layer name: norm}`` as Python floats, ready for :func:`gradlab.plots.gradient_norm_bars`.

    Raises:
      ValueError: if the two sequences differ in length.
      TypeError: if a variable has neither a path nor a name.

    Example:
      >>> import tensorflow as tf, gradlab.plots
      >>> w = tf.Variable([3.0, 4.0], name="dense/kernel")
      >>> b = tf.Variable([0.0], name="dense/bias")
      >>> gradlab.plots.layer_gradient_norms([tf.constant([3.0, 4.0]), None], [w, b])
      {'dense': 5.0}

      A table row looked up twice receives the sum of two slices (here 1 + 2 = 3, not 1 and 2):

      >>> table = tf.Variable(tf.zeros([3, 1]), name="embedding/embeddings")
      >>> slices = tf.IndexedSlices(tf.constant([[1.0], [2.0]]), tf.constant([0, 0]), [3, 1])
      >>> gradlab.plots.layer_gradient_norms([slices], [table])
      {'embedding': 3.0}
    """
    gradients, variables = list(gradients), list(variables)
    if len(gradients) != len(variables):
        raise ValueError(
            f"gradients and variables must be aligned (as zip(tape.gradient(loss, vars), vars)); "
            f"got {len(gradients)} gradients for {len(variables)} variables."
        )
    groups: dict[str, float] = {}
    for gradient, variable in zip(gradients, variables):
        name = _group_name(variable)
        groups[name] = groups.get(name, 0.0) + (0.0 if gradient is None else squared_norm(gradient))
    return {name: math.sqrt(total) for name, total in groups.items()}


def finite_or_nan(values) -> np.ndarray:
    """Values to draw: inf and -inf become nan (a gap) instead of a line off to infinity.

    Example:
      >>> import numpy as np
      >>> from gradlab._compute import finite_or_nan
      >>> finite_or_nan(np.array([1.0, np.inf])).tolist()
      [1.0, nan]
    """
    values = np.asarray(values)
    return np.where(np.isfinite(values), values, np.nan)
