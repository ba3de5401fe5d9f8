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

import base64
import functools
import html
import itertools
import math
import numbers
import struct
import zlib
from typing import Any, Callable, Mapping, Optional

import ipywidgets as widgets
import numpy as np
import tensorflow as tf
from IPython.display import Image as DisplayImage
from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.figure import Figure

from gradlab import _validation as v
from gradlab import ops, plots

__all__ = [
    "Explorer",
    "explore",
    "clip_explorer",
    "scale_explorer",
    "surrogate_explorer",
    "straight_through_explorer",
]

#: CSS class of every explorer's outer box (the browser test and benchmark look for it).
CSS_CLASS = "gradlab-explorer"

_CURVES = ("plain_forward", "plain_gradient", "forward", "gradient")  # drawing order
_MAX_SWEEP = 64  # at most this many parameter combinations when choosing the y limits
_SLIDER_STYLE = {"description_width": "initial"}
_SLIDER_LAYOUT = {"width": "460px"}


def _is_number(value: Any) -> bool:
    return isinstance(value, numbers.Real) and not isinstance(value, (bool, np.bool_))


def _is_numeric(value: Any) -> bool:
    """A number or a tuple/list of numbers (a range slider's value): passed to ``op`` as a tensor."""
    if _is_number(value):
        return True
    return isinstance(value, (tuple, list)) and len(value) > 0 and all(map(_is_number, value))


def _freeze(static: Mapping[str, Any]) -> tuple:
    """A cache key for the non-numeric parameter values."""
    items = []
    for name, value in sorted(static.items()):
        try:
            hash(value)
        except TypeError:
            value = ("id", id(value))
        items.append((name, value))
    return tuple(items)


def _png_chunk(tag: bytes, data: bytes) -> bytes:
    return struct.pack(">I", len(data)) + tag + data + struct.pack(">I", zlib.crc32(tag + data))


def _png(rgba: np.ndarray) -> bytes:
    """PNG bytes of an RGBA buffer, alpha dropped (the figure background is opaque).

    A minimal encoder (8-bit RGB, no row filters, zlib level 1): about twice as fast as Pillow's
    adaptive-filter encoder on these mostly white plots, which matters at every slider step.
    """
    height, width = rgba.shape[:2]
    raw = np.empty((height, 1 + 3 * width), np.uint8)
    raw[:, 0] = 0  # filter type "None" for every row
    raw[:, 1:] = rgba[..., :3].reshape(height, 3 * width)
    header = struct.pack(">IIBBBBB", width, height, 8, 2, 0, 0, 0)  # 8-bit RGB, no interlace
    return b"".join((
        b"\x89PNG\r\n\x1a\n",
        _png_chunk(b"IHDR", header),
        _png_chunk(b"IDAT", zlib.compress(raw.tobytes(), 1)),
        _png_chunk(b"IEND", b""),
    ))


def _finite_range(arrays) -> Optional[tuple[float, float]]:
    values = np.concatenate([np.ravel(a) for a in arrays]).astype(np.float64)
    values = values[np.isfinite(values)]
    if values.size == 0:
        return None
    return float(values.min()), float(values.max())


def _padded(low: float, high: float) -> tuple[float, float]:
    span = high - low
    if span <= 1e-6 * max(1.0, abs(low), abs(high)):
        half = max(0.5, 0.1 * abs(low))
        return low - half, high + half
    return low - 0.08 * span, high + 0.08 * span


