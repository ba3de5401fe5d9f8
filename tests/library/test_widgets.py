"""Kernel-level tests of gradlab.widgets: drive the explorers from Python, read back what they plot.

No browser here (tests/project/test_browser.py has one): setting ``explorer.sliders[name].value`` runs the
same observers a slider move in the browser runs, and ``explorer.data()``, ``explorer.lines`` and
``explorer.image`` are what is on screen. The gradients are compared *exactly* (bitwise) with a
direct ``tf.GradientTape`` computation of the gradlab op.
"""
from __future__ import annotations

import base64
import doctest
import io
import os
import queue
import subprocess
import sys
import textwrap

import ipywidgets
import matplotlib.pyplot as plt
import numpy as np
import pytest
import tensorflow as tf
import traitlets
from hypothesis import given, settings
from hypothesis import strategies as st
from PIL import Image

import gradlab
import gradlab.widgets as gw
from gradlab.widgets._controls import TOOLTIP, option_values
from gradlab.widgets._png import png

X = tf.constant(np.linspace(-3.0, 3.0, 401, dtype=np.float32))


def tape_values(fn, x=X):
    """Forward values and gradient of an elementwise fn, computed directly (eagerly)."""
    with tf.GradientTape() as tape:
        tape.watch(x)
        y = fn(x)
    gradient = tape.gradient(y, x)
    return y.numpy(), (np.zeros(x.shape, np.float32) if gradient is None else gradient.numpy())


def png_pixels(png: bytes) -> np.ndarray:
    return np.asarray(Image.open(io.BytesIO(png)).convert("RGB"))


def walk(widget):
    yield widget
    for child in getattr(widget, "children", ()):
        yield from walk(child)


# The ready-made explorers, each with the direct computation its sliders must reproduce.
def clip_reference(values):
    low, high = values["clip"]
    return lambda x: tf.sin(gradlab.clip_gradient(x, low, high))


def scale_reference(values):
    return lambda x: tf.tanh(gradlab.scale_gradient(x, values["factor"]))


def surrogate_reference(values):
    return lambda x: gradlab.surrogate_step(x, values["width"])


def straight_through_reference(values):
    return lambda x: gradlab.straight_through(values["forward"](x), values["backward"](x))


CASES = {
    "clip": (gw.clip_explorer, clip_reference, tf.sin,
             [(-0.5, 0.5), (0.2, 0.3), (-1.5, -1.0), (0.0, 0.0), (-1.5, 1.5), (0.95, 1.5)]),
    "scale": (gw.scale_explorer, scale_reference, tf.tanh, [-2.0, -0.3, 0.0, 0.1, 1.7, 2.0]),
    "surrogate": (gw.surrogate_explorer, surrogate_reference, None, [0.1, 0.35, 1.0, 2.95, 3.0]),
    "straight_through": (gw.straight_through_explorer, straight_through_reference, None, None),
}


@pytest.fixture(params=sorted(CASES))
def case(request):
    make, reference, fn, settings_ = CASES[request.param]
    explorer = make()
    yield request.param, explorer, reference, fn, settings_
    explorer.close()


@pytest.fixture
def scale():
    explorer = gw.scale_explorer()
    yield explorer
    explorer.close()


def all_settings(name, explorer, settings_):
    """(slider name, value) pairs to visit: each listed value, or every dropdown choice."""
    if settings_ is not None:
        (slider,) = explorer.sliders
        return [(slider, value) for value in settings_]
    return [(slider, value) for slider, widget in explorer.sliders.items()
            for value in option_values(widget)]


# --- each slider sets exactly the gradient the gradlab op computes --------------------------------

