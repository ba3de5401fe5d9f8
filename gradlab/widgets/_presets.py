"""The ready-made explorers, each from one declarative spec (private).

A :class:`Preset` says which op an explorer shows, its controls (a :class:`Slider`, a
:class:`RangeSlider` or a :class:`Choice` per parameter, with its range, description and tooltip)
and its title; :func:`build` validates the initial values against the spec, makes the widgets and
calls :func:`gradlab.widgets.explore`. Adding an explorer is adding a spec and a documented function.
"""
from __future__ import annotations

import dataclasses
from typing import Any, Callable, Mapping, Optional

import ipywidgets as widgets
import tensorflow as tf

from gradlab import _validation as v
from gradlab import ops
from gradlab.widgets._controls import NAMES, tooltip
from gradlab.widgets._view import Explorer, explore
from gradlab.widgets._labels import N_, translated

_STYLE = {"description_width": "initial"}
_LAYOUT = {"width": "460px"}


def _in_range(value, name: str, low: float, high: float) -> float:
    value = v.scalar(value, name)
    if not isinstance(value, float):
        raise TypeError(f"{name} must be a Python number for an explorer; got {v.describe(value)}.")
    if not low <= value <= high:
        raise ValueError(f"{name} must be in the slider's range [{low:g}, {high:g}]; got {value!r}.")
    return value


@dataclasses.dataclass(frozen=True)
class Slider:
    """A ``FloatSlider`` over ``[low, high]`` for one numeric parameter."""

    low: float
    high: float
    step: float
    readout: str
    description: str
    tooltip: str

    def check(self, value: Any, name: str) -> Any:
        return _in_range(value, name, self.low, self.high)

    def widget(self, value: Any) -> widgets.ValueWidget:
        cls = widgets.FloatRangeSlider if isinstance(self, RangeSlider) else widgets.FloatSlider
        return cls(value=value, min=self.low, max=self.high, step=self.step, readout_format=self.readout,
                   description=translated(self.description), **tooltip(translated(self.tooltip)), continuous_update=True,
                   style=_STYLE, layout=widgets.Layout(**_LAYOUT))


@dataclasses.dataclass(frozen=True)
class RangeSlider(Slider):
    """A ``FloatRangeSlider``: its two handles, named ``ends``, cannot cross."""

    ends: tuple[str, str] = ("low", "high")

    def check(self, value: Any, name: str) -> Any:
        low, high = (_in_range(end, end_name, self.low, self.high) for end, end_name in zip(value, self.ends))
        v.check_clip_order(low, high)
        return low, high


@dataclasses.dataclass(frozen=True)
class Choice:
    """A ``Dropdown`` of named functions; the initial value is a name."""

    choices: Mapping[str, Callable]
    description: str
    tooltip: str

    def check(self, value: Any, name: str) -> Any:
        if value not in self.choices:
            raise ValueError(f"{name} must be one of {list(self.choices)}; got {value!r}.")
        return value

    def widget(self, value: Any) -> widgets.ValueWidget:
        # The options' labels are shown translated; the names a user passes (the keys) stay English, and the
        # explorer's repr shows them (NAMES).
        dropdown = widgets.Dropdown(options=[(translated(name), fn) for name, fn in self.choices.items()],
                                    value=self.choices[value],
                                    description=translated(self.description), **tooltip(translated(self.tooltip)),
                                    style=_STYLE, layout=widgets.Layout(**_LAYOUT))
        setattr(dropdown, NAMES, {translated(name): name for name in self.choices})
        return dropdown


@dataclasses.dataclass(frozen=True)
class Preset:
    """What one ready-made explorer shows: ``op(x, **params)`` with one control per parameter.

    ``title`` may name ``fn`` as ``{name}``; ``plain`` and ``name`` are passed to ``explore`` for
    explorers without an ``fn`` (their op is the whole function).
    """

    op: Callable[..., tf.Tensor]
    controls: Mapping[str, Any]
    title: str
    plain: Optional[Callable[..., tf.Tensor]] = None
    name: Optional[str] = None


def build(preset: Preset, initial: Mapping[str, Any], *, fn, kwargs: dict) -> Explorer:
    """An explorer from a spec and the initial values the user gave (checked against the spec)."""
    checked = {key: control.check(initial[key], key) for key, control in preset.controls.items()}
    params = {key: control.widget(checked[key]) for key, control in preset.controls.items()}
    fn_name = getattr(fn, "__name__", "f") if fn is not None else "x"
    kwargs.setdefault("title", preset.title.format(name=fn_name))
    if preset.name is not None:
        kwargs.setdefault("name", preset.name)
    return explore(preset.op, params, fn=fn, plain=preset.plain, **kwargs)


def _clip_interval(x, clip):
    return ops.clip_gradient(x, clip[0], clip[1])


def heaviside(x, **_):
    """The step ``1[x > 0]`` in ``x``'s dtype."""
    return tf.cast(x > 0, x.dtype)


def _hard_tanh(x):
    return tf.clip_by_value(x, -1.0, 1.0)


def _identity(x):
    return tf.identity(x)


#: Forward functions of :func:`straight_through_explorer` (flat almost everywhere: no gradient). The names of
#: functions (round, sign, ...) read the same in every language; the others are marked for translation.
ST_FORWARDS: dict[str, Callable] = {
    "round": tf.round,
    "sign": tf.sign,
    N_("step (x > 0)"): heaviside,
    "floor": tf.math.floor,
}
#: Backward functions of :func:`straight_through_explorer` (their gradient is the one sent back).
ST_BACKWARDS: dict[str, Callable] = {
    N_("identity"): _identity,
    "tanh": tf.tanh,
    N_("hard tanh (clip to [-1, 1])"): _hard_tanh,
    "sigmoid": tf.sigmoid,
}


def _straight_through(x, forward, backward):
    return ops.straight_through(forward(x), backward(x))


def _forward_only(x, forward, backward):
    return forward(x)


CLIP = Preset(
    op=_clip_interval,
    controls={"clip": RangeSlider(
        -1.5, 1.5, 0.05, ".2f", N_("clip interval [min, max]"),
        N_("clip_min and clip_max: each element of the gradient dL/dx is clipped to this interval "
           "(gradient units). The forward pass does not change."), ends=("clip_min", "clip_max"))},
    title="y = {name}(clip_gradient(x, clip_min, clip_max))",
)
SCALE = Preset(
    op=ops.scale_gradient,
    controls={"factor": Slider(
        -2.0, 2.0, 0.1, ".1f", N_("gradient factor ×"),
        N_("factor (dimensionless): the backward pass multiplies the gradient by it; 0 stops the "
           "gradient, a negative factor reverses it. The forward pass does not change."))},
    title="y = {name}(scale_gradient(x, factor))",
)
SURROGATE = Preset(
    op=ops.surrogate_step,
    controls={"width": Slider(
        0.1, 3.0, 0.05, ".2f", N_("surrogate half-width"),
        N_("width (units of x): the surrogate derivative is the triangle max(0, 1 - |x| / width), "
           "nonzero on (-width, width). The forward step does not change."))},
    title="y = surrogate_step(x, width)", plain=heaviside, name="step",
)
STRAIGHT_THROUGH = Preset(
    op=_straight_through,
    controls={
        "forward": Choice(ST_FORWARDS, N_("forward (value)"),
                          N_("The function whose value the op returns, bitwise (flat almost everywhere).")),
        "backward": Choice(ST_BACKWARDS, N_("backward (gradient)"),
                           N_("The function whose gradient the op sends back in place of forward's.")),
    },
    title="y = straight_through(forward(x), backward(x))", plain=_forward_only, name="q",
)
