"""The explorers survive extreme slider values and hundreds of rapid changes, with nothing piling up.

tests/library/test_widgets.py checks that each setting plots the right curves. Here the question is
robustness: a learner drags a slider to its ends, puts both handles of a range slider on one
value, sets a factor of 0, or a notebook cell sets values in a tight loop. For every explorer:

* no exception escapes (an invalid setting shows a message and keeps the last valid picture);
* nothing accumulates: no new pyplot figures, no new widgets (ipywidgets' registry of live
  widgets), no ``Output`` widgets, no new artists in the figure, no new compiled functions or
  traces, nothing printed;
* after the storm, the picture and data are exactly those of the final setting.
"""

from __future__ import annotations

import collections

import ipywidgets
import matplotlib.pyplot as plt
import numpy as np
import pytest
import tensorflow as tf
from ipywidgets.widgets import widget as widget_module

import gradlab
import gradlab.widgets as gw
from gradlab.widgets._controls import option_values

X = tf.constant(np.linspace(-3.0, 3.0, 401, dtype=np.float32))
RAPID = 150  # value sets per slider in the rapid-change loop (plus the extremes)


def live_widgets() -> int:
    return len(widget_module._instances)


def walk(widget):
    yield widget
    for child in getattr(widget, "children", ()):
        yield from walk(child)


def artist_count(figure) -> int:
    def count(artist):
        return 1 + sum(count(child) for child in artist.get_children())

    return count(figure)


def reference(name, values):
    """The direct computation each explorer must show for a setting."""
    if name == "clip":
        low, high = values["clip"]
        return lambda x: tf.sin(gradlab.clip_gradient(x, low, high))
    if name == "scale":
        return lambda x: tf.tanh(gradlab.scale_gradient(x, values["factor"]))
    if name == "surrogate":
        return lambda x: gradlab.surrogate_step(x, values["width"])
    if name == "straight_through":
        return lambda x: gradlab.straight_through(values["forward"](x), values["backward"](x))
    if name == "separate_clip":
        return lambda x: tf.tanh(gradlab.clip_gradient(x, values["clip_min"], values["clip_max"]))
    raise AssertionError(name)


def direct_gradient(fn):
    with tf.GradientTape() as tape:
        tape.watch(X)
        y = fn(X)
    g = tape.gradient(y, X)
    return y.numpy(), (np.zeros(X.shape, np.float32) if g is None else g.numpy())


def separate_clip_explorer():
    """Two independent sliders: every other setting is invalid (clip_min > clip_max)."""
    return gw.explore(gradlab.clip_gradient, {
        "clip_min": ipywidgets.FloatSlider(value=-0.5, min=-1.0, max=1.0, step=0.05),
        "clip_max": ipywidgets.FloatSlider(value=0.5, min=-1.0, max=1.0, step=0.05),
    })


EXPLORERS = {
    "clip": gw.clip_explorer,
    "scale": gw.scale_explorer,
    "surrogate": gw.surrogate_explorer,
    "straight_through": gw.straight_through_explorer,
    "separate_clip": separate_clip_explorer,
}


def extreme_values(widget):
    """The ends, equal range handles, 0, beyond the ends (clamped by the widget), and non-finite
    values (which only code can set: the explorer reports them)."""
    if isinstance(widget, ipywidgets.Dropdown):
        return option_values(widget)
    low, high = widget.min, widget.max
    if isinstance(widget.value, tuple):
        mid = (low + high) / 2
        return [(low, low), (high, high), (low, high), (mid, mid), (0.0, 0.0), (low - 10, high + 10),
                (low, low), (float("nan"), high), (low, high)]
    return [low, high, 0.0, low - 100, high + 100, float("inf"), -float("inf"), float("nan"),
            low, high, (low + high) / 2]


def random_values(widget, rng, n):
    if isinstance(widget, ipywidgets.Dropdown):
        choices = option_values(widget)
        return [choices[i] for i in rng.integers(0, len(choices), n)]
    if isinstance(widget.value, tuple):
        pairs = np.sort(rng.uniform(widget.min, widget.max, (n, 2)), axis=1)
        return [tuple(map(float, p)) for p in pairs]
    return [float(v) for v in rng.uniform(widget.min, widget.max, n)]


@pytest.fixture(params=sorted(EXPLORERS))
def explorer(request):
    made = EXPLORERS[request.param]()
    yield request.param, made
    made.close()


