"""The explorers' controls: ipywidgets' slider shorthand turned into widgets, and read back (private).

Only ipywidgets' public API is used: the widget classes, their traits and ``ipywidgets.fixed``.
"""
from __future__ import annotations

import numbers
from typing import Any, Mapping

import ipywidgets as widgets
import numpy as np

from gradlab import _validation as v


def is_number(value: Any) -> bool:
    """A real number that is not a bool."""
    return isinstance(value, numbers.Real) and not isinstance(value, (bool, np.bool_))


#: The trait that holds a control's hover text: ``tooltip`` on ipywidgets 8 (every DOM widget),
#: ``description_tooltip`` on ipywidgets 7 (Colab ships 7.7.1), where ``tooltip=`` would be ignored.
TOOLTIP = "tooltip" if widgets.FloatSlider.class_traits().get("tooltip") is not None else "description_tooltip"


def tooltip(text: str) -> dict:
    """The keyword argument that gives a control its hover text, on ipywidgets 8 and 7: ``{TOOLTIP: text}``."""
    return {TOOLTIP: text}


def _slider(spec: tuple) -> widgets.ValueWidget:
    """``(min, max[, step[, value]])`` as an ``IntSlider`` (all ints) or a ``FloatSlider``.

    Without a value the slider starts in the middle of the range (on a step), as ipywidgets'
    ``interact`` does.
    """
    low, high = spec[0], spec[1]
    step = spec[2] if len(spec) > 2 else None
    integral = all(isinstance(s, numbers.Integral) for s in spec)
    if len(spec) == 4:
        value = spec[3]
    else:
        value = low + (high - low) // 2 if integral else low + (high - low) / 2
        if step is not None and step > 0:
            value = low + int((value - low) / step) * step
    if not low <= value <= high or (step is not None and step <= 0):
        raise ValueError(f"(min, max, step, value) needs min <= value <= max and step > 0; got {spec!r}.")
    cls = widgets.IntSlider if integral else widgets.FloatSlider
    return cls(min=low, max=high, value=value, **({} if step is None else {"step": step}))


def _from_shorthand(spec: Any) -> widgets.ValueWidget:
    if isinstance(spec, tuple) and 2 <= len(spec) <= 4 and all(map(is_number, spec)):
        return _slider(spec)
    if isinstance(spec, bool):
        return widgets.Checkbox(value=spec)
    if is_number(spec):
        low, high = (spec, spec + 1) if spec == 0 else sorted((-spec, 3 * spec))
        return _slider((low, high, *([1] if isinstance(spec, numbers.Integral) else []), spec))
    if isinstance(spec, (list, Mapping)) and len(spec) > 0:
        return widgets.Dropdown(options=list(spec.items()) if isinstance(spec, Mapping) else spec)
    raise TypeError(f"got {v.describe(spec)}")


def widget_for(name: str, spec: Any) -> widgets.ValueWidget:
    """A widget from a spec: a ValueWidget, ``(min, max[, step[, value]])``, a number, a bool, or
    a list or dict of choices (ipywidgets' ``interact`` abbreviations).

    Raises:
      TypeError: for ``ipywidgets.fixed`` or a spec that names no widget.
      ValueError: for a tuple whose value is outside its range or whose step is not positive.

    Example:
      >>> from gradlab.widgets._controls import widget_for
      >>> slider = widget_for("factor", (0.0, 2.0, 0.5))
      >>> type(slider).__name__, slider.value, slider.description
      ('FloatSlider', 1.0, 'factor')
    """
    if isinstance(spec, widgets.fixed):
        raise TypeError(
            f"params[{name!r}] is ipywidgets.fixed; pass a fixed value through a closure in op "
            "instead (an explorer's parameters are the ones you move)."
        )
    if isinstance(spec, widgets.ValueWidget):
        widget = spec
    else:
        try:
            widget = _from_shorthand(spec)
        except ValueError as err:
            raise ValueError(f"params[{name!r}] = {spec!r} is not a valid slider spec: {err}") from None
        except TypeError as err:
            raise TypeError(
                f"params[{name!r}] must be an ipywidgets value widget (FloatSlider, "
                "FloatRangeSlider, Dropdown...), a tuple (min, max[, step[, value]]) or a list of "
                f"choices; {err}."
            ) from None
    if not getattr(widget, "description", ""):
        widget.description = name
    return widget


def option_values(widget: widgets.ValueWidget) -> list:
    """The values a selection widget offers (its ``options`` as ipywidgets normalises them)."""
    options = widget.options
    items = list(options.items()) if isinstance(options, Mapping) else list(options)
    if all(isinstance(item, (list, tuple)) and len(item) == 2 for item in items):
        return [value for _, value in items]
    return items


def is_selection(widget: widgets.ValueWidget) -> bool:
    """Whether the widget picks one of its ``options`` (Dropdown, RadioButtons, ToggleButtons...)."""
    return widget.has_trait("label") and widget.has_trait("index") and not isinstance(widget.index, tuple)


#: The attribute of a selection widget that maps its shown (perhaps translated) labels back to the names a caller
#: passes: an explorer's repr shows ``backward='identity'`` in every language, a name that can be passed back.
NAMES = "gradlab_names"


def shown_value(widget: widgets.ValueWidget) -> Any:
    """What the widget shows: a selection's option name (in English, as a caller passes it), any other widget's value."""
    if not is_selection(widget):
        return widget.value
    return getattr(widget, NAMES, {}).get(widget.label, widget.label)


def _safe_equal(a, b) -> bool:
    try:
        return bool(a == b)
    except Exception:  # e.g. arrays
        return False


def candidates(widget: widgets.ValueWidget) -> list:
    """Values of one widget worth visiting when choosing fixed y limits: the ends and the value."""
    value = widget.value
    if isinstance(widget, widgets.FloatLogSlider):
        found = [widget.base ** widget.min, value, widget.base ** widget.max]
    elif is_number(value) and is_number(getattr(widget, "min", None)):
        found = [widget.min, value, widget.max]
    elif isinstance(value, tuple) and len(value) == 2 and is_number(getattr(widget, "min", None)):
        low, high = widget.min, widget.max
        found = [(low, low), (low, high), (high, high), value]
    elif isinstance(value, bool):
        found = [False, True]
    elif widget.has_trait("options"):
        found = option_values(widget) or [value]
    else:
        found = [value]
    unique = []
    for item in found:
        if not any(item is seen or (type(item) is type(seen) and _safe_equal(item, seen)) for seen in unique):
            unique.append(item)
    return unique