def _widget_for(name: str, spec: Any) -> widgets.ValueWidget:
    """A widget from a spec: a ValueWidget, ``(min, max[, step[, value]])``, or a list of choices."""
    if isinstance(spec, widgets.fixed):
        raise TypeError(
            f"params[{name!r}] is ipywidgets.fixed; pass a fixed value through a closure in op "
            "instead (an explorer's parameters are the ones you move)."
        )
    if isinstance(spec, widgets.ValueWidget):
        widget = spec
    elif isinstance(spec, tuple) and len(spec) == 4 and all(map(_is_number, spec)):
        low, high, step, value = spec
        cls = widgets.IntSlider if all(isinstance(s, numbers.Integral) for s in spec) else widgets.FloatSlider
        if not low <= value <= high or step <= 0:
            raise ValueError(
                f"params[{name!r}] = (min, max, step, value) needs min <= value <= max and step > 0; "
                f"got {spec!r}."
            )
        widget = cls(min=low, max=high, step=step, value=value)
    else:
        try:
            widget = widgets.interactive.widget_from_abbrev(spec)
        except (TypeError, ValueError) as err:
            raise ValueError(f"params[{name!r}] = {spec!r} is not a valid slider spec: {err}") from None
        if not isinstance(widget, widgets.ValueWidget):
            raise TypeError(
                f"params[{name!r}] must be an ipywidgets value widget (FloatSlider, "
                "FloatRangeSlider, Dropdown...), a tuple (min, max[, step[, value]]) or a list of "
                f"choices; got {v._describe(spec)}."
            )
    if not getattr(widget, "description", ""):
        widget.description = name
    return widget


def _candidates(widget: widgets.ValueWidget) -> list:
    """Values of one widget worth visiting when choosing fixed y limits: the ends and the value."""
    value = widget.value
    if isinstance(widget, widgets.FloatLogSlider):
        found = [widget.base ** widget.min, value, widget.base ** widget.max]
    elif _is_number(value) and _is_number(getattr(widget, "min", None)):
        found = [widget.min, value, widget.max]
    elif (isinstance(value, tuple) and len(value) == 2 and _is_number(getattr(widget, "min", None))):
        low, high = widget.min, widget.max
        found = [(low, low), (low, high), (high, high), value]
    elif isinstance(value, bool):
        found = [False, True]
    else:
        found = list(getattr(widget, "_options_values", None) or [value])
    unique = []
    for item in found:
        if not any(item is seen or (type(item) is type(seen) and _safe_equal(item, seen)) for seen in unique):
            unique.append(item)
    return unique


def _safe_equal(a, b) -> bool:
    try:
        return bool(a == b)
    except Exception:  # e.g. arrays
        return False