@pytest.mark.slow
def test_extreme_values_and_rapid_changes_leave_nothing_behind(explorer, capsys):
    name, e = explorer
    # Visit every non-numeric choice once so that its function is compiled before counting.
    for widget in e.sliders.values():
        if isinstance(widget, ipywidgets.Dropdown):
            for value in option_values(widget):
                widget.value = value
    before = dict(
        fignums=plt.get_fignums(), widgets=live_widgets(), artists=artist_count(e.figure),
        compiled=e.model.compiled_count(), traces=e.tracing_count(),
        tree=[id(w) for w in walk(e.box)], figure=e.figure, image=e.image,
    )
    rng = np.random.default_rng(0)
    sets = 0
    for widget in e.sliders.values():
        values = extreme_values(widget) + random_values(widget, rng, RAPID)
        for value in values:
            widget.value = value  # must never raise
            sets += 1
            if e.message:  # an invalid setting: explained, never a traceback
                assert "the plot shows the last valid setting" in e.message or "inf or nan" in e.message
    assert sets >= RAPID * len(e.sliders)

    assert plt.get_fignums() == before["fignums"]
    assert live_widgets() == before["widgets"]
    assert artist_count(e.figure) == before["artists"]
    assert e.model.compiled_count() == before["compiled"] and e.tracing_count() == before["traces"]
    assert [id(w) for w in walk(e.box)] == before["tree"]
    assert e.figure is before["figure"] and e.image is before["image"]
    assert not any(isinstance(w, ipywidgets.Output) for w in walk(e.box))
    assert capsys.readouterr() == ("", "")

    # The last setting is valid: no message, and what is shown is exactly its computation.
    if name == "separate_clip" and e.values["clip_min"] > e.values["clip_max"]:
        e.sliders["clip_min"].value = e.sliders["clip_max"].value
    assert e.message == ""
    forward, gradient = direct_gradient(reference(name, e.values))
    np.testing.assert_array_equal(e.data()["forward"], forward)
    np.testing.assert_array_equal(e.data()["gradient"], gradient)
    np.testing.assert_array_equal(e.lines["gradient"].get_ydata(), gradient)


def test_invalid_settings_keep_the_last_valid_picture_through_a_storm():
    e = separate_clip_explorer()
    fignums, widgets_before = plt.get_fignums(), live_widgets()
    try:
        rng = np.random.default_rng(1)
        for _ in range(RAPID // 2):  # two value sets per round
            low, high = (float(v) for v in rng.uniform(-1.0, 1.0, 2))
            image_before, data_before = e.image.value, e.data()
            e.sliders["clip_min"].value = low
            if low > e.values["clip_max"]:
                assert e.message.startswith("clip_min must be <= clip_max")
                assert e.image.value == image_before
                np.testing.assert_array_equal(e.data()["gradient"], data_before["gradient"])
            e.sliders["clip_max"].value = high
        assert live_widgets() == widgets_before and plt.get_fignums() == fignums
    finally:
        e.close()


@pytest.mark.parametrize("value", [0.0, -2.0, 2.0])
def test_scale_explorer_at_zero_and_the_ends(value):
    e = gw.scale_explorer(factor=value)
    try:
        data = e.data()
        assert e.message == ""
        np.testing.assert_array_equal(data["gradient"], np.float32(value) * data["plain_gradient"])
        np.testing.assert_array_equal(data["forward"], data["plain_forward"])
    finally:
        e.close()


@pytest.mark.parametrize("clip", [(-1.5, -1.5), (0.0, 0.0), (1.5, 1.5)], ids=str)
def test_clip_explorer_with_both_handles_on_one_value(clip):
    e = gw.clip_explorer(*clip)
    try:
        assert e.message == ""
        np.testing.assert_array_equal(e.data()["gradient"], np.full(X.shape, clip[0], np.float32))
    finally:
        e.close()


def test_many_snapshots_register_no_figures():
    e = gw.surrogate_explorer()
    try:
        fignums, widgets_before = plt.get_fignums(), live_widgets()
        for width in np.linspace(0.1, 3.0, 4):
            image = e.snapshot(width=float(width))
            assert image.data[:8] == b"\x89PNG\r\n\x1a\n"
        assert plt.get_fignums() == fignums and live_widgets() == widgets_before
        assert e.sliders["width"].value == 1.0  # snapshots never move the slider
    finally:
        e.close()


def kinds_of_live_widgets():
    return collections.Counter(type(w).__name__ for w in widget_module._instances.values())


def test_closing_explorers_in_a_loop_leaves_only_ipywidgets_own_layout_and_style_objects():
    """Every value widget, image, label and box an explorer owns is closed with it. What stays is
    what ipywidgets 8 itself never closes: a widget's Layout and Style objects (see the next
    test), a fixed handful per explorer, not growing with use."""
    fignums = plt.get_fignums()
    leftovers = []
    makers = list(EXPLORERS.values()) + [gw.scale_explorer]
    for make in makers:
        before = kinds_of_live_widgets()
        made = make()
        first = next(iter(made.sliders))
        for value in random_values(made.sliders[first], np.random.default_rng(0), 20):
            made.sliders[first].value = value
        made.close()
        leftovers.append(kinds_of_live_widgets() - before)
    for left in leftovers:
        assert set(left) <= {"Layout", "SliderStyle", "DescriptionStyle", "HTMLStyle"}, left
        assert sum(left.values()) <= 10, left
    scale = EXPLORERS["scale"]
    assert leftovers[list(EXPLORERS.values()).index(scale)] == leftovers[-1]
    assert plt.get_fignums() == fignums


def test_ipywidgets_does_not_close_a_widgets_layout_and_style():
    """LIMITATION (ipywidgets 8.1): Widget.close() leaves the widget's Layout and Style widgets
    registered (and their comms open) - for any slider, not only gradlab's."""
    before = kinds_of_live_widgets()
    slider = ipywidgets.FloatSlider()
    slider.close()
    assert kinds_of_live_widgets() - before == collections.Counter({"Layout": 1, "SliderStyle": 1})
