"""An explorer's model without widgets: parameter values in, curves out (gradlab/_explorer_model.py).

tests/library/test_widgets.py drives whole explorers through their sliders; here the model alone, which
needs neither ipywidgets nor matplotlib, and the computation core it shares with gradlab.plots.
"""
from __future__ import annotations

import os
import subprocess
import sys
import textwrap

import numpy as np
import pytest
import tensorflow as tf

import gradlab
from gradlab._compute import CompiledCurves, curves, grid
from gradlab._explorer_model import ExplorerModel, limits_of, padded


def test_the_model_runs_without_ipywidgets_or_matplotlib():
    code = textwrap.dedent(
        """
        import sys
        sys.modules["ipywidgets"] = None   # any import of them now fails
        sys.modules["matplotlib"] = None
        import gradlab
        from gradlab._explorer_model import ExplorerModel
        model = ExplorerModel(gradlab.scale_gradient, ["factor"])
        assert float(model.compute({"factor": -2.0})["gradient"].min()) == -2.0
        assert float(model.compute({"factor": 0.5})["gradient"].max()) == 0.5
        assert model.tracing_count() == 1
        print("ok")
        """
    )
    env = {**os.environ, "TF_CPP_MIN_LOG_LEVEL": "2", "TF_ENABLE_ONEDNN_OPTS": "0"}
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, timeout=300)
    assert result.returncode == 0 and result.stdout.strip().endswith("ok"), result.stderr[-2000:]


def test_the_curves_are_the_ops_definition():
    model = ExplorerModel(gradlab.clip_gradient, ["clip_min", "clip_max"], fn=tf.sin)
    data = model.compute({"clip_min": -0.25, "clip_max": 0.5})
    np.testing.assert_array_equal(data["forward"], data["plain_forward"])
    np.testing.assert_array_equal(data["gradient"], np.clip(data["plain_gradient"], np.float32(-0.25), np.float32(0.5)))
    np.testing.assert_array_equal(data["x"], gradlab.plots.DEFAULT_X)


def test_numeric_parameters_do_not_retrace_and_each_choice_compiles_once():
    model = ExplorerModel(lambda x, factor, mode: mode(gradlab.scale_gradient(x, factor)), ["factor", "mode"], fn=None)
    for factor in (0.1, 0.7, -1.3):
        for mode in (tf.identity, tf.negative):
            model.compute({"factor": factor, "mode": mode})
    assert model.tracing_count() == 2 and model.compiled_count() == 2


@pytest.mark.parametrize("values, error, pattern", [
    ({"factor": 1.0, "width": 2.0}, ValueError, r"unknown parameter\(s\) \['width'\]"),
    ({"factor": float("nan")}, ValueError, "factor must be finite"),
])
def test_a_rejected_setting_raises_the_ops_own_error(values, error, pattern):
    model = ExplorerModel(gradlab.scale_gradient, ["factor"])
    with pytest.raises(error, match=pattern):
        model.compute(values)


def test_a_function_that_is_not_elementwise_is_named():
    model = ExplorerModel(lambda x, k: tf.reduce_sum(x) * k, ["k"], fn=None)
    with pytest.raises(ValueError, match=r"fn\(op\) must be elementwise"):
        model.compute({"k": 1.0})


def test_the_sweep_covers_every_extreme_and_skips_invalid_corners():
    model = ExplorerModel(gradlab.clip_gradient, ["clip_min", "clip_max"])
    values = {"clip_min": -0.5, "clip_max": 0.5}
    options = {"clip_min": [-1.0, -0.5, 1.0], "clip_max": [-1.0, 0.5, 1.0]}  # some corners: min > max
    (forward_low, forward_high), (gradient_low, gradient_high) = model.sweep_limits(values, model.compute(values), options)
    assert gradient_low < -0.99 and gradient_high > 0.99  # clip to [-1, 1] reached, padded
    assert forward_low < -0.99 and forward_high > 0.99     # tanh on [-3, 3]


def test_limits_widen_only_when_the_curves_leave_them():
    x = np.linspace(-1.0, 1.0, 5)
    data = {"forward": x, "plain_forward": x, "gradient": 3 * x, "plain_gradient": x}
    assert limits_of(data, [(-2.0, 2.0), (-4.0, 4.0)]) == [(-2.0, 2.0), (-4.0, 4.0)]
    assert limits_of(data, [(-2.0, 2.0), (-1.0, 1.0)]) == [(-2.0, 2.0), padded(-3.0, 3.0)]
    assert limits_of({**data, "gradient": np.full(5, np.nan), "plain_gradient": np.full(5, np.inf)})[1] == (-1.0, 1.0)


def test_plots_and_explorers_share_one_computation():
    fn = lambda x: tf.tanh(gradlab.scale_gradient(x, 0.5))  # noqa: E731
    eager = gradlab.plots.values_and_gradients(fn)
    compiled = CompiledCurves({"fn": lambda x: fn(x)}, grid(None))({})["fn"]
    direct = [t.numpy() for t in curves({"fn": fn}, grid(None), {})["fn"]]
    for a, b, c in zip(eager, compiled, direct):
        np.testing.assert_allclose(a, b, rtol=1e-6)
        np.testing.assert_array_equal(a, c)


@pytest.mark.parametrize("scale", [1e-9, 1e-7, 1.0, 1e7])
def test_padded_shows_a_small_range_at_its_own_scale_and_a_flat_one_with_height(scale):
    low, high = padded(1.0 * scale, 3.0 * scale)
    assert low == pytest.approx(0.84 * scale) and high == pytest.approx(3.16 * scale)   # 8% of the span each side
    low, high = padded(2.0 * scale, 2.0 * scale)                                        # flat: a visible height
    assert low < 2.0 * scale < high
    assert padded(0.0, 0.0) == (-0.5, 0.5)