class Explorer(widgets.VBox):
    """A widget that plots ``fn(op(x, **params))`` and its modified gradient, redrawn in place.

    Build it with :func:`explore` (or a ready-made ``*_explorer``); display it as a cell's value.

    The curves on display are always those of the current widget values, computed by TensorFlow
    with the op's own backward pass::

        forward        = fn(op(x, **params))
        gradient       = d sum(forward) / dx      (the modified gradient)
        plain_forward  = plain(x, **params)       (default fn(x))
        plain_gradient = d sum(plain_forward) / dx

    Attributes:
      sliders: ``{parameter name: widget}``; set ``explorer.sliders[name].value`` to drive it from
        code exactly as a slider move in the browser does.
      image: the ``ipywidgets.Image`` that shows the plot (its ``value`` is the PNG).
      status: the ``ipywidgets.HTML`` label under the plot that shows messages.
      figure: the matplotlib Figure behind the image (not managed by pyplot).
      lines: ``{"forward", "gradient", "plain_forward", "plain_gradient": Line2D}``.
    """

    def __init__(
        self,
        op: Callable[..., tf.Tensor],
        params: Mapping[str, Any],
        *,
        fn: Optional[Callable[[tf.Tensor], tf.Tensor]] = tf.tanh,
        plain: Optional[Callable[..., tf.Tensor]] = None,
        x=None,
        name: Optional[str] = None,
        title: Optional[str] = None,
        figsize: tuple[float, float] = (8.0, 3.2),
        dpi: float = 100,
    ):
        v.check_callable(op, "op")
        if fn is not None:
            v.check_callable(fn, "fn")
        if plain is not None:
            v.check_callable(plain, "plain")
        if not isinstance(params, Mapping):
            raise TypeError(
                "params must be a dict {parameter name: slider}, e.g. "
                f"{{'factor': ipywidgets.FloatSlider(...)}}; got {v._describe(params)}."
            )
        for key in params:
            if not isinstance(key, str) or not key.isidentifier():
                raise ValueError(
                    f"params keys must be op's keyword argument names; got {key!r}."
                )
        if title is not None and not isinstance(title, str):
            raise TypeError(f"title must be a string or None; got {v._describe(title)}.")
        plots._check_figsize(figsize)
        if not (_is_number(dpi) and math.isfinite(dpi) and 20 <= dpi <= 400):
            raise ValueError(f"dpi must be a number in [20, 400]; got {dpi!r}.")

        self._op = op
        self._fn = fn if fn is not None else (lambda t: t)
        self._plain = plain if plain is not None else (lambda t, **_: self._fn(t))
        self._x = plots.grid(x)
        self._x_numpy = self._x.numpy()
        if name is None:
            name = getattr(fn, "__name__", "f") if fn is not None else "f"
            name = name if name.isidentifier() else "f"
        self._name = name
        self._figsize = (float(figsize[0]), float(figsize[1]))
        self._dpi = float(dpi)
        self._title = title
        self._compiled: dict[tuple, Any] = {}
        self._message = ""
        self.sliders = {key: _widget_for(key, spec) for key, spec in params.items()}

        try:
            data = self.compute()
        except Exception as err:
            raise ValueError(
                f"the explorer's initial setting {self.values} fails: {type(err).__name__}: {err}"
            ) from None
        self._data = data
        self._limits = self._sweep_limits(data)

        self.figure, self._canvas, self.lines = self._new_figure(data, title)
        self._apply_limits(self.figure.axes, self._limits)
        self._capture_background()
        self.image = widgets.Image(
            value=self._render(), format="png", width=str(self._pixel_size()[0]),
            layout=widgets.Layout(max_width="100%", height="auto"),
        )
        self.status = widgets.HTML(value="")
        self._controls = widgets.VBox(list(self.sliders.values()))
        for widget in self.sliders.values():
            widget.observe(self._on_change, names="value")
        super().__init__(children=[self._controls, self.image, self.status])
        self.add_class(CSS_CLASS)

    # -- reading the state --------------------------------------------------------------------

    @property
    def values(self) -> dict[str, Any]:
        """The current parameter values, ``{name: widget.value}``."""
        return {key: widget.value for key, widget in self.sliders.items()}

    @property
    def message(self) -> str:
        """The message under the plot ('' when the current setting is valid and finite)."""
        return self._message

    def data(self) -> dict[str, np.ndarray]:
        """Copies of the arrays currently plotted: x, forward, gradient, plain_forward, plain_gradient."""
        return {key: value.copy() for key, value in self._data.items()}

    def tracing_count(self) -> int:
        """How many times TensorFlow traced the computation (one per non-numeric choice)."""
        return sum(f.experimental_get_tracing_count() for f in self._compiled.values())

    def compute(self, **values) -> dict[str, np.ndarray]:
        """The arrays for a setting (current values, overridden by ``values``), without drawing.

        Args:
          **values: parameter values to use instead of the widgets' current ones.

        Returns:
          ``{"x", "forward", "gradient", "plain_forward", "plain_gradient": np.ndarray}``.

        Raises:
          ValueError: if a name is not a parameter, or the op rejects the setting (its own
            message, e.g. ``clip_min must be <= clip_max``).
          TypeError: likewise, from the op.
        """
        unknown = sorted(set(values) - set(self.sliders))
        if unknown:
            raise ValueError(f"unknown parameter(s) {unknown}; this explorer has {sorted(self.sliders)}.")
        merged = {**self.values, **values}
        tensors = {k: tf.constant(val, self._x.dtype) for k, val in merged.items() if _is_numeric(val)}
        static = {k: val for k, val in merged.items() if k not in tensors}
        # The op validates its arguments eagerly (gradlab's ops raise readable ValueErrors here);
        # inside the tf.function the same tensors are symbolic and such checks cannot run.
        self._op(self._x[:1], **static, **tensors)
        result = self._compiled_for(static)(tensors)
        out = {"x": self._x_numpy.copy()}
        out.update({key: result[key].numpy() for key in _CURVES})
        return out

    # -- the computation ----------------------------------------------------------------------

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
        x = self._x
        kwargs = {**static, **tensors}
        with tf.GradientTape(persistent=True) as tape:
            tape.watch(x)
            forward = tf.convert_to_tensor(self._fn(self._op(x, **kwargs)))
            plain = tf.convert_to_tensor(self._plain(x, **kwargs))
        out = {}
        for key, value in (("forward", forward), ("plain_forward", plain)):
            if not value.dtype.is_floating or value.shape != x.shape:
                what = "fn(op(x, ...))" if key == "forward" else "plain(x, ...)"
                raise ValueError(
                    f"{what} must be elementwise: a float tensor of x's shape {x.shape}; got "
                    f"{value.dtype.name} of shape {value.shape}."
                )
            gradient = tape.gradient(value, x)
            gradient = tf.zeros_like(x) if gradient is None else tf.cast(gradient, x.dtype)
            out[key] = tf.cast(value, x.dtype)
            out[key.replace("forward", "gradient")] = gradient
        return out

    # -- the figure -----------------------------------------------------------------------------

    def _new_figure(self, data, title):
        figure = Figure(figsize=self._figsize, dpi=self._dpi, layout="constrained")
        canvas = FigureCanvasAgg(figure)
        axes = figure.subplots(1, 2)
        lines = plots.draw_forward_and_gradient(
            axes, data["x"], data["forward"], data["gradient"],
            plain_forward=data["plain_forward"], plain_gradient=data["plain_gradient"],
            name=self._name,
        )
        figure.legend(handles=[lines["forward"], lines["gradient"], lines["plain_gradient"]],
                      loc="outside lower center", ncols=3, frameon=False, fontsize="small")
        if title:
            figure.suptitle(title, fontsize="medium")
        for ax in axes:
            ax.set_xlim(float(data["x"].min()), float(data["x"].max()))
        return figure, canvas, lines

    def _pixel_size(self) -> tuple[int, int]:
        width, height = self._canvas.get_width_height()
        return int(width), int(height)

    def _sweep_limits(self, data) -> list[tuple[float, float]]:
        """Fixed y limits (forward, gradient) covering every slider's extremes."""
        names = list(self.sliders)
        options = [_candidates(self.sliders[k]) for k in names]
        if math.prod(len(o) for o in options) <= _MAX_SWEEP:
            settings = [dict(zip(names, combo)) for combo in itertools.product(*options)]
        else:  # one parameter at a time around the current setting
            settings = [{k: val} for k, opts in zip(names, options) for val in opts]
        forwards, gradients = [data["forward"], data["plain_forward"]], [data["gradient"], data["plain_gradient"]]
        for setting in settings:
            try:
                swept = self.compute(**setting)
            except Exception:  # an invalid corner (e.g. clip_min > clip_max): skip it
                continue
            forwards += [swept["forward"], swept["plain_forward"]]
            gradients += [swept["gradient"], swept["plain_gradient"]]
        limits = []
        for arrays in (forwards, gradients):
            found = _finite_range(arrays)
            limits.append(_padded(*found) if found else (-1.0, 1.0))
        return limits

    @staticmethod
    def _apply_limits(axes, limits) -> None:
        for ax, (low, high) in zip(axes, limits):
            ax.set_ylim(low, high)

    def _dynamic_artists(self) -> list:
        """What :meth:`_render` draws over the background, in a full draw's order: the curves,
        then the axes frames (which a full draw puts over the curves)."""
        spines = [spine for ax in self.figure.axes for spine in ax.spines.values()]
        return [self.lines[key] for key in _CURVES] + spines

    def _capture_background(self) -> None:
        dynamic = self._dynamic_artists()
        for artist in dynamic:
            artist.set_visible(False)
        self._canvas.draw()
        self._background = self._canvas.copy_from_bbox(self.figure.bbox)
        for artist in dynamic:
            artist.set_visible(True)

    def _render(self) -> bytes:
        """Restores the static background, draws the curves on it and returns the PNG."""
        self._canvas.restore_region(self._background)
        for artist in self._dynamic_artists():
            artist.axes.draw_artist(artist)
        return _png(np.asarray(self._canvas.buffer_rgba()))

    def _show(self, data) -> None:
        for key in _CURVES:
            self.lines[key].set_ydata(plots._finite_or_nan(data[key]))
        widened = False
        for i, keys in enumerate((("forward", "plain_forward"), ("gradient", "plain_gradient"))):
            found = _finite_range([data[k] for k in keys])
            low, high = self._limits[i]
            if found and (found[0] < low or found[1] > high):
                self._limits[i] = _padded(min(low, found[0]), max(high, found[1]))
                widened = True
        if widened:
            self._apply_limits(self.figure.axes, self._limits)
            self._capture_background()
        self.image.value = self._render()

    def _set_message(self, text: str) -> None:
        self._message = text
        self.status.value = (
            "" if not text else
            f'<span style="color:#a4262c">&#9888; {html.escape(text)}</span>'
        )

    # -- updates ------------------------------------------------------------------------------

    def _on_change(self, change) -> None:
        self.refresh()

    def refresh(self) -> None:
        """Recomputes and redraws for the current widget values (the slider observers call this).

        Never raises: a setting the op rejects leaves the last valid plot and shows the op's
        message in :attr:`status` (and :attr:`message`).
        """
        try:
            data = self.compute()
        except Exception as err:  # shown, not raised: an observer must not spray tracebacks
            text = str(err).strip() or type(err).__name__
            if not isinstance(err, (ValueError, TypeError, tf.errors.OpError)):
                text = f"{type(err).__name__}: {text}"
            self._set_message(f"{text} (the plot shows the last valid setting)")
            return
        self._data = data
        self._show(data)
        bad = sum(int(np.count_nonzero(~np.isfinite(data[k]))) for k in ("forward", "gradient"))
        self._set_message(f"{bad} values are inf or nan and are not drawn" if bad else "")

    # -- static output ------------------------------------------------------------------------

    def snapshot(self, **values) -> DisplayImage:
        """A static PNG of the plot at a setting (the current one, overridden by ``values``).

        Put it under the interactive cell so that readers on GitHub, where widgets do not
        render, see a representative picture; the sliders are not moved.

        Raises:
          ValueError, TypeError: as :meth:`compute`.
        """
        data = self.compute(**values)
        figure, canvas, _ = self._new_figure(data, self._title)
        limits = []
        for (low, high), keys in zip(self._limits, (("forward", "plain_forward"),
                                                    ("gradient", "plain_gradient"))):
            found = _finite_range([data[k] for k in keys]) or (low, high)
            limits.append((low, high) if found[0] >= low and found[1] <= high
                          else _padded(min(low, found[0]), max(high, found[1])))
        self._apply_limits(figure.axes, limits)
        canvas.draw()
        return DisplayImage(data=_png(np.asarray(canvas.buffer_rgba())), format="png")

    def __repr__(self) -> str:
        # Short and stable (no model ids or addresses): it is the text/plain of the cell output.
        shown = {
            key: widget.label if isinstance(widget, widgets.widget_selection._Selection) else widget.value
            for key, widget in getattr(self, "sliders", {}).items()
        }
        return "Explorer(" + ", ".join(f"{key}={value!r}" for key, value in shown.items()) + ")"

    def _repr_mimebundle_(self, **kwargs):
        bundle = super()._repr_mimebundle_(**kwargs)
        if bundle is not None and self.image.value:
            # Frontends that cannot render widgets (GitHub, nbconvert without widget state)
            # fall back to this picture of the current setting.
            bundle["image/png"] = base64.b64encode(self.image.value).decode("ascii")
        return bundle

    def close(self) -> None:
        """Closes the explorer and the widgets it shows (sliders included)."""
        # getattr: Widget.__del__ also calls close(), even on an explorer whose __init__ failed.
        owned = [*getattr(self, "sliders", {}).values()]
        owned += [getattr(self, name, None) for name in ("image", "status", "_controls")]
        for widget in owned:
            if widget is not None:
                widget.close()
        super().close()


