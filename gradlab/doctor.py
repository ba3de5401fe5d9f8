"""``explain_gradient``: why a gradient is None, NaN or zero, which op did it, and on which line.

:func:`explain_gradient` runs in two passes. The cheap one is one ``tf.GradientTape`` gradient of
``fn(*sources)`` with respect to every source (what you would compute yourself), and gives each
source a status: ``"ok"``, ``"none"``, ``"nonfinite"`` or ``"zero"``. Only the sources that are not
``ok`` pay for the second pass: ``fn`` is traced into a graph (``tf.function``), the ops on the paths
from each source to the output are walked, and ``tf.gradients`` computes, inside that graph, the
gradient reaching every tensor on those paths and every op's own backward step. The op where the
gradient stops (``None``), turns non-finite or becomes all zeros is the culprit; its traceback gives
the line of your code that built it.
"""
from __future__ import annotations

import collections.abc
import dataclasses
import functools
import importlib.util
import linecache
import os
import re
import sys
import sysconfig
import traceback
from typing import Any, Callable, Dict, Iterator, List, Optional, Sequence, Tuple

import tensorflow as tf
from tensorflow.python.framework import ops as tf_ops

from gradlab import _validation as v
from gradlab._compat import functions_traced_inline

__all__ = ["explain_gradient", "GradientReport", "GradientDiagnosis"]

#: The statuses of a source's gradient, in the order of the checks.
STATUSES = ("ok", "none", "nonfinite", "zero")

# --- the workbook's answers -----------------------------------------------------------------------

_NB02 = "notebook 02 (02_stop_gradient_straight_through.ipynb)"
_NB13 = "notebook 13 (13_recipes.ipynb)"
_STE = (
    f"use a straight-through estimator: the forward value of the op, the gradient of the identity, "
    f"x + tf.stop_gradient(tf.round(x) - x) or gradlab.straight_through(tf.round(x), x) ({_NB02}, sections 3-4)"
)
_NONE_VS_ZERO = f"{_NB02}, section 2, tells a None gradient from a zero one"

#: Ops that round or jump, so their gradient is None (or, for TruncateMod, not registered), with their public names.
_ROUNDING = {"Round": "tf.round", "Floor": "tf.math.floor", "Ceil": "tf.math.ceil", "Rint": "tf.math.rint",
             "FloorDiv": "tf.math.floordiv", "FloorMod": "tf.math.floormod", "TruncateDiv": "tf.truncatediv",
             "TruncateMod": "tf.truncatemod"}
#: Ops that run Python: ``tf.numpy_function`` (PyFunc) and ``tf.py_function`` (EagerPyFunc).
_PYTHON = {"PyFunc", "PyFuncStateless", "EagerPyFunc"}
#: Comparisons and logical ops: they return booleans.
_COMPARISONS = {"Greater", "GreaterEqual", "Less", "LessEqual", "Equal", "NotEqual", "IsNan", "IsInf",
                "IsFinite", "LogicalAnd", "LogicalOr", "LogicalNot"}
#: Where a nonfinite gradient comes from: the op's derivative and where it is infinite.
_SINGULAR = {
    "Sqrt": "the derivative of sqrt(u), 1/(2 sqrt(u)), is infinite at u = 0",
    "Rsqrt": "the derivative of 1/sqrt(u), -1/(2 u^1.5), is infinite at u = 0",
    "Log": "the derivative of log(u), 1/u, is infinite at u = 0 (and log of a negative number is NaN)",
    "Log1p": "the derivative of log(1 + u), 1/(1 + u), is infinite at u = -1",
    "Pow": "the derivative of u^p, p u^(p-1), is infinite at u = 0 when p < 1",
    "RealDiv": "the derivative of u / w with respect to w, -u/w^2, is infinite at w = 0",
    "Div": "the derivative of u / w with respect to w, -u/w^2, is infinite at w = 0",
    "Reciprocal": "the derivative of 1/u, -1/u^2, is infinite at u = 0",
    "Inv": "the derivative of 1/u, -1/u^2, is infinite at u = 0",
    "Acos": "the derivative of acos(u) is infinite at u = -1 and 1",
    "Asin": "the derivative of asin(u) is infinite at u = -1 and 1",
    "Atanh": "the derivative of atanh(u) is infinite at u = -1 and 1",
    "Exp": "the derivative of exp(u) is exp(u) itself, which overflows to inf for large u",
}


# --- the report -------------------------------------------------------------------------------------


@dataclasses.dataclass(frozen=True)
class GradientDiagnosis:
    """What :func:`explain_gradient` found for one source: the status, the op, the line, why, what to do.

    Attributes:
      source: the source as the report shows it, e.g. ``"sources[0]: tensor float32 (3,)"``.
      status: ``"ok"`` (finite and not all zero), ``"none"`` (no gradient reaches the source),
        ``"nonfinite"`` (some element is inf or NaN) or ``"zero"`` (every element exactly zero).
      op_type: the TensorFlow op type that cut, broke or zeroed the gradient (``"Round"``,
        ``"StopGradient"``, ``"Sqrt"``, ``"Relu"``...), else None.
      where: ``"file:line"`` of your own code that built that op (or, for a value that left
        TensorFlow, the line that took it out), else None. For a notebook cell, whose file is the
        kernel's temporary one, the report shows the line number in the cell and its code instead.
      reason: one sentence: why.
      fix: what to do, and the workbook section that teaches it.
      op_name: the op's name in the traced graph (it carries the Keras layer's name), else None.
      gradient: the gradient ``tape.gradient`` returned for this source (a tensor, a
        ``tf.IndexedSlices`` or None).

    Example:
      >>> import tensorflow as tf, gradlab
      >>> entry = gradlab.explain_gradient(lambda x: tf.stop_gradient(x) * 2.0, tf.constant(1.0))[0]
      >>> entry.status, entry.op_type
      ('none', 'StopGradient')
      >>> "stop_gradient" in entry.fix
      True
    """

    source: str
    status: str
    op_type: Optional[str]
    where: Optional[str]
    reason: str
    fix: str
    op_name: Optional[str] = None
    gradient: Any = dataclasses.field(default=None, repr=False, compare=False)

    def __str__(self) -> str:
        head = f"{self.source}: {self.status}"
        if self.op_type is not None:
            head += f", {self.op_type}"
            if self.op_name is not None:
                head += f" ({self.op_name})"
        if self.where is not None:
            head += f" at {_notebook_where(self.where) or self.where}"
        lines = [head, f"    why: {self.reason}"]
        if self.status != "ok":
            lines.append(f"    fix: {self.fix}")
        return "\n".join(lines)


