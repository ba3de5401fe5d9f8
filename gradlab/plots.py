"""Plots for the workbook's recurring pictures: forward value beside gradient, per-layer norms.

The pictures that come back in every notebook live here instead of in long plotting cells:

* :func:`forward_and_gradient`: a 1-D function's forward value and its gradient side by side (or
  overlaid on one axes), the plain gradient drawn faintly (grey, dashed) beside the modified one;
* :func:`gradient_norm_bars`: per-layer gradient norms as bars, optionally beside the norms
  without the modification; :func:`layer_gradient_norms` computes them from ``tape.gradient``;
* :func:`draw_forward_and_gradient`: the array-level drawing both use, and that
  :mod:`gradlab.widgets` uses too, so that a static plot and an interactive explorer look alike;
* :func:`computation_graph`: a chain of ops as a picture, forward values flowing right above it,
  gradients flowing left below it, and the op whose backward rule is replaced marked in red.

Every function that creates a figure returns a :class:`~matplotlib.figure.Figure` that pyplot
does *not* keep open: in Jupyter it is shown exactly once, when it is the value of a cell (or
with ``display(fig)``), never a second time by the inline backend at the end of the cell, and
``plt.get_fignums()`` does not grow. Save it with ``fig.savefig(...)``. Pass ``axes``/``ax`` to
draw into axes of your own instead.

The functions plotted are *elementwise* (``y[i]`` depends on ``x[i]`` only), so the gradient of
``sum(y)`` with respect to ``x`` is the derivative at each grid point::

    forward:   y_i = f(x_i)
    gradient:  g_i = d sum(y) / d x_i = f'(x_i)     (as the modified backward pass defines it)

Importing this module imports matplotlib (``import gradlab`` alone does not).
"""
from __future__ import annotations

import math
import numbers
from typing import Callable, Mapping, Optional, Sequence, Union

import matplotlib.pyplot as plt
import numpy as np
import tensorflow as tf
from matplotlib.axes import Axes
from matplotlib.figure import Figure
from matplotlib.lines import Line2D
from matplotlib.patches import FancyArrowPatch

from gradlab import _validation as v

__all__ = [
    "DEFAULT_X",
    "grid",
    "values_and_gradients",
    "draw_forward_and_gradient",
    "forward_and_gradient",
    "gradient_norm_bars",
    "layer_gradient_norms",
    "computation_graph",
]

#: The default grid: 401 points on [-3, 3] (float32), fine enough for smooth curves and kinks.
DEFAULT_X = np.linspace(-3.0, 3.0, 401, dtype=np.float32)

#: Line styles: the plain (unmodified) gradient is faint, the modified curves are bold.
PLAIN_STYLE = {"color": "0.55", "linestyle": "--", "linewidth": 1.6, "alpha": 0.9}
FORWARD_STYLE = {"color": "C0", "linewidth": 2.0}
GRADIENT_STYLE = {"color": "C1", "linewidth": 2.0}
_AXIS_STYLE = {"color": "0.85", "linewidth": 0.8, "zorder": 0}
#: Colours of :func:`computation_graph`: forward as the forward curves, gradients as the gradient
#: curves, and the modified op (its edge, label, backward arrow and rule) in a third colour.
GRAPH_COLORS = {"forward": "C0", "backward": "C1", "modified": "C3", "edge": "0.35"}

ElementwiseFn = Callable[[tf.Tensor], tf.Tensor]


def grid(x, name: str = "x") -> tf.Tensor:
    """``x`` as a 1-D floating-point tensor of at least 2 finite points (``DEFAULT_X`` if None)."""
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