def explore(
    op: Callable[..., tf.Tensor],
    params: Mapping[str, Any],
    *,
    fn: Optional[Callable[[tf.Tensor], tf.Tensor]] = tf.tanh,
    plain: Optional[Callable[..., tf.Tensor]] = None,
    x=None,
    name: Optional[str] = None,
    title: Optional[str] = None,
    figsize: tuple[float, float] = (8.0, 3.2),
    dpi: float = 100,
) -> Explorer:
    """An interactive explorer of a gradient modification with parameters.

    Plots, on a fixed grid ``x``, ::

        forward:   y = fn(op(x, **params))
        gradient:  dy/dx, as the op's backward pass defines it   (bold)
        plain:     d fn(x) / dx, or of plain(x, **params)         (faint, dashed)

    with one widget per parameter; moving one redraws both panels in place.

    Args:
      op: the gradient modification, called as ``op(x, **params)``: a gradlab op such as
        ``gradlab.scale_gradient`` (parameter ``factor``) or any function of ``x`` and the
        parameters. Numeric parameter values (numbers, or a range slider's ``(low, high)``) reach
        it as float tensors (a ``(low, high)`` pair as a tensor of shape ``[2]``); other values
        (a dropdown's choice) as they are.
      params: ``{name: widget}``: an ipywidgets value widget (``FloatSlider``,
        ``FloatRangeSlider``, ``Dropdown``...), a tuple ``(min, max[, step[, value]])`` or a list
        of choices (ipywidgets' ``interact`` abbreviations). Names are ``op``'s keyword arguments.
      fn: the elementwise function the op feeds, e.g. ``tf.tanh`` or ``tf.sin``; None for
        ``op(x)`` itself.
      plain: the function whose gradient is drawn faintly, ``plain(x, **params)``; by default
        ``fn(x)``, i.e. the same function without the op.
      x: the grid, a 1-D array; 401 points on [-3, 3] when None.
      name: the function's name in the axis titles; ``fn.__name__`` when None.
      title: a title over the figure.
      figsize: figure size in inches.
      dpi: pixels per inch of the image (100 gives 800 x 320 pixels for the default size).

    Returns:
      An :class:`Explorer`, an ``ipywidgets.VBox``: display it as a cell's value.

    Raises:
      TypeError: if ``op``, ``fn`` or ``plain`` is not callable, ``params`` is not a dict, or a
        spec cannot become a widget.
      ValueError: if a name is not an identifier, ``x``/``figsize``/``dpi`` is invalid, or the
        initial setting fails.

    Example:
      >>> import gradlab, gradlab.widgets, ipywidgets
      >>> explorer = gradlab.widgets.explore(
      ...     gradlab.clip_gradient, {"clip_min": (-1.0, 1.0, 0.1, -0.5),
      ...                             "clip_max": (-1.0, 1.0, 0.1, 0.5)})
      >>> float(explorer.data()["gradient"].max())    # tanh' <= 1, clipped at 0.5
      0.5
      >>> explorer.sliders["clip_min"].value = 0.8     # above clip_max: shown, not raised
      >>> explorer.message.startswith("clip_min must be <= clip_max")
      True
      >>> explorer.close()
    """
    return Explorer(op, params, fn=fn, plain=plain, x=x, name=name, title=title,
                    figsize=figsize, dpi=dpi)