class GradientReport(collections.abc.Sequence):
    """The result of :func:`explain_gradient`: one :class:`GradientDiagnosis` per source, in order.

    ``len(report)`` is the number of sources and ``report[i]`` the diagnosis of ``sources[i]``;
    ``report.statuses`` lists their statuses and ``report.ok`` is True when every one is ``"ok"``.
    ``str(report)`` reads as a whole; in a notebook the report shows as a table.

    Example:
      >>> import tensorflow as tf, gradlab
      >>> x, w = tf.constant([1.0, 2.0]), tf.Variable(3.0)
      >>> report = gradlab.explain_gradient(lambda x, w: tf.round(x) * w, x, w)
      >>> len(report), report.statuses, report.ok
      (2, ('none', 'ok'), False)
      >>> print(report)  # doctest: +ELLIPSIS
      Gradient report: 1 of 2 sources ok
      sources[0]: tensor float32 (2,): none, Round (Round) at <doctest ...>:1
          why: tf.round is piecewise constant: its registered gradient returns None ...
          fix: ...
      sources[1]: tf.Variable 'Variable:0' float32 (): ok
          why: a finite gradient, not all zero, reaches this source.
    """

    def __init__(self, diagnoses: Sequence[GradientDiagnosis]):
        self._entries = tuple(diagnoses)

    def __getitem__(self, index):
        return self._entries[index]

    def __len__(self) -> int:
        return len(self._entries)

    def __iter__(self) -> Iterator[GradientDiagnosis]:
        return iter(self._entries)

    @property
    def statuses(self) -> Tuple[str, ...]:
        """The status of each source, in order."""
        return tuple(entry.status for entry in self._entries)

    @property
    def ok(self) -> bool:
        """Whether every source's status is ``"ok"``."""
        return all(status == "ok" for status in self.statuses)

    def __bool__(self) -> bool:
        return len(self._entries) > 0

    def __str__(self) -> str:
        n_ok = sum(status == "ok" for status in self.statuses)
        lines = [f"Gradient report: {n_ok} of {len(self)} sources ok"]
        lines += [str(entry) for entry in self._entries]
        return "\n".join(lines)

    __repr__ = __str__

    def _repr_html_(self) -> str:
        import html  # here, not at import: `import gradlab` loads no module TensorFlow does not
        rows = []
        for entry in self._entries:
            op = "" if entry.op_type is None else f"<code>{html.escape(entry.op_type)}</code>"
            where = "" if entry.where is None else html.escape(_short_where(entry.where))
            fix = "" if entry.status == "ok" else html.escape(entry.fix)
            cells = [html.escape(entry.source), f"<b>{entry.status}</b>", op, where, html.escape(entry.reason), fix]
            rows.append("<tr>" + "".join(f'<td style="text-align:left">{c}</td>' for c in cells) + "</tr>")
        head = "".join(f'<th style="text-align:left">{h}</th>' for h in ("source", "status", "op", "where", "why", "fix"))
        return f"<table><thead><tr>{head}</tr></thead><tbody>{''.join(rows)}</tbody></table>"


def _notebook_where(where: str) -> Optional[str]:
    """A notebook cell's line as the report shows it, ``line 3 of a notebook cell: q = tf.round(x)``, else None.

    A Jupyter kernel compiles each cell into a file of its own temporary folder (``ipykernel_<pid>``),
    a machine path that changes from run to run: the report shows the line's code instead.
    """
    path, _, line = where.rpartition(":")
    if not os.path.basename(os.path.dirname(path)).startswith("ipykernel_"):
        return None
    code = linecache.getline(path, int(line)) if line.isdigit() else ""
    code = " ".join(re.split(r"\s{2,}#|^\s*#", code)[0].split())  # without an inline comment
    if len(code) > 70:
        code = code[:67] + "..."
    return f"line {line} of a notebook cell" + (f": {code}" if code else "")


def _short_where(where: str) -> str:
    """``file:line`` for a table: the file's base name, or a notebook cell's line and code."""
    path, _, line = where.rpartition(":")
    return _notebook_where(where) or f"{os.path.basename(path)}:{line}"


# --- the arguments --------------------------------------------------------------------------------


@dataclasses.dataclass
class _Source:
    index: int
    arg: Any  # what fn receives: the caller's tensor or variable, or the converted array
    label: str
    dtype: tf.DType
    variable: Optional[tf.Variable]  # the tf.Variable behind a variable source
    differentiable: bool
    note: str = ""

    @property
    def watched(self):
        return self.variable if self.variable is not None else self.arg


def _check_fn(fn: Any) -> None:
    if not callable(fn):
        raise TypeError(
            f"fn must be a callable (a Python function, a tf.function, or a Keras model or layer) that "
            f"takes the sources and returns a tensor; got {v.describe(fn)}. Pass e.g. lambda x: tf.reduce_sum(x ** 2)."
        )


