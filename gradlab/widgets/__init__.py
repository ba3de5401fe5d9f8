"""Interactive explorers: move a slider, watch the modified gradient change in place.

An :class:`Explorer` (built by :func:`explore`, or ready-made by :func:`clip_explorer`,
:func:`scale_explorer`, :func:`surrogate_explorer` and :func:`straight_through_explorer`) shows,
for a gradient modification ``op`` with parameters, the elementwise function::

    y = fn(op(x, **params))        on a fixed grid of x
    left panel:   the forward value y                    (unchanged by gradient ops)
    right panel:  dy/dx as the modified backward pass defines it (bold), beside the plain
                  gradient of fn(x) (faint, dashed)

and redraws both panels whenever a slider (or dropdown) moves.

How it is built, and why
------------------------
* **Model, view, renderer.** An explorer's *model* (``gradlab/_explorer_model.py``) turns
  parameter values into curves with gradlab's computation core (``gradlab/_compute.py``, shared
  with :mod:`gradlab.plots`) and needs no widgets; the *view* (:class:`Explorer`,
  ``_view.py``) holds the widgets in an ``ipywidgets.VBox`` (``explorer.box``) and observes
  them; the *renderer* (``_render.py``) draws. The ready-made explorers are declarative specs
  (``_presets.py``), and the slider shorthand is read by ``_controls.py`` with ipywidgets' public
  API only.
* **Render path: a matplotlib Agg figure rendered to PNG bytes in one** ``ipywidgets.Image``
  **that is updated in place.** It needs no frontend extension beyond ipywidgets itself, does not
  touch the kernel's matplotlib backend (no ``%matplotlib widget``), registers no figure with
  pyplot (so nothing is shown twice and ``plt.get_fignums()`` never grows), renders the same in
  JupyterLab, Notebook 7, VS Code and Voila, and the kernel side can be driven and read back in a
  plain pytest process. ipympl's canvas would also update in place, but it requires switching
  the whole notebook to the ipympl backend (every other static plot then becomes a widget that
  GitHub cannot show), and each redraw takes two kernel/browser round trips (``draw_idle`` asks
  the browser, which asks the kernel to render) instead of one.
* **Blitting.** The static parts (axes, ticks, labels, legend) are drawn once; an update restores
  them and draws only the four curves and frames, then encodes the PNG: about 10 ms per update on
  a 2-core machine (``benchmarks/explorer_latency.py``).
  The y limits stay fixed while you move a slider, chosen at construction from the extremes of
  every slider's range, so a scaled gradient visibly grows instead of being rescaled away; they
  only widen if a setting ever leaves them.
* **No retracing.** The forward values and both gradients come from one ``tf.function`` per
  combination of non-numeric choices, taking the numeric parameters as tensors: moving a slider
  calls the same concrete graph again (``Explorer.tracing_count()`` stays put).
* **Throttling.** ipywidgets' own message throttle in the browser keeps at most one state update
  per widget in flight and merges later slider positions until the kernel is idle again, so a
  fast drag never builds a backlog; each kernel update is a few milliseconds.
* **Impossible settings** are either unreachable (the clip interval is one ``FloatRangeSlider``,
  whose lower handle cannot pass the upper one) or, for an explorer whose op rejects a setting,
  the op's own error message appears in a label under the plot, which keeps showing the last
  valid setting. An observer never raises into the notebook.
* **On GitHub**, where widgets do not render, an explorer's output also carries a PNG of its
  initial setting, and :meth:`Explorer.snapshot` returns a static image of any setting to show
  under the interactive cell.

Importing this module imports ipywidgets and matplotlib (``import gradlab`` alone does not).

Example:
  >>> import gradlab.widgets
  >>> explorer = gradlab.widgets.scale_explorer(factor=0.5)
  >>> float(explorer.data()["gradient"].max())            # 0.5 * tanh'(0)
  0.5
  >>> explorer.sliders["factor"].value = -1.0             # what a slider move does
  >>> float(explorer.data()["gradient"].min())            # reversed
  -1.0
  >>> explorer.close()
"""
from __future__ import annotations

import tensorflow as tf

from gradlab.widgets._presets import CLIP, SCALE, ST_BACKWARDS, ST_FORWARDS, STRAIGHT_THROUGH, SURROGATE, build
from gradlab.widgets._view import CSS_CLASS as CSS_CLASS  # the outer box's CSS class (tests, benchmarks)
from gradlab.widgets._view import Explorer, explore

__all__ = [
    "Explorer",
    "explore",
    "clip_explorer",
    "scale_explorer",
    "surrogate_explorer",
    "straight_through_explorer",
    "ST_FORWARDS",
    "ST_BACKWARDS",
]