# -- ready-made explorers ---------------------------------------------------------------------------


def _in_range(value, name: str, low: float, high: float) -> float:
    value = v.scalar(value, name)
    if not isinstance(value, float):
        raise TypeError(f"{name} must be a Python number for an explorer; got {v._describe(value)}.")
    if not low <= value <= high:
        raise ValueError(f"{name} must be in the slider's range [{low:g}, {high:g}]; got {value!r}.")
    return value


def _clip_interval(x, clip):
    return ops.clip_gradient(x, clip[0], clip[1])


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
    clip_min = _in_range(clip_min, "clip_min", -1.5, 1.5)
    clip_max = _in_range(clip_max, "clip_max", -1.5, 1.5)
    v.check_clip_order(clip_min, clip_max)
    slider = widgets.FloatRangeSlider(
        value=(clip_min, clip_max), min=-1.5, max=1.5, step=0.05, readout_format=".2f",
        description="clip interval [min, max]",
        tooltip=("clip_min and clip_max: each element of the gradient dL/dx is clipped to this "
                 "interval (gradient units). The forward pass does not change."),
        continuous_update=True, style=_SLIDER_STYLE, layout=widgets.Layout(**_SLIDER_LAYOUT),
    )
    name = getattr(fn, "__name__", "f") if fn is not None else "x"
    kwargs.setdefault("title", f"y = {name}(clip_gradient(x, clip_min, clip_max))")
    return explore(_clip_interval, {"clip": slider}, fn=fn, **kwargs)


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
    factor = _in_range(factor, "factor", -2.0, 2.0)
    slider = widgets.FloatSlider(
        value=factor, min=-2.0, max=2.0, step=0.1, readout_format=".1f",
        description="gradient factor ×",
        tooltip=("factor (dimensionless): the backward pass multiplies the gradient by it; 0 stops "
                 "the gradient, a negative factor reverses it. The forward pass does not change."),
        continuous_update=True, style=_SLIDER_STYLE, layout=widgets.Layout(**_SLIDER_LAYOUT),
    )
    name = getattr(fn, "__name__", "f") if fn is not None else "x"
    kwargs.setdefault("title", f"y = {name}(scale_gradient(x, factor))")
    return explore(ops.scale_gradient, {"factor": slider}, fn=fn, **kwargs)