def values_and_gradients(fn: ElementwiseFn, x=None) -> tuple[np.ndarray, np.ndarray]:
    """The forward values ``fn(x)`` and the gradient ``d sum(fn(x)) / dx`` on a 1-D grid.

    ::

        forward:   y = fn(x)
        gradient:  g = tape.gradient(sum(y), x)      (None, i.e. no path to x, is returned as 0)

    Whatever ``fn``'s backward pass says is what you get: with a gradlab op inside ``fn`` this is
    the *modified* gradient.

    Args:
      fn: an elementwise function of one floating-point tensor, e.g. ``tf.tanh`` or
        ``lambda x: tf.tanh(gradlab.scale_gradient(x, 0.5))``.
      x: the grid, a 1-D float tensor, array or list; :data:`DEFAULT_X` when None.

    Returns:
      ``(forward, gradient)``, two NumPy arrays of ``x``'s shape and dtype.

    Raises:
      TypeError: if ``fn`` is not callable, ``x`` or ``fn(x)`` is not floating-point.
      ValueError: if ``x`` is not a finite 1-D grid or ``fn(x)`` does not have ``x``'s shape.

    Example:
      >>> import tensorflow as tf, gradlab, gradlab.plots
      >>> y, g = gradlab.plots.values_and_gradients(
      ...     lambda x: 3.0 * gradlab.clip_gradient(x, -1.0, 1.0), [0.0, 2.0])
      >>> y.tolist(), g.tolist()   # forward 3x; gradient clip(3) = 1 instead of 3
      ([0.0, 6.0], [1.0, 1.0])
    """
    v.check_callable(fn, "fn")
    x = grid(x)
    with tf.GradientTape() as tape:
        tape.watch(x)
        y = fn(x)
    y = v.as_float_tensor(y, "fn(x)")
    if y.shape != x.shape:
        raise ValueError(
            f"fn must be elementwise and return x's shape {x.shape}; fn(x) has shape {y.shape}."
        )
    gradient = tape.gradient(y, x)
    if gradient is None:
        gradient = tf.zeros_like(x)
    return y.numpy(), tf.cast(gradient, x.dtype).numpy()


def _finite_or_nan(values: np.ndarray) -> np.ndarray:
    """Values to draw: inf and -inf become nan (a gap) instead of a line off to infinity."""
    values = np.asarray(values)
    return np.where(np.isfinite(values), values, np.nan)


def _decorate(ax: Axes, xlabel: str, ylabel: Optional[str], title: Optional[str]) -> None:
    ax.axhline(0.0, **_AXIS_STYLE)
    ax.axvline(0.0, **_AXIS_STYLE)
    ax.set_xlabel(xlabel)
    if ylabel:
        ax.set_ylabel(ylabel)
    if title:
        ax.set_title(title, fontsize="medium")
    ax.grid(True, color="0.93", linewidth=0.6)
    ax.set_axisbelow(True)