def test_each_setting_plots_exactly_the_ops_gradient_and_keeps_the_forward(case):
    name, explorer, reference, fn, settings_ = case
    before = explorer.data()
    fignums = plt.get_fignums()
    for slider, value in all_settings(name, explorer, settings_):
        image = explorer.image.value
        explorer.sliders[slider].value = value
        assert explorer.message == ""
        data = explorer.data()
        forward, gradient = tape_values(reference(explorer.values))
        np.testing.assert_array_equal(data["gradient"], gradient)
        np.testing.assert_array_equal(data["forward"], forward)
        np.testing.assert_array_equal(data["x"], X.numpy())
        # The plotted line is that array.
        np.testing.assert_array_equal(explorer.lines["gradient"].get_ydata(), gradient)
        np.testing.assert_array_equal(explorer.lines["forward"].get_ydata(), forward)
        if slider != "forward":  # gradient ops (and the backward choice) never touch the forward
            np.testing.assert_array_equal(data["forward"], before["forward"])
        if fn is not None:  # the faint line is the plain function's own gradient
            np.testing.assert_array_equal(data["plain_gradient"], tape_values(fn)[1])
        if not np.array_equal(gradient, before["gradient"]):
            assert explorer.image.value != image, "the gradient changed but the picture did not"
        before = data
    assert plt.get_fignums() == fignums


@settings(max_examples=25, deadline=None)
# Factors far below 1 would make subnormal products, which TensorFlow's CPU kernels flush to zero
# and NumPy does not: the comparison would then test float arithmetic, not the explorer.
@given(factor=st.floats(-2.0, 2.0, allow_nan=False, width=32).filter(lambda f: f == 0 or abs(f) >= 1e-3))
def test_scale_slider_gradient_is_factor_times_plain(factor):
    explorer = gw.scale_explorer()
    try:
        explorer.sliders["factor"].value = factor
        data = explorer.data()
        expected = tape_values(lambda x: tf.tanh(gradlab.scale_gradient(x, factor)))[1]
        np.testing.assert_array_equal(data["gradient"], expected)
        np.testing.assert_array_equal(data["gradient"], data["plain_gradient"] * np.float32(factor))
    finally:
        explorer.close()


@settings(max_examples=25, deadline=None)
@given(bounds=st.lists(st.floats(-1.5, 1.5, allow_nan=False, allow_subnormal=False, width=32), min_size=2, max_size=2))
def test_clip_slider_gradient_lies_in_the_interval(bounds):
    low, high = sorted(bounds)
    explorer = gw.clip_explorer()
    try:
        explorer.sliders["clip"].value = (low, high)
        data = explorer.data()
        np.testing.assert_array_equal(data["gradient"], np.clip(data["plain_gradient"], low, high))
        np.testing.assert_array_equal(data["forward"], tf.sin(X).numpy())
    finally:
        explorer.close()


def test_moving_a_slider_does_not_retrace(case):
    name, explorer, _, _, settings_ = case
    for slider, value in all_settings(name, explorer, settings_):  # visit every choice once
        explorer.sliders[slider].value = value
    traced = explorer.tracing_count()
    for _ in range(3):
        for slider, value in all_settings(name, explorer, settings_):
            explorer.sliders[slider].value = value
    assert explorer.tracing_count() == traced
    if name != "straight_through":
        assert traced == 1


# --- in place: no new figure, no new widget, no output ---------------------------------------------

def test_updates_happen_in_place(case, capsys):
    name, explorer, _, _, settings_ = case
    fignums = plt.get_fignums()
    figure, image, children = explorer.figure, explorer.image, explorer.box.children
    tree = [id(w) for w in walk(explorer.box)]
    for slider, value in all_settings(name, explorer, settings_):
        explorer.sliders[slider].value = value
    assert plt.get_fignums() == fignums
    assert explorer.figure is figure and explorer.image is image and explorer.box.children == children
    assert [id(w) for w in walk(explorer.box)] == tree
    assert not any(isinstance(w, ipywidgets.Output) for w in walk(explorer.box))
    assert len(figure.axes) == 2 and all(len(ax.get_lines()) == 4 for ax in figure.axes)
    assert capsys.readouterr() == ("", "")


def test_the_picture_is_exactly_a_full_redraw_of_the_figure(scale):
    scale.sliders["factor"].value = -1.3
    shown = png_pixels(scale.image.value)
    scale.figure.canvas.draw()  # the slow path blitting avoids
    redrawn = np.asarray(scale.figure.canvas.buffer_rgba())[..., :3]
    np.testing.assert_array_equal(shown, redrawn)
    assert shown.shape == (320, 800, 3)