def clip_explorer(clip_min: float = -0.5, clip_max: float = 0.5, *, fn=tf.sin, **kwargs) -> Explorer:
    """Explores :func:`gradlab.clip_gradient`: one range slider for ``[clip_min, clip_max]``.

    ``y = fn(clip_gradient(x, clip_min, clip_max))``: the forward value is ``fn(x)``, the
    gradient is ``clip(fn'(x), clip_min, clip_max)``. With the default ``fn = tf.sin`` the
    gradient ``cos(x)`` has both signs, so both bounds visibly act. The two handles of one
    ``FloatRangeSlider`` cannot cross, so ``clip_min > clip_max`` cannot be set.

    Args:
      clip_min: the initial lower bound, in [-1.5, 1.5].
      clip_max: the initial upper bound, in [clip_min, 1.5].
      fn: the elementwise function the gradient flows back through.
      **kwargs: other arguments of :func:`explore` (``x``, ``title``, ``figsize``, ``dpi``...).

    Returns:
      An :class:`Explorer` with ``sliders["clip"]``, whose value is ``(clip_min, clip_max)``.

    Raises:
      ValueError: if a bound is outside [-1.5, 1.5] or ``clip_min > clip_max``.

    Example:
      >>> import gradlab.widgets
      >>> explorer = gradlab.widgets.clip_explorer(-0.25, 0.5)
      >>> g = explorer.data()["gradient"]
      >>> float(g.min()), float(g.max())
      (-0.25, 0.5)
      >>> explorer.close()
    """
    return build(CLIP, {"clip": (clip_min, clip_max)}, fn=fn, kwargs=kwargs)


def scale_explorer(factor: float = 0.5, *, fn=tf.tanh, **kwargs) -> Explorer:
    """Explores :func:`gradlab.scale_gradient`: a slider for ``factor`` in [-2, 2].

    ``y = fn(scale_gradient(x, factor))``: the forward value is ``fn(x)``, the gradient
    ``factor * fn'(x)``; ``0`` sends back zeros, a negative factor reverses it.

    Args:
      factor: the initial factor, in [-2, 2].
      fn: the elementwise function the gradient flows back through.
      **kwargs: other arguments of :func:`explore`.

    Returns:
      An :class:`Explorer` with ``sliders["factor"]``.

    Raises:
      ValueError: if ``factor`` is outside [-2, 2].

    Example:
      >>> import gradlab.widgets
      >>> explorer = gradlab.widgets.scale_explorer(2.0)
      >>> float(explorer.data()["gradient"].max()), float(explorer.data()["plain_gradient"].max())
      (2.0, 1.0)
      >>> explorer.close()
    """
    return build(SCALE, {"factor": factor}, fn=fn, kwargs=kwargs)


def surrogate_explorer(width: float = 1.0, **kwargs) -> Explorer:
    """Explores :func:`gradlab.surrogate_step`: a slider for the surrogate's half-width.

    ``y = surrogate_step(x, width)``: the forward value is the step ``1[x > 0]``; the gradient
    is the triangle ``max(0, 1 - |x| / width)`` instead of the step's true derivative, 0 (the
    faint line).

    Args:
      width: the initial half-width of the triangle, in [0.1, 3] (units of x).
      **kwargs: other arguments of :func:`explore`.

    Returns:
      An :class:`Explorer` with ``sliders["width"]``.

    Raises:
      ValueError: if ``width`` is outside [0.1, 3].

    Example:
      >>> import gradlab.widgets
      >>> explorer = gradlab.widgets.surrogate_explorer(width=0.5)
      >>> float(explorer.data()["gradient"].max()), float(explorer.data()["plain_gradient"].max())
      (1.0, 0.0)
      >>> explorer.close()
    """
    return build(SURROGATE, {"width": width}, fn=None, kwargs=kwargs)


def straight_through_explorer(forward: str = "round", backward: str = "identity",
                              **kwargs) -> Explorer:
    """Explores :func:`gradlab.straight_through`: dropdowns for the forward and backward functions.

    ``y = straight_through(forward(x), backward(x))``: the value is ``forward(x)`` bitwise, the
    gradient is ``backward'(x)``; the faint line is ``forward``'s own gradient (0: these forward
    functions are flat almost everywhere, which is why the trick is needed).

    Args:
      forward: a key of :data:`ST_FORWARDS` (``"round"``, ``"sign"``, ``"step (x > 0)"``,
        ``"floor"``).
      backward: a key of :data:`ST_BACKWARDS` (``"identity"``, ``"tanh"``,
        ``"hard tanh (clip to [-1, 1])"``, ``"sigmoid"``).
      **kwargs: other arguments of :func:`explore`.

    Returns:
      An :class:`Explorer` with ``sliders["forward"]`` and ``sliders["backward"]`` (dropdowns).

    Raises:
      ValueError: if ``forward`` or ``backward`` is not one of the choices.

    Example:
      >>> import gradlab.widgets
      >>> explorer = gradlab.widgets.straight_through_explorer("sign", "hard tanh (clip to [-1, 1])")
      >>> d = explorer.data()
      >>> sorted(set(d["forward"].tolist())), float(d["gradient"][0]), float(d["gradient"][200])
      ([-1.0, 0.0, 1.0], 0.0, 1.0)
      >>> explorer.close()
    """
    return build(STRAIGHT_THROUGH, {"forward": forward, "backward": backward}, fn=None, kwargs=kwargs)