def draw_forward_and_gradient(
    axes: Union[Axes, Sequence[Axes]],
    x,
    forward,
    gradient,
    *,
    plain_forward=None,
    plain_gradient=None,
    name: str = "f",
) -> dict[str, Line2D]:
    """Draws precomputed forward and gradient curves; returns the lines for later ``set_data``.

    Side by side when ``axes`` is a pair ``(forward_ax, gradient_ax)``; overlaid, with a legend
    telling the curves apart, when it is one ``Axes``. The plain curves are drawn first, faint
    and dashed; the modified ones on top.

    Args:
      axes: two axes (forward, gradient) or one axes for an overlay.
      x: the grid, a 1-D array.
      forward: the forward values at ``x``.
      gradient: the (modified) gradient at ``x``.
      plain_forward: optional forward values without the modification (drawn faintly).
      plain_gradient: optional gradient without the modification (drawn faintly).
      name: the function's name in labels, as in ``f(x)`` and ``df/dx``.

    Returns:
      A dict of :class:`~matplotlib.lines.Line2D` with the keys ``"forward"``, ``"gradient"``
      and, when given, ``"plain_forward"`` and ``"plain_gradient"``.

    Raises:
      TypeError: if ``axes`` is neither an Axes nor a pair of Axes.
      ValueError: if an array's shape differs from ``x``'s.

    Example:
      >>> import numpy as np, gradlab.plots
      >>> from matplotlib.figure import Figure
      >>> fig = Figure()
      >>> x = np.linspace(-1, 1, 5)
      >>> lines = gradlab.plots.draw_forward_and_gradient(fig.subplots(1, 2), x, x**2, 2*x)
      >>> sorted(lines)
      ['forward', 'gradient']
    """
    if isinstance(axes, Axes):
        forward_ax = gradient_ax = axes
        overlay = True
    else:
        items = list(np.ravel(np.asarray(axes, dtype=object))) if axes is not None else []
        if len(items) != 2 or not all(isinstance(ax, Axes) for ax in items):
            raise TypeError(
                "axes must be one matplotlib Axes (overlay) or a pair (forward_ax, gradient_ax); "
                f"got {v._describe(axes)}."
            )
        forward_ax, gradient_ax = items
        overlay = False
    x = np.asarray(x)
    arrays = {"forward": forward, "gradient": gradient,
              "plain_forward": plain_forward, "plain_gradient": plain_gradient}
    arrays = {key: np.asarray(value) for key, value in arrays.items() if value is not None}
    for key, value in arrays.items():
        if value.shape != x.shape:
            raise ValueError(f"{key} must have x's shape {x.shape}; got shape {value.shape}.")

    modified = "plain_gradient" in arrays
    labels = {
        "plain_forward": f"{name}(x) plain",
        "plain_gradient": "gradient, plain",
        "forward": f"forward {name}(x)",
        "gradient": "gradient, modified" if modified else f"gradient d{name}/dx",
    }
    styles = {
        "plain_forward": dict(PLAIN_STYLE, linestyle=":"),
        "plain_gradient": PLAIN_STYLE,
        "forward": FORWARD_STYLE,
        "gradient": GRADIENT_STYLE,
    }
    if overlay:
        _decorate(forward_ax, "x", None, None)
    else:
        _decorate(forward_ax, "x", "y", f"forward pass: y = {name}(x)")
        _decorate(gradient_ax, "x", "dy/dx", "backward pass: gradient dy/dx")
    lines = {}
    for key in ("plain_forward", "plain_gradient", "forward", "gradient"):
        if key in arrays:
            ax = forward_ax if key.endswith("forward") else gradient_ax
            (lines[key],) = ax.plot(x, _finite_or_nan(arrays[key]), label=labels[key], **styles[key])
    return lines