def test_gradient_axis_is_fixed_across_the_slider_range(scale):
    ylim = scale.figure.axes[1].get_ylim()
    for factor in (-2.0, 0.0, 2.0):
        scale.sliders["factor"].value = factor
        assert scale.figure.axes[1].get_ylim() == ylim
    assert ylim[0] < -2.0 and ylim[1] > 2.0  # room for factor * max tanh' at both ends


def test_limits_widen_when_a_setting_leaves_them(scale):
    slider = scale.sliders["factor"]
    slider.max = 10.0
    slider.value = 10.0
    low, high = scale.figure.axes[1].get_ylim()
    assert high >= 10.0 and scale.message == ""
    assert np.nanmax(scale.lines["gradient"].get_ydata()) == 10.0


# --- impossible and extreme settings ----------------------------------------------------------------

def test_clip_interval_cannot_be_inverted_by_the_widget():
    explorer = gw.clip_explorer(-0.5, 0.5)
    try:
        with pytest.raises(traitlets.TraitError):
            explorer.sliders["clip"].value = (0.5, -0.5)
        assert explorer.sliders["clip"].value == (-0.5, 0.5)
        assert explorer.message == ""
    finally:
        explorer.close()


def test_separate_clip_bounds_show_the_ops_message_not_a_traceback(capsys):
    explorer = gw.explore(gradlab.clip_gradient, {
        "clip_min": ipywidgets.FloatSlider(value=-0.5, min=-1.0, max=1.0, step=0.1),
        "clip_max": ipywidgets.FloatSlider(value=0.5, min=-1.0, max=1.0, step=0.1),
    })
    try:
        valid, image = explorer.data(), explorer.image.value
        explorer.sliders["clip_min"].value = 0.8  # above clip_max
        assert "clip_min must be <= clip_max" in explorer.message
        assert "clip_min must be &lt;= clip_max" in explorer.status.value
        np.testing.assert_array_equal(explorer.data()["gradient"], valid["gradient"])
        assert explorer.image.value == image  # the last valid picture stays
        explorer.sliders["clip_max"].value = 0.9  # valid again
        assert explorer.message == "" and explorer.status.value == ""
        expected = tape_values(lambda x: tf.tanh(gradlab.clip_gradient(x, 0.8, 0.9)))[1]
        np.testing.assert_array_equal(explorer.data()["gradient"], expected)
        assert capsys.readouterr() == ("", "")
    finally:
        explorer.close()


def test_an_unexpected_error_in_the_op_is_shown_with_its_type():
    def fragile(x, p):
        if tf.executing_eagerly() and float(p) > 0.5:  # the explorer's eager validation call
            raise RuntimeError("boom")
        return gradlab.scale_gradient(x, p)

    explorer = gw.explore(fragile, {"p": (0.0, 1.0, 0.1, 0.2)})
    try:
        explorer.sliders["p"].value = 0.9
        assert explorer.message.startswith("RuntimeError: boom")
    finally:
        explorer.close()


def test_extreme_values_and_rapid_changes_do_not_raise(case):
    name, explorer, reference, _, settings_ = case
    rng = np.random.default_rng(0)
    for widget in explorer.sliders.values():
        if isinstance(widget, ipywidgets.Dropdown):
            choices = option_values(widget)
            values = [choices[i] for i in rng.integers(0, len(choices), 100)]
        elif isinstance(widget.value, tuple):
            pairs = np.sort(rng.uniform(widget.min - 1, widget.max + 1, (100, 2)), axis=1)
            values = [(widget.min, widget.min), (widget.max, widget.max)] + [tuple(p) for p in pairs]
        else:
            values = [widget.min, widget.max, widget.max + 100, widget.min - 100]
            values += list(rng.uniform(widget.min, widget.max, 100))
        for value in values:
            widget.value = value  # out-of-range values are clamped by the widget
            assert explorer.message == ""
    forward, gradient = tape_values(reference(explorer.values))
    np.testing.assert_array_equal(explorer.data()["gradient"], gradient)
    np.testing.assert_array_equal(explorer.data()["forward"], forward)


