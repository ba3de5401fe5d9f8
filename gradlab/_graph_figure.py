"""The computation graph picture of :func:`gradlab.plots.computation_graph` (private module).

A chain of ops drawn with matplotlib: forward values flowing right above it, gradients flowing left
below it, and the op whose backward rule is replaced marked in red.
"""
from __future__ import annotations

import numbers
from typing import Optional, Sequence

import matplotlib.pyplot as plt
import numpy as np
from matplotlib.axes import Axes
from matplotlib.figure import Figure
from matplotlib.patches import FancyArrowPatch

from gradlab import _validation as v

#: Colours: forward as the forward curves, gradients as the gradient curves, and the modified op
#: (its edge, label, backward arrow and rule) in a third colour.
GRAPH_COLORS = {"forward": "C0", "backward": "C1", "modified": "C3", "edge": "0.35"}


def _string_list(value, name: str, length: Optional[int], what: str) -> Optional[list[str]]:
    """``value`` as a list of strings (None stays None), or raises naming ``name``."""
    if value is None:
        return None
    if isinstance(value, (str, bytes)) or not isinstance(value, Sequence):
        raise TypeError(f"{name} must be a list of strings, {what}; got {v.describe(value)}.")
    items = list(value)
    for i, item in enumerate(items):
        if not isinstance(item, str):
            raise TypeError(f"{name}[{i}] must be a string; got {v.describe(item)}.")
    if length is not None and len(items) != length:
        raise ValueError(f"{name} must have {length} entries, {what}; got {len(items)}: {items!r}.")
    return items


def _optional_str(value, name: str) -> Optional[str]:
    if value is not None and not isinstance(value, str):
        raise TypeError(f"{name} must be a string or None; got {v.describe(value)}.")
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
                f"modified must be an edge index (an int) or None; got {v.describe(modified)}."
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
        raise TypeError(f"ax must be a matplotlib Axes or None; got {v.describe(ax)}.")
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