def forward_and_gradient(
    fn: ElementwiseFn,
    modified: Optional[ElementwiseFn] = None,
    *,
    x=None,
    axes: Union[None, Axes, Sequence[Axes]] = None,
    overlay: bool = False,
    name: Optional[str] = None,
    title: Optional[str] = None,
    figsize: tuple[float, float] = (8.0, 3.2),
) -> Figure:
    """Plots a 1-D function's forward value and gradient, plain and (optionally) modified.

    ::

        left  (forward):   y = modified(x)             (and fn(x), faintly, if it differs)
        right (backward):  d modified / dx  (bold)  beside  d fn / dx  (faint, dashed)

    Without ``modified``, plots ``fn`` and its own gradient.

    Args:
      fn: the plain elementwise function, e.g. ``tf.tanh``.
      modified: the same function with a modified gradient, e.g.
        ``lambda x: tf.tanh(gradlab.clip_gradient(x, -0.5, 0.5))``.
      x: the grid (1-D); :data:`DEFAULT_X` (401 points on [-3, 3]) when None.
      axes: draw into these instead of a new figure: a pair of Axes, or one Axes for an overlay.
      overlay: with a new figure, draw everything on one axes instead of side by side.
      name: the function's name in labels; ``fn.__name__`` when None (``"f"`` for a lambda).
      title: an optional title over the figure.
      figsize: the size of a new figure, in inches.

    Returns:
      The :class:`~matplotlib.figure.Figure`, not kept open by pyplot (shown once in Jupyter when
      it is the cell's value).

    Raises:
      TypeError: if ``fn``/``modified`` is not callable or ``axes`` is not Axes.
      ValueError: if ``x`` is not a finite 1-D grid or a function is not elementwise.

    Example:
      >>> import tensorflow as tf, gradlab, gradlab.plots
      >>> fig = gradlab.plots.forward_and_gradient(
      ...     tf.tanh, lambda x: tf.tanh(gradlab.scale_gradient(x, 0.5)))
      >>> [ax.get_title() for ax in fig.axes]
      ['forward pass: y = tanh(x)', 'backward pass: gradient dy/dx']
      >>> float(max(fig.axes[1].get_lines()[-1].get_ydata()))   # half of tanh'(0) = 1
      0.5
    """
    v.check_callable(fn, "fn")
    if modified is not None:
        v.check_callable(modified, "modified")
    if not isinstance(overlay, bool):
        raise TypeError(f"overlay must be True or False; got {v._describe(overlay)}.")
    if name is None:
        name = getattr(fn, "__name__", "f")
        name = "f" if not name.isidentifier() else name
    grid_x = grid(x)
    plain_forward, plain_gradient = values_and_gradients(fn, grid_x)
    if modified is None:
        forward, gradient = plain_forward, plain_gradient
        plain_forward = plain_gradient = None
    else:
        forward, gradient = values_and_gradients(modified, grid_x)
        if np.array_equal(forward, plain_forward, equal_nan=True):
            plain_forward = None  # identical: one curve says it all

    fig, draw_axes, owned = _figure_and_axes(axes, overlay, figsize, "axes")
    lines = draw_forward_and_gradient(
        draw_axes, grid_x.numpy(), forward, gradient,
        plain_forward=plain_forward, plain_gradient=plain_gradient, name=name,
    )
    if owned:
        fig.legend(handles=list(lines.values()), loc="outside lower center", ncols=len(lines),
                   frameon=False, fontsize="small")
    else:
        for ax in {line.axes for line in lines.values()}:
            ax.legend(fontsize="small")
    if title:
        fig.suptitle(title)
    return fig


def _figure_and_axes(axes, overlay: bool, figsize, argname: str):
    """(figure, axes to draw into, whether we created the figure)."""
    if axes is None:
        _check_figsize(figsize)
        ncols = 1 if overlay else 2
        fig, new_axes = plt.subplots(1, ncols, figsize=figsize, layout="constrained")
        plt.close(fig)  # pyplot forgets it: no second display by the inline backend, no fignum leak
        return fig, new_axes, True
    if isinstance(axes, Axes):
        return axes.figure, axes, False
    items = list(np.ravel(np.asarray(axes, dtype=object)))
    if len(items) == 2 and all(isinstance(ax, Axes) for ax in items):
        return items[0].figure, items, False
    raise TypeError(
        f"{argname} must be a matplotlib Axes, a pair of Axes, or None for a new figure; "
        f"got {v._describe(axes)}."
    )


def _check_figsize(figsize) -> None:
    ok = (
        isinstance(figsize, (tuple, list)) and len(figsize) == 2
        and all(isinstance(s, numbers.Real) and not isinstance(s, bool) and math.isfinite(s) and s > 0
                for s in figsize)
    )
    if not ok:
        raise ValueError(
            f"figsize must be (width, height) in inches, two positive numbers; got {figsize!r}."
        )