def _prepare_source(value: Any, index: int) -> _Source:
    """Checks one source and says how to watch it: tensors, tf.Variables, Keras variables, arrays."""
    name = f"sources[{index}]"
    if v.is_variable(value):
        variable = value if isinstance(value, tf.Variable) else getattr(value, "value", None)
        if not isinstance(variable, tf.Variable):
            raise TypeError(f"{name} is a Keras variable whose .value is not a tf.Variable ({v.describe(variable)}); "
                            "explain_gradient needs Keras's TensorFlow backend (KERAS_BACKEND=tensorflow).")
        dtype = tf.as_dtype(variable.dtype).base_dtype
        kind = "tf.Variable" if isinstance(value, tf.Variable) else "Keras variable"
        label = f"{name}: {kind} {getattr(value, 'path', None) or value.name!r} {dtype.name} {tuple(variable.shape)}"
        note = ""
        if not getattr(value, "trainable", True):
            note = (" Note: the variable is not trainable, so a GradientTape does not watch it by itself: "
                    "call tape.watch(variable.value) for a Keras variable, tape.watch(variable) for a tf.Variable.")
        return _Source(index, value, label, dtype, variable, dtype.is_floating or dtype.is_complex, note)
    if isinstance(value, (tf.RaggedTensor, tf.SparseTensor, tf.IndexedSlices)):
        raise TypeError(f"{name} is a {type(value).__name__}; explain_gradient takes dense tensors, variables and arrays. "
                        f"Pass its values (e.g. {name}.values) and rebuild it inside fn.")
    keras_tensor = getattr(sys.modules.get("keras"), "KerasTensor", None)
    if isinstance(keras_tensor, type) and isinstance(value, keras_tensor):
        raise TypeError(f"{name} is a KerasTensor, a symbolic input of a functional model; pass a real tensor "
                        "(e.g. tf.ones([1, 4])) and call the model on it inside fn.")
    if isinstance(value, tf.Tensor) and not hasattr(value, "numpy"):
        raise TypeError(f"{name} is a symbolic tensor ({v.describe(value)}): explain_gradient runs eagerly; "
                        "call it outside tf.function, on eager tensors.")
    if value is None or isinstance(value, (str, bytes, dict)) or callable(value):
        raise TypeError(f"{name} must be a tensor, a tf.Variable, a Keras variable or an array of numbers; "
                        f"got {v.describe(value)}.")
    if not isinstance(value, tf.Tensor):
        try:
            value = tf.convert_to_tensor(value)
        except (TypeError, ValueError) as err:
            raise TypeError(f"{name} must be a tensor, a tf.Variable, a Keras variable or an array of numbers; got "
                            f"{v.describe(value)}, which TensorFlow cannot convert ({err}).") from None
    dtype = value.dtype
    label = f"{name}: tensor {dtype.name} {tuple(value.shape)}"
    return _Source(index, value, label, dtype, None, dtype.is_floating or dtype.is_complex)


def _output_leaves(out: Any) -> List[tf.Tensor]:
    """The tensors of ``fn``'s output (a tensor or a nest of them), or a TypeError saying what to return."""
    if out is None:
        raise TypeError("fn returned None; it must return the tensor to differentiate (a loss, a model's output...).")
    leaves = tf.nest.flatten(out)
    if not leaves:
        raise ValueError(f"fn returned an empty structure ({v.describe(out)}); return the tensor to differentiate.")
    tensors = []
    for leaf in leaves:
        if isinstance(leaf, tf.RaggedTensor):
            leaf = leaf.flat_values
        if v.is_variable(leaf):
            leaf = tf.convert_to_tensor(leaf)
        if not isinstance(leaf, tf.Tensor):
            left = " It left TensorFlow: keep the computation in TensorFlow ops (no .numpy(), float() or NumPy calls)." \
                if hasattr(leaf, "dtype") or isinstance(leaf, (int, float, complex)) else ""
            raise TypeError(f"fn must return a tensor or a nest (tuple, list, dict) of tensors; its output holds "
                            f"{v.describe(leaf)}.{left}")
        tensors.append(leaf)
    return tensors


def _is_float(tensor) -> bool:
    dtype = tf.as_dtype(tensor.dtype)
    return dtype.is_floating or dtype.is_complex


# --- where: the user's line -----------------------------------------------------------------------


@functools.lru_cache(maxsize=None)
def _library_dirs() -> Tuple[str, ...]:
    """The folders whose frames are not the user's: TensorFlow, Keras, gradlab, the standard library."""
    dirs = []
    for package in ("tensorflow", "keras", "tf_keras", "gradlab", "optree", "absl", "numpy"):
        spec = importlib.util.find_spec(package)
        if spec is not None and spec.submodule_search_locations:
            dirs += [os.path.realpath(p) for p in spec.submodule_search_locations]
    stdlib = sysconfig.get_paths().get("stdlib")
    if stdlib:
        dirs.append(os.path.realpath(stdlib))
    return tuple(d + os.sep for d in dirs)


@functools.lru_cache(maxsize=4096)
def _is_user_file(filename: str) -> bool:
    if filename.startswith("<frozen") or "__autograph_generated_file" in filename:
        return False
    if filename.startswith("<"):
        return True  # a doctest, an interactive prompt
    return not os.path.realpath(filename).startswith(_library_dirs())


def _user_line(frames: Sequence[Tuple[str, int]]) -> Optional[str]:
    """The innermost user frame of ``(filename, lineno)`` pairs (outermost first), as ``file:line``."""
    for filename, lineno in reversed(frames):
        if _is_user_file(filename):
            return f"{filename}:{lineno}"
    return None


def _op_where(op: tf.Operation) -> Optional[str]:
    """Where your code built ``op``: its traceback inside fn, without TensorFlow's, Keras's and gradlab's frames."""
    try:
        frames = [(frame.filename, frame.lineno) for frame in op.traceback]
    except (AttributeError, TypeError):
        return None
    # Only the frames inside fn: after the trace wrapper of this module.
    inner = [k for k, (filename, _) in enumerate(frames) if os.path.realpath(filename) == os.path.realpath(__file__)]
    if inner:
        frames = frames[inner[-1] + 1:]
    return _user_line(frames)


def _error_where(error: BaseException) -> Optional[str]:
    frames = [(frame.filename, frame.lineno) for frame in traceback.extract_tb(error.__traceback__)]
    return _user_line(frames)


def _left_tensorflow(error: BaseException) -> bool:
    """Whether ``error`` is what TensorFlow raises when a traced tensor meets NumPy or Python numbers."""
    text = str(error)
    return (isinstance(error, (AttributeError, NotImplementedError, TypeError))
            and ("SymbolicTensor" in text or "symbolic tf.Tensor" in text or "symbolic Tensor" in text
                 or (isinstance(error, AttributeError) and "numpy" in text)))


