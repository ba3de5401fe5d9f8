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

The values and gradients come from gradlab's one computation core (``gradlab/_compute.py``), which
the explorers of :mod:`gradlab.widgets` use too; :func:`computation_graph` is drawn by
``gradlab/_graph_figure.py``. Importing this module imports matplotlib (``import gradlab`` alone
does not).
"""
from __future__ import annotations

import math
from typing import Callable, Mapping, Optional, Sequence, Union

import matplotlib.pyplot as plt
import numpy as np
import tensorflow as tf
from matplotlib.axes import Axes
from matplotlib.figure import Figure
from matplotlib.lines import Line2D

from gradlab import _compute, _graph_figure
from gradlab import _validation as v
from gradlab._compute import finite_or_nan, grid, layer_gradient_norms
from gradlab._graph_figure import computation_graph

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
DEFAULT_X = _compute.DEFAULT_X

#: Line styles: the plain (unmodified) gradient is faint, the modified curves are bold.
PLAIN_STYLE = {"color": "0.55", "linestyle": "--", "linewidth": 1.6, "alpha": 0.9}
FORWARD_STYLE = {"color": "C0", "linewidth": 2.0}
GRADIENT_STYLE = {"color": "C1", "linewidth": 2.0}
_AXIS_STYLE = {"color": "0.85", "linewidth": 0.8, "zorder": 0}
#: Colours of :func:`computation_graph`: forward as the forward curves, gradients as the gradient
#: curves, and the modified op (its edge, label, backward arrow and rule) in a third colour.
GRAPH_COLORS = _graph_figure.GRAPH_COLORS

ElementwiseFn = Callable[[tf.Tensor], tf.Tensor]


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
    y, g = _compute.curves({"fn": fn}, grid(x), {})["fn"]
    return y.numpy(), g.numpy()


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
                f"got {v.describe(axes)}."
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
            (lines[key],) = ax.plot(x, finite_or_nan(arrays[key]), label=labels[key], **styles[key])
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
        raise TypeError(f"overlay must be True or False; got {v.describe(overlay)}.")
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
        v.check_figsize(figsize)
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
        f"got {v.describe(axes)}."
    )


def _norm_values(norms, argname: str) -> tuple[list[str], np.ndarray]:
    if isinstance(norms, Mapping):
        names = [str(key) for key in norms]
        raw = list(norms.values())
    elif isinstance(norms, (str, bytes)) or not hasattr(norms, "__iter__"):
        raise TypeError(
            f"{argname} must be a dict {{layer name: norm}} or a list of norms; "
            f"got {v.describe(norms)}."
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
                f"{argname}[{key!r}] must be a number or a scalar tensor; got {v.describe(value)}."
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
        raise TypeError(f"log must be True or False; got {v.describe(log)}.")
    if ax is None:
        v.check_figsize(figsize)
        fig, ax = plt.subplots(figsize=figsize, layout="constrained")
        plt.close(fig)
    elif not isinstance(ax, Axes):
        raise TypeError(f"ax must be a matplotlib Axes or None; got {v.describe(ax)}.")
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