def _norm_values(norms, argname: str) -> tuple[list[str], np.ndarray]:
    if isinstance(norms, Mapping):
        names = [str(key) for key in norms]
        raw = list(norms.values())
    elif isinstance(norms, (str, bytes)) or not hasattr(norms, "__iter__"):
        raise TypeError(
            f"{argname} must be a dict {{layer name: norm}} or a list of norms; "
            f"got {v._describe(norms)}."
        )
    else:
        raw = list(norms)
        names = [f"layer {i}" for i in range(len(raw))]
    if not raw:
        raise ValueError(f"{argname} is empty; pass at least one norm.")
    values = []
    for key, value in zip(names, raw):
        try:
            number = float(np.asarray(value))
        except (TypeError, ValueError):
            raise TypeError(
                f"{argname}[{key!r}] must be a number or a scalar tensor; got {v._describe(value)}."
            ) from None
        if not (math.isfinite(number) and number >= 0):
            raise ValueError(f"{argname}[{key!r}] must be a finite norm >= 0; got {number!r}.")
        values.append(number)
    return names, np.asarray(values)


def gradient_norm_bars(
    norms,
    *,
    plain=None,
    ax: Optional[Axes] = None,
    log: bool = False,
    title: Optional[str] = None,
    label: str = "modified",
    plain_label: str = "plain",
    figsize: tuple[float, float] = (6.4, 3.2),
) -> Figure:
    """Draws per-layer gradient norms as bars, optionally beside the norms without the change.

    Each bar is labelled with its value; with ``plain``, each layer gets two bars, the plain one
    faint on the left and the modified one on the right.

    Args:
      norms: ``{layer name: norm}`` (e.g. from :func:`layer_gradient_norms`) or a list of norms
        (named ``layer 0``, ``layer 1``...). Norms are finite numbers >= 0 (floats or scalar
        tensors).
      plain: optional norms without the modification, with the same names (or length).
      ax: draw into this Axes instead of a new figure.
      log: use a logarithmic y axis (for norms that span orders of magnitude).
      title: an optional axes title.
      label: the legend label of ``norms`` (used with ``plain``).
      plain_label: the legend label of ``plain``.
      figsize: the size of a new figure, in inches.

    Returns:
      The :class:`~matplotlib.figure.Figure`, not kept open by pyplot.

    Raises:
      TypeError: if ``norms``/``plain`` is not a dict or list of numbers, or ``ax`` not an Axes.
      ValueError: if a norm is negative or not finite, ``norms`` is empty, or ``plain`` names
        other layers.

    Example:
      >>> import gradlab.plots
      >>> fig = gradlab.plots.gradient_norm_bars({"dense": 0.5, "dense_1": 2.0},
      ...                                        plain={"dense": 1.0, "dense_1": 2.0})
      >>> [float(p.get_height()) for p in fig.axes[0].patches]   # plain bars, then modified
      [1.0, 2.0, 0.5, 2.0]
    """
    names, values = _norm_values(norms, "norms")
    plain_values = None
    if plain is not None:
        plain_names, plain_values = _norm_values(plain, "plain")
        if isinstance(norms, Mapping) != isinstance(plain, Mapping) or plain_names != names:
            raise ValueError(
                f"plain must give the same layers as norms, in the same order; norms has "
                f"{names}, plain has {plain_names}."
            )
    if not isinstance(log, bool):
        raise TypeError(f"log must be True or False; got {v._describe(log)}.")
    if ax is None:
        _check_figsize(figsize)
        fig, ax = plt.subplots(figsize=figsize, layout="constrained")
        plt.close(fig)
    elif not isinstance(ax, Axes):
        raise TypeError(f"ax must be a matplotlib Axes or None; got {v._describe(ax)}.")
    fig = ax.figure

    positions = np.arange(len(names), dtype=float)
    if plain_values is None:
        bars = ax.bar(positions, values, width=0.6, color="C1", label=label)
        ax.bar_label(bars, fmt="%.3g", fontsize="small")
    else:
        plain_bars = ax.bar(positions - 0.2, plain_values, width=0.4, color="0.8",
                            edgecolor="0.55", label=plain_label)
        bars = ax.bar(positions + 0.2, values, width=0.4, color="C1", label=label)
        ax.bar_label(plain_bars, fmt="%.3g", fontsize="small", color="0.4")
        ax.bar_label(bars, fmt="%.3g", fontsize="small")
        ax.legend(fontsize="small")
    ax.set_xticks(positions, names, rotation=30 if len(names) > 4 else 0,
                  ha="right" if len(names) > 4 else "center")
    ax.set_ylabel("gradient L2 norm")
    if log:
        ax.set_yscale("log", nonpositive="clip")  # bars start at 0: masking would hide every bar
    else:
        ax.margins(y=0.15)
    if title:
        ax.set_title(title, fontsize="medium")
    return fig