# --- the cheap pass: one tape gradient ---------------------------------------------------------------


def _flags(gradient) -> tf.Tensor:
    """``[all finite, all exactly zero]`` of one gradient (the values of a ``tf.IndexedSlices``)."""
    values = gradient.values if isinstance(gradient, tf.IndexedSlices) else gradient
    if values.dtype.is_complex:
        parts = [tf.math.real(values), tf.math.imag(values)]
    else:
        parts = [values]
    finite = tf.reduce_all([tf.reduce_all(tf.math.is_finite(p)) for p in parts])
    zero = tf.reduce_all([tf.reduce_all(tf.equal(p, 0)) for p in parts])
    return tf.stack([finite, zero])


def _status(gradient, flags) -> str:
    if gradient is None:
        return "none"
    finite, zero = (bool(f) for f in flags)
    if not finite:
        return "nonfinite"
    return "zero" if zero else "ok"


# --- the graph pass: trace fn and walk its ops ----------------------------------------------------


def _registered(op: tf.Operation) -> bool:
    """Whether TensorFlow has a gradient function for ``op`` (``tf.no_gradient`` ops map to None)."""
    try:
        return tf_ops.get_gradient_function(op) is not None
    except LookupError:
        return False


def _carries(tensor: tf.Tensor) -> bool:
    """Whether a gradient can flow through ``tensor``: a floating, complex or resource (variable) dtype."""
    dtype = tensor.dtype
    return dtype.is_floating or dtype.is_complex or dtype == tf.resource


class _Walk:
    """The paths from each source's graph tensors to the outputs, and the gradients along them.

    Built inside the trace: ``flags()`` returns the tensor of ``[finite, zero]`` pairs the traced
    function computes; after it ran, ``explain(index, status, values)`` names the op.
    """

    def __init__(self, graph, ys: List[tf.Tensor], sources: Dict[int, List[tf.Tensor]]):
        self.graph = graph
        self.ys = ys
        self.order = {op.name: k for k, op in enumerate(graph.get_operations())}
        ancestors = set()
        stack = list(ys)
        while stack:
            tensor = stack.pop()
            if tensor.ref() in ancestors:
                continue
            ancestors.add(tensor.ref())
            stack.extend(tensor.op.inputs)
        self.paths: Dict[int, Dict[Any, tf.Tensor]] = {}
        for index, starts in sources.items():
            path: Dict[Any, tf.Tensor] = {}
            stack = [t for t in starts if t.ref() in ancestors]
            while stack:
                tensor = stack.pop()
                if tensor.ref() in path or tensor.ref() not in ancestors:
                    continue
                path[tensor.ref()] = tensor
                for consumer in tensor.consumers():
                    stack.extend(consumer.outputs)
            self.paths[index] = path
        self.starts = {index: {t.ref() for t in starts} for index, starts in sources.items()}
        tensors: Dict[Any, tf.Tensor] = {}
        for path in self.paths.values():
            tensors.update(path)
        self.tensors = tensors
        starts_all = self._all_starts()
        self.ops = sorted({t.op for t in tensors.values() if t.ref() not in starts_all},
                          key=lambda op: -self.order.get(op.name, -1))
        self.total: Dict[Any, Any] = {}
        self.local: Dict[Tuple[str, Any], Any] = {}

    def _all_starts(self):
        return set().union(*self.starts.values()) if self.starts else set()

    def _path_inputs(self, op, path=None):
        path = self.tensors if path is None else path
        return [t for t in op.inputs if t.ref() in path]

    def _path_outputs(self, op, path=None):
        path = self.tensors if path is None else path
        return [t for t in op.outputs if t.ref() in path]

    def gradients(self) -> None:
        """The total gradient reaching each path tensor, and each op's own backward step (static)."""
        xs = [t for t in self.tensors.values() if _carries(t)]
        # Ops without a registered gradient are constants to tf.gradients (no LookupError).
        stops = [t for op in self.ops if not _registered(op) for t in op.outputs]
        grads = tf.gradients(self.ys, xs, stop_gradients=stops, unconnected_gradients="none") if xs else []
        self.total = {x.ref(): g for x, g in zip(xs, grads)}
        for op in self.ops:
            inputs = [t for t in self._path_inputs(op) if _carries(t)]
            outputs = self._path_outputs(op)
            upstream = [self.total.get(t.ref()) for t in outputs]
            if not inputs or not _registered(op) or all(g is None for g in upstream):
                continue
            upstream = [tf.zeros_like(t) if g is None else tf.convert_to_tensor(g) for t, g in zip(outputs, upstream)]
            try:
                local = tf.gradients(outputs, inputs, grad_ys=upstream, unconnected_gradients="none")
            except (LookupError, ValueError, TypeError):
                continue
            for t, g in zip(inputs, local):
                self.local[(op.name, t.ref())] = g

    def flags(self) -> Tuple[tf.Tensor, List[Any]]:
        """One ``[finite, zero]`` row per gradient computed, and the key of each row."""
        keys, rows = [], []
        for key, g in list(self.total.items()) + list(self.local.items()):
            if g is not None:
                keys.append(key)
                rows.append(_flags(g))
        return (tf.stack(rows) if rows else tf.zeros([0, 2], tf.bool)), keys

    # -- after the run -----------------------------------------------------------------------------

    def culprit(self, index: int, status: str, values: Dict[Any, Tuple[bool, bool]]) -> Optional[tf.Operation]:
        """The op nearest the output where the gradient stops, turns non-finite or becomes all zero."""
        path = self.paths.get(index, {})
        for op in self.ops:
            outputs = self._path_outputs(op, path)
            inputs = self._path_inputs(op, path)
            if not outputs or not inputs:
                continue
            upstream = [self.total.get(t.ref()) for t in outputs]
            local = [self.local.get((op.name, t.ref())) for t in inputs]
            if status == "none":
                if any(g is not None for g in upstream) and all(g is None for g in local):
                    return self._int_origin(op, path)
            elif status == "nonfinite":
                if any(g is None for g in upstream) or not all(values[t.ref()][0] for t in outputs):
                    continue
                if any(g is not None and not values[(op.name, t.ref())][0] for t, g in zip(inputs, local)):
                    return op
            elif status == "zero":
                alive = [t for t, g in zip(outputs, upstream) if g is not None and not values[t.ref()][1]]
                given = [(t, g) for t, g in zip(inputs, local) if g is not None]
                if alive and given and all(values[(op.name, t.ref())][1] for t, _ in given):
                    return op
        return None

    def _int_origin(self, op, path) -> tf.Operation:
        """From an op whose path inputs are integers (or booleans, datasets): the op that made them."""
        starts = self._all_starts()
        frontier = [op]
        seen = set()
        while frontier:
            current = frontier.pop(0)
            if current.name in seen:
                continue
            seen.add(current.name)
            inputs = self._path_inputs(current, path)
            if any(_carries(t) for t in inputs):
                return current
            frontier += [t.op for t in inputs if t.ref() not in starts]
        return op