def test_non_finite_values_are_reported_not_drawn():
    explorer = gw.explore(gradlab.scale_gradient, {"factor": (0.5, 2.0, 0.5, 1.0)},
                          fn=tf.math.reciprocal)  # 1/x: inf at x = 0
    try:
        assert "inf or nan" in explorer.message or explorer.message == ""
        explorer.sliders["factor"].value = 2.0
        assert "values are inf or nan and are not drawn" in explorer.message
        assert np.isinf(explorer.data()["forward"]).any()
        assert np.isnan(explorer.lines["forward"].get_ydata()).any()
        assert np.isfinite(explorer.figure.axes[0].get_ylim()).all()
    finally:
        explorer.close()


# --- the generic explore() -----------------------------------------------------------------------

def test_explore_builds_widgets_from_interact_abbreviations():
    def op(x, factor, steps, mode, clip):
        scaled = gradlab.scale_gradient(x, factor * steps)
        return mode(gradlab.clip_gradient(scaled, clip[0], clip[1]))

    explorer = gw.explore(op, {
        "factor": (-1.0, 1.0, 0.25, 0.5),
        "steps": (1, 5),
        "mode": [("identity", tf.identity), ("negate", tf.negative)],
        "clip": ipywidgets.FloatRangeSlider(value=(-0.5, 0.5), min=-1.0, max=1.0),
    })
    try:
        kinds = {k: type(w) for k, w in explorer.sliders.items()}
        assert kinds == {"factor": ipywidgets.FloatSlider, "steps": ipywidgets.IntSlider,
                         "mode": ipywidgets.Dropdown, "clip": ipywidgets.FloatRangeSlider}
        assert [w.description for w in explorer.sliders.values()] == ["factor", "steps", "mode", "clip"]
        explorer.sliders["mode"].value = tf.negative
        explorer.sliders["steps"].value = 4
        forward, gradient = tape_values(lambda x: tf.tanh(op(x, 0.5, 4.0, tf.negative, (-0.5, 0.5))))
        np.testing.assert_array_equal(explorer.data()["gradient"], gradient)
        np.testing.assert_array_equal(explorer.data()["forward"], forward)
    finally:
        explorer.close()


def test_compute_and_snapshot_do_not_move_the_sliders(scale):
    image, value = scale.image.value, scale.sliders["factor"].value
    data = scale.compute(factor=-2.0)
    np.testing.assert_array_equal(data["gradient"], -2.0 * data["plain_gradient"])
    snapshot = scale.snapshot(factor=-2.0)
    assert scale.image.value == image and scale.sliders["factor"].value == value
    assert snapshot.format == "png" and png_pixels(snapshot.data).shape == (320, 800, 3)
    assert scale.snapshot().data != snapshot.data
    scale.sliders["factor"].value = -2.0
    np.testing.assert_array_equal(png_pixels(scale.snapshot().data), png_pixels(scale.image.value))
    with pytest.raises(ValueError, match="unknown parameter"):
        scale.compute(width=1.0)


def test_display_bundle_has_the_widget_and_a_static_png_fallback(scale):
    bundle = scale._repr_mimebundle_()
    assert bundle["application/vnd.jupyter.widget-view+json"]["model_id"] == scale.box.model_id
    assert bundle["text/plain"] == "Explorer(factor=0.5)"
    assert base64.b64decode(bundle["image/png"]) == scale.image.value
    assert gw.CSS_CLASS in scale.box._dom_classes
    assert not isinstance(scale, ipywidgets.Widget)  # it has a box; it is not one


def test_display_bundle_on_ipywidgets_7(scale, monkeypatch):
    """ipywidgets 7 (Colab's 7.7.1) has no Widget._repr_mimebundle_: the explorer builds the bundle that 7's
    _ipython_display_ sends (on 7 itself, compared with what it sends; on 8, with 8's, the method removed)."""
    if hasattr(ipywidgets.Widget, "_repr_mimebundle_"):
        expected = scale._repr_mimebundle_()
        monkeypatch.delattr(ipywidgets.Widget, "_repr_mimebundle_")
    else:
        sent = []
        monkeypatch.setattr(ipywidgets.widgets.widget, "display", lambda data, raw=False: sent.append(data))
        monkeypatch.setattr(ipywidgets.Widget, "_handle_displayed", lambda self, **kwargs: None)
        scale.box._ipython_display_()
        expected = {**sent[0], "text/plain": "Explorer(factor=0.5)", "image/png": scale._repr_mimebundle_()["image/png"]}
    assert not hasattr(scale.box, "_repr_mimebundle_")
    assert scale._repr_mimebundle_() == expected