def _group_name(variable) -> str:
    path = getattr(variable, "path", None)  # Keras 3: "dense/kernel", "sequential/dense/kernel"
    if not isinstance(path, str):
        path = getattr(variable, "name", None)
    if not isinstance(path, str) or not path:
        raise TypeError(
            f"variables must be Keras or TensorFlow variables with a path or name; got "
            f"{v._describe(variable)}."
        )
    path = path.split(":")[0]
    return path.rsplit("/", 1)[0] if "/" in path else path


def layer_gradient_norms(gradients: Sequence, variables: Sequence) -> dict[str, float]:
    """The L2 norm of the gradient of each layer's variables, in order of first appearance.

    ::

        norm(layer) = sqrt(sum over the layer's variables v of sum(grad_v ** 2))

    Variables are grouped by their path without the last component (Keras 3 ``variable.path``,
    e.g. ``"dense_1/kernel"`` and ``"dense_1/bias"`` form ``"dense_1"``). A ``None`` gradient
    (no path from the loss to that variable) counts as zero.

    Args:
      gradients: what ``tape.gradient(loss, variables)`` returned, aligned with ``variables``.
      variables: the variables, e.g. ``model.trainable_variables``.

    Returns:
      ``{layer name: norm}`` as Python floats, ready for :func:`gradient_norm_bars`.

    Raises:
      ValueError: if the two sequences differ in length.
      TypeError: if a variable has neither a path nor a name.

    Example:
      >>> import tensorflow as tf, gradlab.plots
      >>> w = tf.Variable([3.0, 4.0], name="dense/kernel")
      >>> b = tf.Variable([0.0], name="dense/bias")
      >>> gradlab.plots.layer_gradient_norms([tf.constant([3.0, 4.0]), None], [w, b])
      {'dense': 5.0}
    """
    gradients, variables = list(gradients), list(variables)
    if len(gradients) != len(variables):
        raise ValueError(
            f"gradients and variables must be aligned (as zip(tape.gradient(loss, vars), vars)); "
            f"got {len(gradients)} gradients for {len(variables)} variables."
        )
    groups: dict[str, list] = {}
    for gradient, variable in zip(gradients, variables):
        groups.setdefault(_group_name(variable), [])
        if gradient is not None:
            groups[_group_name(variable)].append(gradient)
    return {
        name: float(tf.linalg.global_norm(grads)) if grads else 0.0
        for name, grads in groups.items()
    }



def _string_list(value, name: str, length: Optional[int], what: str) -> Optional[list[str]]:
    """``value`` as a list of strings (None stays None), or raises naming ``name``."""
    if value is None:
        return None
    if isinstance(value, (str, bytes)) or not isinstance(value, Sequence):
        raise TypeError(f"{name} must be a list of strings, {what}; got {v._describe(value)}.")
    items = list(value)
    for i, item in enumerate(items):
        if not isinstance(item, str):
            raise TypeError(f"{name}[{i}] must be a string; got {v._describe(item)}.")
    if length is not None and len(items) != length:
        raise ValueError(f"{name} must have {length} entries, {what}; got {len(items)}: {items!r}.")
    return items


def _optional_str(value, name: str) -> Optional[str]:
    if value is not None and not isinstance(value, str):
        raise TypeError(f"{name} must be a string or None; got {v._describe(value)}.")
    return value