def _unwrap(fn: Callable) -> Callable:
    """A ``tf.function``'s Python function, so that its ops land in the traced graph itself."""
    python_function = getattr(fn, "python_function", None)
    return python_function if callable(python_function) else fn


def _trace(fn: Callable, sources: List[_Source], todo: Dict[int, str]):
    """Traces ``fn`` once, walking the paths of the sources in ``todo``; returns the walk and its flags."""
    python_fn = _unwrap(fn)
    tensor_sources = [s for s in sources if s.variable is None]
    specs = [tf.TensorSpec(s.arg.shape, s.arg.dtype) for s in tensor_sources]
    state: Dict[str, Any] = {}

    def traced(*placeholders):  # the frames after this one in an op's traceback are inside fn
        graph = tf.compat.v1.get_default_graph()
        given = dict(zip((s.index for s in tensor_sources), placeholders))
        args = [given.get(s.index, s.arg) for s in sources]
        out = python_fn(*args)
        leaves = _output_leaves(out)
        ys = [t if _is_float(t) else tf.cast(t, tf.float32) for t in leaves if t.dtype != tf.string]
        starts: Dict[int, List[tf.Tensor]] = {}
        captured = {id(external): internal for external, internal in graph.captures}
        for s in sources:
            if s.index not in todo:
                continue
            if s.variable is not None:
                starts[s.index] = [graph.capture(s.variable.handle)]
            else:  # the placeholder, and the eager tensor itself if fn also reads it from a closure
                starts[s.index] = [given[s.index]] + ([captured[id(s.arg)]] if id(s.arg) in captured else [])
        walk = _Walk(graph, ys, starts)
        walk.gradients()
        flags, keys = walk.flags()
        state["walk"], state["keys"] = walk, keys
        return flags

    last_error: Optional[BaseException] = None
    for autograph in (False, True):
        try:
            with functions_traced_inline():
                concrete = tf.function(traced, autograph=autograph).get_concrete_function(*specs)
            return state["walk"], state["keys"], concrete, [s.arg for s in tensor_sources]
        except tf.errors.OperatorNotAllowedInGraphError as error:  # Python control flow on a tensor
            last_error = error
            continue
    raise last_error  # type: ignore[misc]


# --- the words ----------------------------------------------------------------------------------------


def _none_words(op: tf.Operation) -> Tuple[str, str]:
    t = op.type
    out_dtype = op.outputs[0].dtype.name if op.outputs else "?"
    if t == "StopGradient":
        return ("tf.stop_gradient treats its input as a constant in the backward pass, and every path from this "
                "source to the output passes through it.",
                f"Remove the tf.stop_gradient if the gradient should flow; to keep a value but take the gradient of "
                f"something else, use b + tf.stop_gradient(f - b) ({_NB02}, sections 1 and 3).")
    if t in _ROUNDING:
        why = (f"{_ROUNDING[t]} is piecewise constant: its registered gradient returns None (its derivative is 0 "
               "almost everywhere), so the tape returns None" if _registered(op) else
               f"{_ROUNDING[t]} jumps, and TensorFlow registers no gradient for it, so tape.gradient raises "
               "LookupError")
        return (f"{why}.",
                f"To train through it, {_STE}; {_NONE_VS_ZERO}.")
    if t in ("PyFunc", "PyFuncStateless"):
        return ("tf.numpy_function runs Python that TensorFlow cannot differentiate: it is registered as not "
                "differentiable.",
                "Write the computation in TensorFlow ops, or give the tf.numpy_function a backward pass in "
                "TensorFlow ops with tf.custom_gradient (notebook 09 (09_performance.ipynb), section 5; "
                "notebook 08 (08_higher_order_forward_mode.ipynb), section 5).")
    if t == "EagerPyFunc":
        return ("the Python function inside tf.py_function leaves TensorFlow (NumPy or .numpy() inside it), so its "
                "inner tape records nothing.",
                "Use TensorFlow ops inside the tf.py_function, or give it a gradient with tf.custom_gradient "
                "(notebook 08 (08_higher_order_forward_mode.ipynb), section 5).")
    if "Dataset" in t or "Iterator" in t or any(o.dtype == tf.variant for o in op.outputs):
        return (f"the value goes through a tf.data pipeline ({t}): a Dataset's elements are computed outside the "
                "tape, as constants, so nothing connects them to this source.",
                "Take the batch from the dataset first, then compute on it inside the tape, and differentiate "
                "with respect to the variables (or a batch tensor you watch), not the tensors the dataset was made "
                "from.")
    if t in ("ArgMax", "ArgMin"):
        return (f"tf.math.{t.lower()} returns an integer index ({out_dtype}), and integers carry no gradient.",
                f"Use the straight-through one-hot: the value of argmax, the gradient of softmax ({_NB13}, section 4).")
    if t == "Cast":
        return (f"tf.cast to {out_dtype}: integers and booleans carry no gradient.",
                f"Cast to a floating dtype instead; if the rounding is the point, {_STE}.")
    if t in _COMPARISONS:
        return (f"the comparison {t} returns booleans, which carry no gradient.",
                "Give the step a surrogate gradient (notebook 04 (04_surrogate_gradients.ipynb), sections 1-2, "
                f"or gradlab.surrogate_step), or a straight-through estimator ({_NB02}, section 4).")
    if op.outputs and not any(_carries(o) for o in op.outputs):
        return (f"{t} returns {out_dtype} values, which carry no gradient.",
                f"Keep the path from the source to the output in floating point; {_NONE_VS_ZERO}.")
    if t in ("PartitionedCall", "StatefulPartitionedCall", "While", "StatelessWhile", "If", "StatelessIf"):
        return (f"the gradient stops inside a nested function or control-flow op ({t}) that gradlab does not open.",
                "Call explain_gradient on the inner function itself (a tf.function inside fn is traced as one op).")
    if not _registered(op):
        return (f"TensorFlow registers no gradient for {t} (tf.no_gradient, or none at all: then tape.gradient "
                "raises LookupError).",
                f"Give it one with tf.custom_gradient (notebook 01 (01_custom_gradient.ipynb)), or {_STE}.")
    return (f"{t}'s gradient function returns None for this input.",
            f"Give it a gradient with tf.custom_gradient (notebook 01 (01_custom_gradient.ipynb)); {_NONE_VS_ZERO}.")