def test_repr_is_short_and_stable():
    explorer = gw.straight_through_explorer("sign", "tanh")
    try:
        assert repr(explorer) == "Explorer(forward='sign', backward='tanh')"
        explorer.sliders["backward"].value = tf.sigmoid
        assert repr(explorer) == "Explorer(forward='sign', backward='sigmoid')"
    finally:
        explorer.close()


def test_png_encoder_round_trips():
    rgba = np.random.default_rng(0).integers(0, 256, (7, 5, 4), dtype=np.uint8)
    np.testing.assert_array_equal(png_pixels(png(rgba)), rgba[..., :3])


def test_close_closes_every_widget():
    explorer = gw.surrogate_explorer()
    inner = list(walk(explorer.box))
    explorer.close()
    assert all(w.comm is None for w in inner)


# --- argument validation ------------------------------------------------------------------------------

@pytest.mark.parametrize("call, error, pattern", [
    (lambda: gw.explore("scale", {"factor": (0.0, 1.0)}), TypeError, "op must be callable"),
    (lambda: gw.explore(gradlab.scale_gradient, [("factor", 1.0)]), TypeError, "params must be a dict"),
    (lambda: gw.explore(gradlab.scale_gradient, {"not a name": (0.0, 1.0)}), ValueError, "params keys"),
    (lambda: gw.explore(gradlab.scale_gradient, {"factor": object()}), (TypeError, ValueError), r"params\['factor'\]"),
    (lambda: gw.explore(gradlab.scale_gradient, {"factor": ipywidgets.fixed(1.0)}), TypeError, r"params\['factor'\]"),
    (lambda: gw.explore(gradlab.scale_gradient, {"factor": (0.0, 1.0, 0.1, 5.0)}), ValueError, r"params\['factor'\]"),
    (lambda: gw.explore(gradlab.scale_gradient, {"factor": (0.0, 1.0)}, fn="tanh"), TypeError, "fn must be callable"),
    (lambda: gw.explore(gradlab.scale_gradient, {"factor": (0.0, 1.0)}, plain=1), TypeError, "plain must be callable"),
    (lambda: gw.explore(gradlab.scale_gradient, {"factor": (0.0, 1.0)}, x=[[1.0, 2.0]]), ValueError, "x must be a 1-D grid"),
    (lambda: gw.explore(gradlab.scale_gradient, {"factor": (0.0, 1.0)}, x=[0.0, np.nan]), ValueError, "x must hold finite"),
    (lambda: gw.explore(gradlab.scale_gradient, {"factor": (0.0, 1.0)}, dpi=0), ValueError, "dpi"),
    (lambda: gw.explore(gradlab.scale_gradient, {"factor": (0.0, 1.0)}, figsize=(8, -1)), ValueError, "figsize"),
    (lambda: gw.explore(gradlab.scale_gradient, {"factor": (0.0, 1.0)}, title=3), TypeError, "title"),
    (lambda: gw.explore(gradlab.surrogate_step, {"width": (-1.0, 1.0, 0.1, -0.5)}, fn=None), ValueError,
     "initial setting.*width must be > 0"),
    (lambda: gw.explore(lambda x, k: tf.reduce_sum(x) * k, {"k": (0.0, 1.0)}, fn=None), ValueError, "elementwise"),
    (lambda: gw.clip_explorer(0.5, -0.5), ValueError, "clip_min must be <= clip_max"),
    (lambda: gw.clip_explorer(-2.0, 0.5), ValueError, "clip_min must be in"),
    (lambda: gw.scale_explorer(5.0), ValueError, "factor must be in"),
    (lambda: gw.scale_explorer("1"), TypeError, "factor"),
    (lambda: gw.surrogate_explorer(width=0.0), ValueError, "width"),
    (lambda: gw.straight_through_explorer("ceil"), ValueError, "forward must be one of"),
    (lambda: gw.straight_through_explorer(backward="relu"), ValueError, "backward must be one of"),
])
def test_bad_arguments_raise_naming_the_argument(call, error, pattern):
    with pytest.raises(error, match=pattern):
        call()


