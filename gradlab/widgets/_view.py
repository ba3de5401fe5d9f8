"""The explorer on screen: its widgets, their observers, display and lifecycle (private).

An :class:`Explorer` *has* an ``ipywidgets.VBox`` (:attr:`Explorer.box`: the controls, the plot
image and a status line); it is not one. Its model (:class:`gradlab._explorer_model.ExplorerModel`)
computes the curves and its renderer (:class:`gradlab.widgets._render.Renderer`) draws them.
"""
from __future__ import annotations

import base64
import html
import math
from typing import Any, Callable, Mapping, Optional

import ipywidgets as widgets
import numpy as np
import tensorflow as tf
from IPython.display import Image as DisplayImage

from gradlab import _validation as v
from gradlab.widgets._controls import candidates, is_number, shown_value, widget_for
from gradlab._explorer_model import ExplorerModel
from gradlab.widgets._render import Renderer

#: CSS class of every explorer's outer box (the browser test and benchmark look for it).
CSS_CLASS = "gradlab-explorer"


def _widget_bundle(box: widgets.Widget, **kwargs) -> Optional[dict]:
    """A widget's display bundle, on ipywidgets 8 and 7.

    ipywidgets 8 builds it in ``Widget._repr_mimebundle_``. ipywidgets 7 (Colab ships 7.7.1) has no
    such method: a widget displays itself through ``_ipython_display_``, with the same bundle, built
    here from the widget's model id. None for a closed widget.
    """
    if hasattr(box, "_repr_mimebundle_"):
        return box._repr_mimebundle_(**kwargs)
    if box._view_name is None or box.comm is None:
        return None
    view = {"version_major": 2, "version_minor": 0, "model_id": box.model_id}
    return {"text/plain": repr(box), "application/vnd.jupyter.widget-view+json": view}


def _check_arguments(op, params, fn, plain, title, figsize, dpi) -> None:
    v.check_callable(op, "op")
    if fn is not None:
        v.check_callable(fn, "fn")
    if plain is not None:
        v.check_callable(plain, "plain")
    if not isinstance(params, Mapping):
        raise TypeError(
            "params must be a dict {parameter name: slider}, e.g. "
            f"{{'factor': ipywidgets.FloatSlider(...)}}; got {v.describe(params)}."
        )
    for key in params:
        if not isinstance(key, str) or not key.isidentifier():
            raise ValueError(f"params keys must be op's keyword argument names; got {key!r}.")
    if title is not None and not isinstance(title, str):
        raise TypeError(f"title must be a string or None; got {v.describe(title)}.")
    v.check_figsize(figsize)
    if not (is_number(dpi) and math.isfinite(dpi) and 20 <= dpi <= 400):
        raise ValueError(f"dpi must be a number in [20, 400]; got {dpi!r}.")


class Explorer:
    """An interactive plot of ``fn(op(x, **params))`` and its modified gradient, redrawn in place.

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
      box: the ``ipywidgets.VBox`` on display: the sliders, the image and the status line.
      image: the ``ipywidgets.Image`` that shows the plot (its ``value`` is the PNG).
      status: the ``ipywidgets.HTML`` label under the plot that shows messages.
      model: the computation, parameters in, curves out (no widgets).
      renderer: the drawing; ``renderer.figure`` is the matplotlib Figure behind the image.
      figure: the same Figure (not managed by pyplot).
      lines: ``{"forward", "gradient", "plain_forward", "plain_gradient": Line2D}``.
    """

    def __init__(
        self,
        op: Callable[..., tf.Tensor],
        params: Mapping[str, Any],
        *,
        fn: Optional[Callable[[tf.Tensor], tf.Tensor]],
        plain: Optional[Callable[..., tf.Tensor]],
        x,
        name: Optional[str],
        title: Optional[str],
        figsize: tuple[float, float],
        dpi: float,
    ):
        """Use :func:`explore`, which gives every option its default and documents it."""
        _check_arguments(op, params, fn, plain, title, figsize, dpi)
        self.model = ExplorerModel(op, list(params), fn=fn, plain=plain, x=x)
        if name is None:
            name = getattr(fn, "__name__", "f") if fn is not None else "f"
            name = name if name.isidentifier() else "f"
        self._message = ""
        self.sliders = {key: widget_for(key, spec) for key, spec in params.items()}
        try:
            self._data = self.compute()
        except Exception as err:
            raise ValueError(
                f"the explorer's initial setting {self.values} fails: {type(err).__name__}: {err}"
            ) from None
        options = {key: candidates(widget) for key, widget in self.sliders.items()}
        limits = self.model.sweep_limits(self.values, self._data, options)
        self.renderer = Renderer(self._data, limits, name=name, title=title,
                                 figsize=(float(figsize[0]), float(figsize[1])), dpi=float(dpi))
        self.figure, self.lines = self.renderer.figure, self.renderer.lines
        self.image = widgets.Image(
            value=self.renderer.show(self._data), format="png", width=str(self.renderer.pixel_size[0]),
            layout=widgets.Layout(max_width="100%", height="auto"),
        )
        self.status = widgets.HTML(value="")
        self._controls = widgets.VBox(list(self.sliders.values()))
        self.box = widgets.VBox(children=[self._controls, self.image, self.status])
        self.box.add_class(CSS_CLASS)
        for widget in self.sliders.values():
            widget.observe(self._on_change, names="value")

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
        return self.model.tracing_count()

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
        return self.model.compute({**self.values, **values})

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
        self.image.value = self.renderer.show(data)
        bad = sum(int(np.count_nonzero(~np.isfinite(data[k]))) for k in ("forward", "gradient"))
        self._set_message(f"{bad} values are inf or nan and are not drawn" if bad else "")

    def _set_message(self, text: str) -> None:
        self._message = text
        self.status.value = (
            "" if not text else
            f'<span style="color:#a4262c">&#9888; {html.escape(text)}</span>'
        )

    # -- display and lifecycle ----------------------------------------------------------------

    def snapshot(self, **values) -> DisplayImage:
        """A static PNG of the plot at a setting (the current one, overridden by ``values``).

        Put it under the interactive cell so that readers on GitHub, where widgets do not
        render, see a representative picture; the sliders are not moved.

        Raises:
          ValueError, TypeError: as :meth:`compute`.
        """
        return DisplayImage(data=self.renderer.snapshot(self.compute(**values)), format="png")

    def __repr__(self) -> str:
        # Short and stable (no model ids or addresses): it is the text/plain of the cell output.
        shown = {key: shown_value(widget) for key, widget in self.sliders.items()}
        return "Explorer(" + ", ".join(f"{key}={value!r}" for key, value in shown.items()) + ")"

    def _repr_mimebundle_(self, **kwargs):
        """The box's widget view, this explorer's repr, and a PNG of the current setting for
        frontends that cannot render widgets (GitHub, nbconvert without widget state)."""
        bundle = _widget_bundle(self.box, **kwargs)
        if bundle is None:
            return None
        bundle["text/plain"] = repr(self)
        if self.image.value:
            bundle["image/png"] = base64.b64encode(self.image.value).decode("ascii")
        return bundle

    def close(self) -> None:
        """Closes the explorer's widgets (the box, the sliders, the image and the status line)."""
        for widget in [*self.sliders.values(), self.image, self.status, self._controls, self.box]:
            widget.close()


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
      An :class:`Explorer`: display it as a cell's value (its widgets are in ``explorer.box``).

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