def computation_graph(
    nodes: Sequence[str],
    *,
    ops: Optional[Sequence[str]] = None,
    forward: Optional[Sequence[str]] = None,
    backward: Optional[Sequence[str]] = None,
    modified: Optional[int] = None,
    rule: Optional[str] = None,
    title: Optional[str] = None,
    ax: Optional[Axes] = None,
) -> Figure:
    """Draws a chain of ops: forward values flow right above it, gradients flow left below it.

    ::

        forward:    x = 1  ──────▶  u = 3  ──────▶  y = 9          (blue, values per node)
        graph:     (x) ── ×3 ── (u) ── square ── (y)
        backward:  dy/dx = 18  ◀────  dy/du = 6  ◀────  dy/dy = 1   (orange, gradients per node)

    Edge ``i`` joins ``nodes[i]`` to ``nodes[i + 1]`` and is labelled ``ops[i]``. The edge
    ``modified`` (the op whose backward rule is replaced, e.g. by ``tf.custom_gradient``) is
    drawn in red: its edge, its op label, its backward arrow and the ``rule`` text under it. Its
    forward arrow stays blue, because a gradient modification leaves the forward pass alone.

    Artists carry ids for tests and later edits (``artist.get_gid()``): ``"edge i"`` (lines),
    ``"forward arrow i"``, ``"backward arrow i"`` (patches) and, for texts, ``"node"`` (drawn in
    a round box), ``"op"``, ``"forward"``, ``"backward"``, ``"rule"`` and ``"row"``.

    Args:
      nodes: the names of the values along the chain, left to right, at least 2, e.g.
        ``["x", "u", "y", "L"]``.
      ops: the op on each edge, ``len(nodes) - 1`` strings, e.g. ``["×3", "square", "loss"]``.
      forward: the forward value at each node, ``len(nodes)`` strings, e.g. ``["x = 1", ...]``.
      backward: the gradient at each node, ``len(nodes)`` strings, e.g. ``["dL/dx = 18", ...]``.
      modified: the 0-based index of the edge whose backward rule is replaced (None: no edge).
      rule: the replacement rule shown under the modified edge, e.g. ``"dy → 0.5·dy"``; needs
        ``modified``.
      title: an optional axes title.
      ax: draw into this Axes instead of a new figure.

    Returns:
      The :class:`~matplotlib.figure.Figure`, not kept open by pyplot (shown once in Jupyter when
      it is the cell's value).

    Raises:
      TypeError: if ``nodes``, ``ops``, ``forward`` or ``backward`` is not a list of strings,
        ``modified`` is not an int, ``rule``/``title`` is not a string or ``ax`` is not an Axes.
      ValueError: if there are fewer than 2 nodes, a list has the wrong length, ``modified`` is
        not an edge index, or ``rule`` is given without ``modified``.

    Example:
      >>> import gradlab.plots
      >>> fig = gradlab.plots.computation_graph(
      ...     ["x", "u", "y"], ops=["×3", "square"],
      ...     forward=["x = 1", "u = 3", "y = 9"],
      ...     backward=["dy/dx = 9", "dy/du = 6", "dy/dy = 1"],
      ...     modified=0, rule="dy → 1.5·dy")
      >>> ax = fig.axes[0]
      >>> [t.get_text() for t in ax.texts if t.get_gid() in ("op", "rule")]
      ['×3', 'square', 'dy → 1.5·dy']
      >>> [t.get_color() for t in ax.texts if t.get_gid() == "op"]   # the modified op is red
      ['C3', '0.35']
    """
    names = _string_list(nodes, "nodes", None, "one per value along the chain")
    if names is None or len(names) < 2:
        raise ValueError(
            f"nodes must name at least 2 values, e.g. ['x', 'y']; got {nodes!r}."
        )
    count = len(names)
    ops = _string_list(ops, "ops", count - 1, "one per edge (len(nodes) - 1)")
    forward = _string_list(forward, "forward", count, "one per node")
    backward = _string_list(backward, "backward", count, "one per node")
    if modified is not None:
        if isinstance(modified, (bool, np.bool_)) or not isinstance(modified, numbers.Integral):
            raise TypeError(
                f"modified must be an edge index (an int) or None; got {v._describe(modified)}."
            )
        if not 0 <= modified < count - 1:
            raise ValueError(
                f"modified must be an edge index from 0 to {count - 2} (edge i joins nodes[i] and "
                f"nodes[i + 1]); got {modified!r}."
            )
        modified = int(modified)
    rule = _optional_str(rule, "rule")
    if rule is not None and modified is None:
        raise ValueError(
            f"rule {rule!r} needs modified, the index of the edge whose backward rule it replaces."
        )
    title = _optional_str(title, "title")
    if ax is None:
        fig, ax = plt.subplots(figsize=(2.3 * count + 0.6, 2.7), layout="constrained")
        plt.close(fig)
    elif not isinstance(ax, Axes):
        raise TypeError(f"ax must be a matplotlib Axes or None; got {v._describe(ax)}.")
    fig = ax.figure

    colors = GRAPH_COLORS
    row = 0.62
    for i in range(count - 1):
        is_modified = i == modified
        edge_color = colors["modified"] if is_modified else colors["edge"]
        ax.plot([i, i + 1], [0.0, 0.0], color=edge_color,
                linewidth=3.0 if is_modified else 1.5, gid=f"edge {i}", zorder=1)
        if ops is not None:
            box = {"boxstyle": "round,pad=0.25", "linewidth": 1.2,
                   "facecolor": "#fde0dd" if is_modified else "white", "edgecolor": edge_color}
            ax.text(i + 0.5, 0.0, ops[i], ha="center", va="center", color=edge_color,
                    fontweight="bold" if is_modified else "normal", bbox=box, gid="op", zorder=3)
        if forward is not None:
            ax.add_patch(FancyArrowPatch((i + 0.3, row), (i + 0.7, row), arrowstyle="-|>",
                                         mutation_scale=14, linewidth=1.6,
                                         color=colors["forward"], gid=f"forward arrow {i}"))
        if backward is not None:
            back_color = colors["modified"] if is_modified else colors["backward"]
            ax.add_patch(FancyArrowPatch((i + 0.7, -row), (i + 0.3, -row), arrowstyle="-|>",
                                         mutation_scale=14, linewidth=2.4 if is_modified else 1.6,
                                         color=back_color, gid=f"backward arrow {i}"))
    if rule is not None:
        ax.text(modified + 0.5, -row - 0.3, rule, ha="center", va="top", color=colors["modified"],
                fontweight="bold", gid="rule")
    for i, name in enumerate(names):
        node_box = {"boxstyle": "circle,pad=0.45", "facecolor": "white", "edgecolor": "0.2",
                    "linewidth": 1.5}
        ax.text(i, 0.0, name, ha="center", va="center", fontsize="large", bbox=node_box,
                gid="node", zorder=3)
        if forward is not None:
            ax.text(i, row, forward[i], ha="center", va="center", color=colors["forward"],
                    gid="forward")
        if backward is not None:
            ax.text(i, -row, backward[i], ha="center", va="center", color=colors["backward"],
                    gid="backward")
    if forward is not None:
        ax.text(-0.5, row + 0.3, "forward pass: values →", ha="left", va="center",
                color=colors["forward"], fontsize="small", gid="row")
    if backward is not None:
        ax.text(-0.5, -row - 0.62,
                "← backward pass: gradients", ha="left", va="center", color=colors["backward"],
                fontsize="small", gid="row")
    ax.set_xlim(-0.55, count - 0.45)
    ax.set_ylim(-row - 0.8, row + 0.45)
    ax.set_aspect("auto")
    ax.axis("off")
    if title:
        ax.set_title(title, fontsize="medium")
    return fig