def test_sliders_are_labelled_with_meaning():
    """The hover text is in the state sent to the browser, under ipywidgets' own name for it (8: tooltip,
    7, Colab's: description_tooltip, where tooltip= would be ignored)."""
    assert TOOLTIP == ("tooltip" if int(ipywidgets.__version__.split(".")[0]) >= 8 else "description_tooltip")
    for make in (gw.clip_explorer, gw.scale_explorer, gw.surrogate_explorer, gw.straight_through_explorer):
        explorer = make()
        try:
            for widget in explorer.sliders.values():
                assert widget.description and len(widget.get_state()[TOOLTIP]) > 40
                if isinstance(widget, (ipywidgets.FloatSlider, ipywidgets.FloatRangeSlider)):
                    assert widget.continuous_update
                    assert 0 < widget.step <= (widget.max - widget.min) / 20
        finally:
            explorer.close()


def test_docstring_examples_run():
    result = doctest.testmod(gw, optionflags=doctest.ELLIPSIS | doctest.NORMALIZE_WHITESPACE)
    assert result.attempted >= 10 and result.failed == 0


# --- imports and a real kernel ------------------------------------------------------------------------

def test_import_gradlab_loads_neither_plots_nor_widgets():
    # TensorFlow 2.21 itself imports matplotlib.pyplot when matplotlib is installed (through
    # keras.src.visualization), so the check is that gradlab adds nothing to what TensorFlow loads.
    code = textwrap.dedent("""
        import sys
        def loaded():
            return {m for m in sys.modules if m.split('.')[0] in ('matplotlib', 'ipywidgets')
                    or m in ('gradlab.plots', 'gradlab.widgets')}
        import tensorflow
        before = loaded()
        import gradlab
        print(sorted(loaded() - before))
        import gradlab.plots
        print(sorted(m for m in loaded() - before if not m.startswith('matplotlib')))
        gradlab.widgets.Explorer  # the lazy attribute imports the module on first use
        print('ipywidgets' in sys.modules, 'gradlab.widgets' in sys.modules)
    """)
    env = {**os.environ, "TF_CPP_MIN_LOG_LEVEL": "2", "TF_ENABLE_ONEDNN_OPTS": "0"}
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env,
                            timeout=300, check=True)
    assert result.stdout.split("\n")[:3] == ["[]", "['gradlab.plots']", "True True"]


@pytest.fixture(scope="module")
def kernel():
    jupyter_client = pytest.importorskip("jupyter_client")
    env = {**os.environ, "TF_CPP_MIN_LOG_LEVEL": "2", "TF_ENABLE_ONEDNN_OPTS": "0"}
    env.pop("MPLBACKEND", None)
    manager, client = jupyter_client.manager.start_new_kernel(kernel_name="python3", env=env)
    yield client
    client.stop_channels()
    manager.shutdown_kernel(now=True)


def run_cell(client, code: str) -> list[tuple[str, dict]]:
    """Runs code in the kernel; returns its outputs as (message type, content)."""
    msg_id = client.execute(code)
    outputs = []
    while True:
        try:
            message = client.get_iopub_msg(timeout=120)
        except queue.Empty:
            raise AssertionError(f"the kernel did not finish running {code!r}") from None
        if message["parent_header"].get("msg_id") != msg_id:
            continue
        kind = message["msg_type"]
        if kind == "status" and message["content"]["execution_state"] == "idle":
            return outputs
        if kind in ("execute_result", "display_data", "stream", "error", "clear_output"):
            outputs.append((kind, message["content"]))


def test_in_a_kernel_each_picture_is_shown_once_and_slider_moves_print_nothing(kernel):
    setup = run_cell(kernel, "import numpy as np, tensorflow as tf, matplotlib.pyplot as plt\n"
                             "import gradlab, gradlab.plots, gradlab.widgets")
    assert setup == []
    figure = run_cell(kernel, "gradlab.plots.forward_and_gradient(tf.tanh)")
    assert [(kind, "image/png" in out["data"]) for kind, out in figure] == [("execute_result", True)]
    assigned = run_cell(kernel, "fig = gradlab.plots.gradient_norm_bars([1.0, 2.0])")
    assert assigned == []  # not shown behind the user's back
    explorer = run_cell(kernel, "e = gradlab.widgets.scale_explorer()\ne")
    assert len(explorer) == 1 and explorer[0][0] == "execute_result"
    assert {"application/vnd.jupyter.widget-view+json", "image/png"} <= set(explorer[0][1]["data"])
    assert explorer[0][1]["data"]["text/plain"] == "Explorer(factor=0.5)"  # stable for nbval
    moves = run_cell(kernel, "for v in np.linspace(-2, 2, 41): e.sliders['factor'].value = float(v)\n"
                             "print(e.message == '', plt.get_fignums())")
    assert moves == [("stream", {"name": "stdout", "text": "True []\n"})]


