"""The explorers' renderer: a matplotlib Agg figure, blitted and encoded to PNG (private).

The static parts (axes, ticks, labels, legend) are drawn once; an update restores them and draws
only the four curves and the frames, then encodes the PNG (:func:`gradlab.widgets._png.png`). The
figure is never registered with pyplot. The y limits stay fixed while the curves stay inside them
and widen (with one full redraw of the background) when they leave them.
"""
from __future__ import annotations

from typing import Mapping, Optional

import numpy as np
from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.figure import Figure

from gradlab import plots
from gradlab._compute import finite_or_nan
from gradlab._explorer_model import CURVES, Limits, limits_of
from gradlab.widgets._png import png


def _figure(data: Mapping[str, np.ndarray], *, name: str, title: Optional[str], figsize, dpi):
    """A new Agg figure with both panels drawn: ``(figure, canvas, lines)``."""
    figure = Figure(figsize=figsize, dpi=dpi, layout="constrained")
    canvas = FigureCanvasAgg(figure)
    axes = figure.subplots(1, 2)
    lines = plots.draw_forward_and_gradient(
        axes, data["x"], data["forward"], data["gradient"],
        plain_forward=data["plain_forward"], plain_gradient=data["plain_gradient"], name=name,
    )
    figure.legend(handles=[lines["forward"], lines["gradient"], lines["plain_gradient"]],
                  loc="outside lower center", ncols=3, frameon=False, fontsize="small")
    if title:
        figure.suptitle(title, fontsize="medium")
    for ax in axes:
        ax.set_xlim(float(data["x"].min()), float(data["x"].max()))
    return figure, canvas, lines


def _apply(figure: Figure, limits: Limits) -> None:
    for ax, (low, high) in zip(figure.axes, limits):
        ax.set_ylim(low, high)


class Renderer:
    """Draws an explorer's curves into one figure and returns each frame as PNG bytes.

    Attributes:
      figure: the matplotlib Figure (not managed by pyplot).
      lines: ``{"forward", "gradient", "plain_forward", "plain_gradient": Line2D}``.
      limits: the current y limits, ``[(low, high) forward, (low, high) gradient]``.

    Example:
      >>> import numpy as np
      >>> from gradlab.widgets._render import Renderer
      >>> x = np.linspace(-1.0, 1.0, 5)
      >>> data = {"x": x, "forward": x, "gradient": 2 * x, "plain_forward": x, "plain_gradient": x}
      >>> renderer = Renderer(data, [(-1.0, 1.0), (-2.0, 2.0)], name="f", figsize=(4.0, 2.0), dpi=50)
      >>> renderer.pixel_size, renderer.show(data)[:4]
      ((200, 100), b'\\x89PNG')
    """

    def __init__(self, data: Mapping[str, np.ndarray], limits: Limits, *, name: str,
                 title: Optional[str] = None, figsize=(8.0, 3.2), dpi: float = 100):
        self._style = {"name": name, "title": title, "figsize": figsize, "dpi": dpi}
        self.figure, self._canvas, self.lines = _figure(data, **self._style)
        self.limits = list(limits)
        _apply(self.figure, self.limits)
        self._capture_background()

    @property
    def pixel_size(self) -> tuple[int, int]:
        """``(width, height)`` of a frame in pixels."""
        width, height = self._canvas.get_width_height()
        return int(width), int(height)

    def show(self, data: Mapping[str, np.ndarray]) -> bytes:
        """Puts ``data``'s curves on the figure (widening the limits if needed); returns the PNG."""
        for key in CURVES:
            self.lines[key].set_ydata(finite_or_nan(data[key]))
        limits = limits_of(data, self.limits)
        if limits != self.limits:
            self.limits = limits
            _apply(self.figure, limits)
            self._capture_background()
        return self.render()

    def render(self) -> bytes:
        """Restores the static background, draws the curves on it and returns the PNG."""
        self._canvas.restore_region(self._background)
        for artist in self._dynamic_artists():
            artist.axes.draw_artist(artist)
        return png(np.asarray(self._canvas.buffer_rgba()))

    def snapshot(self, data: Mapping[str, np.ndarray]) -> bytes:
        """PNG of ``data`` in a figure of its own (full draw), within the current limits if it fits."""
        figure, canvas, _ = _figure(data, **self._style)
        _apply(figure, limits_of(data, self.limits))
        canvas.draw()
        return png(np.asarray(canvas.buffer_rgba()))

    def _dynamic_artists(self) -> list:
        """What :meth:`render` draws over the background, in a full draw's order: the curves,
        then the axes frames (which a full draw puts over the curves)."""
        spines = [spine for ax in self.figure.axes for spine in ax.spines.values()]
        return [self.lines[key] for key in CURVES] + spines

    def _capture_background(self) -> None:
        dynamic = self._dynamic_artists()
        for artist in dynamic:
            artist.set_visible(False)
        self._canvas.draw()
        self._background = self._canvas.copy_from_bbox(self.figure.bbox)
        for artist in dynamic:
            artist.set_visible(True)