def _where_consumer(op: tf.Operation, path) -> Optional[tf.Operation]:
    """A ``tf.where`` (Select or SelectV2) that takes ``op``'s output on the path, if any."""
    for output in op.outputs:
        for consumer in output.consumers():
            if consumer.type in ("Select", "SelectV2") and any(o.ref() in path for o in consumer.outputs):
                return consumer
    return None


def _nonfinite_words(op: tf.Operation, path) -> Tuple[str, str]:
    formula = _SINGULAR.get(op.type, f"the derivative of {op.type} is infinite or undefined at these inputs")
    select = _where_consumer(op, path)
    if select is not None:
        at = _op_where(select)
        at = f" at {_notebook_where(at) or at}" if at else ""
        return (f"{op.type}'s backward pass gives inf or NaN: {formula}. The tf.where ({select.type}{at}) picks the "
                f"other branch for those elements, but its backward pass still sends them 0, and 0 x inf = NaN.",
                f"Use the double tf.where: also replace the input of the unsafe branch, "
                f"tf.where(c, f(tf.where(c, x, safe_x)), other) ({_NB13}, section 2).")
    if "norm" in op.name.lower():
        return (f"{op.type}'s backward pass gives inf or NaN: {formula}, here the norm of a zero vector.",
                f"Use the double tf.where, which keeps the value exact: with s = tf.reduce_sum(x ** 2) (over the "
                f"norm's axis, keepdims=True where you need it), "
                f"tf.where(s > 0, tf.sqrt(tf.where(s > 0, s, 1.0)), 0.0) ({_NB13}, section 2). An epsilon under "
                f"the square root, tf.sqrt(s + eps), also gives a finite gradient but changes the value.")
    if any(t.dtype == tf.float16 for t in list(op.inputs) + list(op.outputs)):
        return (f"{op.type}'s backward pass turns a finite gradient into inf or NaN in float16: {formula}, and "
                f"float16's largest finite number is 65,504, so a large but finite derivative overflows to inf too.",
                f"Compute {op.type} in float32 (tf.cast its input to tf.float32, and the result back), or keep its "
                f"input away from that point (clip it, add a small epsilon).")
    return (f"{op.type}'s backward pass turns a finite gradient into inf or NaN: {formula}.",
            f"Where those inputs should give a fixed value, use the double tf.where, which keeps every other value "
            f"exact: tf.where(c, f(tf.where(c, x, safe_x)), fixed) ({_NB13}, section 2). Clipping the input or "
            f"adding a small epsilon also gives a finite gradient, but changes the value.")


def _guarded_singular(op: tf.Operation, path) -> Optional[str]:
    """The type of a singular op (``Sqrt``, ``Log``...) between the source and this tf.where's branch, if any."""
    stack = [t for t in op.inputs[1:] if t.ref() in path]
    seen = set()
    while stack:
        tensor = stack.pop()
        if tensor.ref() in seen:
            continue
        seen.add(tensor.ref())
        if tensor.op.type in _SINGULAR and tensor.op.type != "Exp":
            return tensor.op.type
        stack.extend(t for t in tensor.op.inputs if t.ref() in path)
    return None


def _where_zero_words(op: tf.Operation, path) -> Tuple[str, str]:
    """A tf.where whose selected branch does not depend on the source: zero by design, a guard's zero."""
    if all(t.ref() in path for t in op.inputs[1:]):
        return ("the tf.where selects the other branch for every element, so this branch gets zeros.",
                "Check the condition of the tf.where; the unselected branch never gets a gradient.")
    singular = _guarded_singular(op, path)
    if singular is not None:
        return (f"the tf.where selects, for every element, the branch that does not depend on this source, so the "
                f"gradient is exactly zero there by design: that is what a tf.where guarding a singular point (the "
                f"{singular} in its other branch) should do.",
                f"Nothing to fix if these are the points the tf.where guards: the double tf.where ({_NB13}, section 2) "
                f"gives them a zero gradient. If you expected a gradient there, check the condition of the tf.where.")
    return ("the tf.where selects, for every element, the branch that does not depend on this source, so the "
            "gradient is exactly zero there: the branch that does depend on it is selected nowhere.",
            "Nothing to fix if that is what the tf.where should select there. If you expected a gradient there, "
            "check the condition of the tf.where: the branch it does not select gets no gradient.")