def _heaviside(x, **_):
    return tf.cast(x > 0, x.dtype)


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
    width = _in_range(width, "width", 0.1, 3.0)
    slider = widgets.FloatSlider(
        value=width, min=0.1, max=3.0, step=0.05, readout_format=".2f",
        description="surrogate half-width",
        tooltip=("width (units of x): the surrogate derivative is the triangle "
                 "max(0, 1 - |x| / width), nonzero on (-width, width). The forward step does not "
                 "change."),
        continuous_update=True, style=_SLIDER_STYLE, layout=widgets.Layout(**_SLIDER_LAYOUT),
    )
    kwargs.setdefault("title", "y = surrogate_step(x, width)")
    kwargs.setdefault("name", "step")
    return explore(ops.surrogate_step, {"width": slider}, fn=None, plain=_heaviside, **kwargs)


def _hard_tanh(x):
    return tf.clip_by_value(x, -1.0, 1.0)


def _identity(x):
    return tf.identity(x)


#: Forward functions of :func:`straight_through_explorer` (flat almost everywhere: no gradient).
ST_FORWARDS: dict[str, Callable] = {
    "round": tf.round,
    "sign": tf.sign,
    "step (x > 0)": _heaviside,
    "floor": tf.math.floor,
}
#: Backward functions of :func:`straight_through_explorer` (their gradient is the one sent back).
ST_BACKWARDS: dict[str, Callable] = {
    "identity": _identity,
    "tanh": tf.tanh,
    "hard tanh (clip to [-1, 1])": _hard_tanh,
    "sigmoid": tf.sigmoid,
}


def _straight_through(x, forward, backward):
    return ops.straight_through(forward(x), backward(x))


def _forward_only(x, forward, backward):
    return forward(x)


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
    for arg, value, choices in (("forward", forward, ST_FORWARDS), ("backward", backward, ST_BACKWARDS)):
        if value not in choices:
            raise ValueError(f"{arg} must be one of {list(choices)}; got {value!r}.")
    common = {"style": _SLIDER_STYLE, "layout": widgets.Layout(**_SLIDER_LAYOUT)}
    forward_widget = widgets.Dropdown(
        options=list(ST_FORWARDS.items()), value=ST_FORWARDS[forward], description="forward (value)",
        tooltip="The function whose value the op returns, bitwise (flat almost everywhere).",
        **common,
    )
    backward_widget = widgets.Dropdown(
        options=list(ST_BACKWARDS.items()), value=ST_BACKWARDS[backward],
        description="backward (gradient)",
        tooltip="The function whose gradient the op sends back in place of forward's.",
        **common,
    )
    kwargs.setdefault("title", "y = straight_through(forward(x), backward(x))")
    kwargs.setdefault("name", "q")
    return explore(_straight_through, {"forward": forward_widget, "backward": backward_widget},
                   fn=None, plain=_forward_only, **kwargs)