# --- the labels in the learner's language (gradlab/widgets/_labels.py) ---------------------------------

def test_the_explorers_labels_follow_the_language_the_workbook_chose(monkeypatch):
    """English by default; with GRADLAB_LANGUAGE=zh_CN (the Chinese notebooks' setup line) the sliders' descriptions
    and tooltips come from the catalog shipped in the package; the figure and errors stay English."""
    from gradlab.widgets._controls import TOOLTIP      # the hover text's trait: ipywidgets 8's or 7's name

    monkeypatch.delenv("GRADLAB_LANGUAGE", raising=False)
    english = gw.scale_explorer(-0.5)
    assert english.sliders["factor"].description == "gradient factor ×"
    english.close()
    monkeypatch.setenv("GRADLAB_LANGUAGE", "zh_CN")
    scale, clip = gw.scale_explorer(-0.5), gw.clip_explorer(-0.25, 1.5)
    assert scale.sliders["factor"].description == "梯度系数 ×" and "反向传播" in getattr(scale.sliders["factor"], TOOLTIP)
    assert clip.sliders["clip"].description == "裁剪区间 [min, max]"
    for explorer in (scale, clip):
        explorer.close()
    with pytest.raises(ValueError, match="must be in the slider's range"):
        gw.scale_explorer(5.0)


def test_every_explorers_labels_are_chinese_under_zh_cn_and_english_otherwise(monkeypatch):
    """Each preset explorer's descriptions and tooltips (and the dropdowns' marked option names) come from the
    catalog: CJK under GRADLAB_LANGUAGE=zh_CN, the English of _presets.py otherwise; the values stay the same."""
    import re

    from gradlab.widgets._controls import TOOLTIP

    def labels(explorer) -> list[str]:
        texts = []
        for widget in explorer.sliders.values():
            texts += [widget.description, getattr(widget, TOOLTIP)]
        return texts

    def build_all():
        return [gw.scale_explorer(), gw.clip_explorer(), gw.surrogate_explorer(), gw.straight_through_explorer()]

    monkeypatch.delenv("GRADLAB_LANGUAGE", raising=False)
    english = build_all()
    english_labels = [labels(explorer) for explorer in english]
    assert all(not re.search("[\u4e00-\u9fff]", text) for texts in english_labels for text in texts)
    assert english[2].sliders["width"].description == "surrogate half-width"
    assert [label for label, _ in english[3].sliders["backward"].options][0] == "identity"
    monkeypatch.setenv("GRADLAB_LANGUAGE", "zh_CN")
    chinese = build_all()
    for zh, en, en_labels in zip(chinese, english, english_labels):
        for text, english_text in zip(labels(zh), en_labels):
            assert re.search("[\u4e00-\u9fff]", text) and text != english_text, text
        assert [widget.value for widget in zh.sliders.values()] == [widget.value for widget in en.sliders.values()]
    assert chinese[2].sliders["width"].description == "替代导数半宽"
    assert chinese[3].sliders["forward"].description == "前向（值）"
    assert [label for label, _ in chinese[3].sliders["forward"].options] == ["round", "sign", "阶跃（x > 0）", "floor"]
    assert [label for label, _ in chinese[3].sliders["backward"].options] == [
        "恒等映射", "tanh", "hard tanh（裁剪到 [-1, 1]）", "sigmoid"]
    # The repr names the options as a caller passes them, in every language.
    assert repr(chinese[3]) == repr(english[3]) == "Explorer(forward='round', backward='identity')"
    for explorer in english + chinese:
        explorer.close()