def _zero_words(op: tf.Operation, path) -> Tuple[str, str]:
    name = op.name.lower()
    if op.type in ("Relu", "Relu6", "Elu", "Selu"):
        return (f"every unit of this ReLU ({op.name}) is inactive (input <= 0) for these inputs, so it sends back "
                "zeros: a dead ReLU.",
                "Check the initialisation, the input scale and the learning rate (large steps kill ReLUs), or use a "
                "leaky ReLU, which keeps a slope below 0 (notebook 05 (05_relu_gradients_saliency.ipynb), section 1).")
    if op.type in ("Minimum", "Maximum", "ClipByValue") and "clip" in name:
        return ("every value lies outside the range of tf.clip_by_value, where the clip is flat (saturated), so it "
                "sends back zeros.",
                f"Widen the range; to clip the gradient rather than the value, use gradlab.clip_gradient (notebook "
                f"00 (00_start_here.ipynb), section 4); to keep the clipped value and pass the gradient, use a "
                f"straight-through estimator ({_NB02}, sections 3-4).")
    if op.type in ("Select", "SelectV2"):
        return _where_zero_words(op, path)
    return (f"{op.type} sends back an all-zero gradient for these inputs.",
            f"Check {op.type}'s inputs (a saturated or flat region, a factor of zero); {_NONE_VS_ZERO}.")


def _left_words(where: Optional[str]) -> Tuple[str, str]:
    at = f" at {_notebook_where(where) or where}" if where else ""
    return (f"fn takes a tensor out of TensorFlow{at} (.numpy(), float(), np.asarray or another NumPy call): the "
            "tape records only TensorFlow ops, so nothing connects the result to this source.",
            "Keep the computation in TensorFlow ops (tf.math, tf.reduce_* instead of NumPy); if NumPy is "
            "unavoidable, wrap it in tf.numpy_function and give it a backward pass with tf.custom_gradient "
            "(notebook 09 (09_performance.ipynb), section 5).")


_OK = "a finite gradient, not all zero, reaches this source."
_UNUSED = (
    "fn does not use this source: no op connects it to the output (a value computed from it before fn ran, or "
    "another tensor with the same values, is not the source).",
    "Compute from the source inside fn, or pass the tensor fn really reads (for a Keras 3 variable, watch "
    "variable.value); if you want zeros for unused sources, tape.gradient(..., "
    f"unconnected_gradients=tf.UnconnectedGradients.ZERO); {_NONE_VS_ZERO}.",
)


def _dtype_words(source: _Source) -> Tuple[str, str]:
    return (f"the source has dtype {source.dtype.name}: TensorFlow differentiates only floating-point (and complex) "
            "values, so an integer or boolean source always gets None.",
            f"Make it floating-point before fn uses it: tf.cast(x, tf.float32), or tf.Variable(1.0) rather than "
            f"tf.Variable(1); {_NONE_VS_ZERO}.")


def _fallback_words(status: str, error: Optional[BaseException]) -> Tuple[str, str]:
    why = {
        "none": "no gradient reaches this source",
        "nonfinite": "the gradient holds inf or NaN",
        "zero": "the gradient is exactly zero everywhere",
    }[status]
    if error is not None:
        return (f"{why}, and gradlab could not trace fn to find the op ({type(error).__name__}: {error}).",
                "Make fn traceable by tf.function (no Python side effects on tensors), then call explain_gradient again.")
    if status == "zero":
        return (f"{why}: the contributions of the paths cancel, or the op that zeroes it is inside a nested function.",
                f"Look for terms that cancel (x - x); {_NONE_VS_ZERO}.")
    return (f"{why}, but a traced run of fn does not reproduce it (randomness, or Python state that changed).",
            "Make fn deterministic (seeded, training=False) and call explain_gradient again.")


# --- the function --------------------------------------------------------------------------------------


def explain_gradient(fn: Callable[..., Any], *sources: Any) -> GradientReport:
    """Says why the gradient of ``fn`` is None, non-finite or zero for each source, which op did it and where.

    Runs ``fn(*sources)`` under a ``tf.GradientTape`` and differentiates the sum of its output (every
    element of every floating-point tensor in it) with respect to each source,

    .. math:: g_i = \\frac{\\partial}{\\partial s_i} \\sum_k \\sum_j \\mathrm{fn}(s_1, \\dots, s_n)_{k,j},

    then gives each source a status: ``"ok"``, ``"none"`` (``g_i`` is None), ``"nonfinite"`` (an
    element is inf or NaN) or ``"zero"`` (every element exactly 0). For a source that is not ``ok``,
    ``fn`` is traced once more into a graph, and ``tf.gradients`` on that graph gives the gradient
    reaching every tensor on the paths from the source to the output and each op's own backward
    step: the culprit is the op, nearest the output, whose backward step returns None (the gradient
    stops), turns a finite gradient into inf or NaN, or turns a non-zero one into zeros. Its
    traceback gives the line of your code that built it. The causes told apart include ops without a
    gradient (``tf.round``, ``tf.floor``, ``argmax``, a cast to an integer, comparisons,
    ``tf.numpy_function``), ``tf.stop_gradient``, an integer or boolean source, a source ``fn`` does
    not use, a value taken out of TensorFlow (``.numpy()``, ``float()``), a ``tf.data`` pipeline, the
    singular derivatives (``sqrt``, ``log``, ``pow``, a norm at zero, the ``tf.where`` trap), a dead
    ReLU and a saturated clip.

    Every ``tf.function`` that ``fn`` calls is traced into the same graph (its Python function runs
    there, as under ``tf.config.run_functions_eagerly(True)``, restored afterwards), and the ops inside it
    are found, with their lines; a ``tf.data`` pipeline's functions stay traced on their own.

    Cost: one tape gradient when every source is ``ok``; otherwise a trace of ``fn`` and one
    run of the traced graph with the extra gradients. ``fn`` runs twice then, so it should have no
    side effects (no optimizer step) and be deterministic (``training=False``, seeded). The trace switches
    ``tf.config.run_functions_eagerly`` on for its duration, for the whole process: diagnose while no other
    thread trains.

    Args:
      fn: a Python function, a ``tf.function`` or a Keras model or layer, called as
        ``fn(*sources)``; it returns a tensor or a nest (tuple, list, dict) of tensors. It may also
        read the sources from a closure (a model's weights), ignoring its arguments.
      *sources: tensors, ``tf.Variable``s, Keras 3 variables (watched through ``variable.value``),
        or arrays and numbers (converted to tensors). At least one.

    Returns:
      A :class:`GradientReport`: ``report[i]`` is the :class:`GradientDiagnosis` of ``sources[i]``
      (``status``, ``op_type``, ``where``, ``reason``, ``fix``).

    Raises:
      TypeError: ``fn`` is not callable, no source is given, a source is not a tensor, variable or
        array of numbers, or ``fn`` returns something other than a tensor or a nest of tensors.
      ValueError: ``fn`` returns an empty structure.
      RuntimeError: called inside ``tf.function`` (it runs eagerly).

    Example:
      >>> import tensorflow as tf, gradlab
      >>> x = tf.constant([0.0, 4.0])
      >>> report = gradlab.explain_gradient(lambda x: tf.sqrt(x), x)
      >>> report[0].status, report[0].op_type
      ('nonfinite', 'Sqrt')
      >>> gradlab.explain_gradient(lambda x: tf.sqrt(x + 1.0), x).ok
      True
    """
    _check_fn(fn)
    if not sources:
        raise TypeError("explain_gradient needs at least one source to differentiate with respect to: "
                        "explain_gradient(fn, x) or explain_gradient(fn, *model.trainable_variables).")
    if not tf.executing_eagerly():
        raise RuntimeError("explain_gradient runs eagerly: call it outside tf.function (fn itself may be one).")
    prepared = [_prepare_source(value, index) for index, value in enumerate(sources)]
    floats = [s for s in prepared if s.differentiable]

    # The cheap pass: one tape gradient.
    error: Optional[BaseException] = None
    gradients: Dict[int, Any] = {}
    try:
        with tf.GradientTape(watch_accessed_variables=False) as tape:
            for s in floats:
                tape.watch(s.watched)
            out = fn(*[s.arg for s in prepared])
        targets = [t for t in _output_leaves(out) if _is_float(t)]
        if targets and floats:
            try:
                grads = tape.gradient(targets, [s.watched for s in floats],
                                      unconnected_gradients=tf.UnconnectedGradients.NONE)
            except LookupError as lookup:  # an op with no gradient at all: TensorFlow raises
                error, grads = lookup, [None] * len(floats)
            gradients = {s.index: g for s, g in zip(floats, grads)}
    except Exception as raised:  # noqa: BLE001  (only a value leaving TensorFlow is diagnosed)
        if not _left_tensorflow(raised):
            raise
        where = _error_where(raised) or _retrace_where(fn, prepared)
        reason, fix = _left_words(where)
        return GradientReport([
            GradientDiagnosis(s.label, "none", None, where, reason, fix) if s.differentiable
            else GradientDiagnosis(s.label, "none", None, None, *_dtype_words(s))
            for s in prepared
        ])

    present = [(i, g) for i, g in gradients.items() if g is not None]
    flag_values = tf.stack([_flags(g) for _, g in present]).numpy() if present else []
    flags = {i: f for (i, _), f in zip(present, flag_values)}
    statuses = {s.index: _status(gradients.get(s.index), flags.get(s.index)) for s in floats}
    todo = {i: status for i, status in statuses.items() if status != "ok"}
    found = _diagnose(fn, prepared, todo, error) if todo else {}

    entries = []
    for s in prepared:
        if not s.differentiable:
            entries.append(GradientDiagnosis(s.label, "none", None, None, *_dtype_words(s)))
        elif s.index in found:
            entries.append(dataclasses.replace(found[s.index], gradient=gradients.get(s.index)))
        else:
            entries.append(GradientDiagnosis(s.label, "ok", None, None, _OK + s.note, "nothing to fix.",
                                             gradient=gradients.get(s.index)))
    return GradientReport(entries)


def _retrace_where(fn: Callable, sources: List[_Source]) -> Optional[str]:
    """Where a ``tf.function`` ``fn`` takes a tensor out of TensorFlow: its error has no user frames, a trace has."""
    if _unwrap(fn) is fn:
        return None
    try:
        _trace(fn, sources, {})
    except Exception as raised:  # noqa: BLE001  (only its traceback is read)
        return _error_where(raised) if _left_tensorflow(raised) else None
    return None


def _diagnose(fn: Callable, sources: List[_Source], todo: Dict[int, str],
              error: Optional[BaseException]) -> Dict[int, GradientDiagnosis]:
    """The graph pass for the sources in ``todo`` (index -> status)."""
    by_index = {s.index: s for s in sources}
    try:
        walk, keys, concrete, args = _trace(fn, sources, todo)
    except Exception as raised:  # noqa: BLE001  (a report, not a crash: say why the trace failed)
        if _left_tensorflow(raised):
            where = _error_where(raised)
            words = _left_words(where)
            return {i: GradientDiagnosis(by_index[i].label, status, None, where, *words) for i, status in todo.items()}
        return {i: GradientDiagnosis(by_index[i].label, status, None, None, *_fallback_words(status, raised))
                for i, status in todo.items()}
    values: Dict[Any, Tuple[bool, bool]] = {}
    if any(status != "none" for status in todo.values()) and keys:
        rows = concrete(*args).numpy()
        values = {key: (bool(row[0]), bool(row[1])) for key, row in zip(keys, rows)}
    found = {}
    for index, status in todo.items():
        label = by_index[index].label
        if not walk.paths.get(index):
            found[index] = GradientDiagnosis(label, status, None, None, *_UNUSED)
            continue
        op = walk.culprit(index, status, values)
        if op is None:
            found[index] = GradientDiagnosis(label, status, None, None, *_fallback_words(status, error))
            continue
        if status == "none":
            reason, fix = _none_words(op)
        elif status == "nonfinite":
            reason, fix = _nonfinite_words(op, walk.paths[index])
        else:
            reason, fix = _zero_words(op, walk.paths[index])
        found[index] = GradientDiagnosis(label, status, op.type, _op_where(op), reason, fix, op_name=op.name)
    return found
