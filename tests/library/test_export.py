"""Export: the modified gradients survive ``.keras`` files and SavedModels loaded in a fresh process.

What TensorFlow 2.21 requires for a custom gradient to survive ``tf.saved_model.save`` (each point
is asserted below):

* ``tf.saved_model.SaveOptions(experimental_custom_gradients=True)``, which is the default. TF then
  traces each gradient function into a graph at save time and stores it with the model. With
  ``False`` the loaded function has no gradient at all: ``tape.gradient`` raises ``LookupError``
  ("No gradient defined for operation 'IdentityN'") as soon as the function is called under a
  tape: loud, not a silently plain gradient (without a tape the forward pass still runs).
* The gradient function must be traceable: ``dy.numpy()`` or other eager-only code makes
  ``save`` raise ``ValueError`` ("Error when tracing gradients for SavedModel").
* Python values the gradient function reads (a float factor, a closed-over number) are baked in as
  constants when TF traces it; a ``tf.Variable`` stays a variable, but only if the saved object
  tracks it (an attribute of the ``tf.Module``): an untracked variable makes ``save`` raise
  (gradlab's ops read a variable in the forward pass, so TensorFlow refuses the function itself
  with ``AssertionError``, "... references an 'untracked' resource"; a gradient function that reads
  one gives ``KeyError``, "... captures tensor ... which is not tracked").
* ``tf.py_function`` inside a gradient saves without complaint but cannot run in another process:
  the loaded gradient raises ``InvalidArgumentError`` (the Python callback is not there).

Keras' ``model.export(..., format="tf_saved_model")`` saves with the default options, so models
with gradlab layers keep their gradients too.
"""

from __future__ import annotations

import inspect
import json
import os
import subprocess
import sys
import textwrap

import keras
import numpy as np
import pytest
import tensorflow as tf

import gradlab
from gradlab import layers

from helpers import OP_NAMES, op_cases, tape_gradient

X = np.array([[0.3, -1.75, 2.2], [-0.4, 0.6, 1e-3]], np.float32)
DY = np.array([[1.0, -2.0, 0.05], [3.0, -0.4, 0.25]], np.float32)
SPEC = tf.TensorSpec([None, 3], tf.float32)


# ------------------------------------------------------------------------------------------------
# .keras: every op inside a custom, registered layer
# ------------------------------------------------------------------------------------------------


@keras.saving.register_keras_serializable(package="gradlab_tests_export")
class OpLayer(keras.layers.Layer):
    """A user's layer that calls a gradlab op, identified by name so that it can be saved."""

    def __init__(self, op_name, **kwargs):
        super().__init__(**kwargs)
        self.op_name = op_name

    def call(self, inputs):
        return op_cases()[self.op_name].apply(inputs)

    def compute_output_shape(self, input_shape):
        return input_shape

    def get_config(self):
        return {**super().get_config(), "op_name": self.op_name}


def test_keras_file_round_trip_of_every_op(tmp_path, assert_bitwise):
    inputs = keras.Input((3,))
    hidden = keras.layers.Dense(3, name="dense")(inputs)
    model = keras.Model(inputs, [OpLayer(name, name=name)(hidden) for name in OP_NAMES])
    path = tmp_path / "ops.keras"
    model.save(path)
    loaded = keras.models.load_model(path)
    kernel = loaded.get_layer("dense").kernel.numpy()
    for i, name in enumerate(OP_NAMES):
        assert type(loaded.get_layer(name)) is OpLayer
        case = op_cases()[name]
        y, grad = tape_gradient(lambda x: loaded(x)[i], X, DY)
        y0, grad0 = tape_gradient(lambda x: model(x)[i], X, DY)
        assert_bitwise(y, y0)
        np.testing.assert_allclose(grad.numpy(), grad0.numpy(), rtol=1e-6)
        # The gradient w.r.t. the model input is (rule applied to DY at the op) @ kernel.T.
        hidden_value = X @ kernel + loaded.get_layer("dense").bias.numpy()
        rule = case.gradient(hidden_value.astype(np.float64), DY.astype(np.float64))
        np.testing.assert_allclose(grad.numpy(), rule @ kernel.T, rtol=1e-5, atol=1e-6)


# ------------------------------------------------------------------------------------------------
# SavedModel: save here, load and differentiate in a fresh Python process
# ------------------------------------------------------------------------------------------------


class OpsModule(tf.Module):
    """Every op as a tf.function with an input signature, plus the cases that need care."""

    def __init__(self):
        super().__init__()
        self.clip_max = tf.Variable(0.5)  # tracked: saved, and still read at gradient time
        self.k = 3.0  # a Python number read by a gradient function: baked in at save time
        for name in OP_NAMES:
            apply = op_cases()[name].apply
            setattr(self, name, tf.function(apply, input_signature=[SPEC]))

    @tf.function(input_signature=[SPEC])
    def clip_variable(self, x):
        return gradlab.clip_gradient(x, -1.0, self.clip_max)

    @tf.function(input_signature=[SPEC])
    def closure(self, x):
        return gradlab.map_gradient(x, lambda dy: dy * self.k)

    @tf.function(input_signature=[SPEC, SPEC])
    def gradient_inside(self, x, dy):
        """A gradient computed inside the saved function is plain graph ops: always kept."""
        with tf.GradientTape() as tape:
            tape.watch(x)
            y = gradlab.clip_gradient_norm(x, 1.0)
        return tape.gradient(y, x, output_gradients=dy)


class PyFunctionModule(tf.Module):
    @tf.function(input_signature=[SPEC])
    def f(self, x):
        return gradlab.map_gradient(
            x, lambda dy: tf.ensure_shape(tf.py_function(lambda d: 2.0 * d, [dy], tf.float32), dy.shape)
        )


LAYER_RULES = {
    "ScaleGradient": (layers.ScaleGradient(0.5), lambda dy: 0.5 * dy),
    "ClipGradient": (layers.ClipGradient(-0.1, 0.2), lambda dy: np.clip(dy, -0.1, 0.2)),
    "ClipGradientNorm": (
        layers.ClipGradientNorm(1.0),
        lambda dy: dy * min(1.0, 1.0 / np.linalg.norm(dy)),
    ),
    "GradientReversal": (layers.GradientReversal(2.0), lambda dy: -2.0 * dy),
}

LOADER = textwrap.dedent(
    """
    import json, sys
    import numpy as np
    import tensorflow as tf

    root, names = sys.argv[1], json.loads(sys.argv[2])
    x = tf.constant(json.loads(sys.argv[3]), tf.float32)
    dy = tf.constant(json.loads(sys.argv[4]), tf.float32)
    out = {}

    def gradient(fn):
        # The forward value and the gradient under DY, or where and how it failed.
        stage = "call under a tape"
        try:
            with tf.GradientTape() as tape:
                tape.watch(x)
                y = fn(x)
            stage = "tape.gradient"
            g = tape.gradient(y, x, output_gradients=dy)
            return {"y": y.numpy().tolist(), "grad": None if g is None else g.numpy().tolist()}
        except Exception as err:  # reported, not raised: the parent asserts on it
            error = {"error": type(err).__name__, "stage": stage, "message": str(err)[:300]}
            return {"y": fn(x).numpy().tolist(), "grad": error}  # the forward alone

    default = tf.saved_model.load(root + "/default")
    for name in names + ["clip_variable", "closure"]:
        out[name] = gradient(getattr(default, name))
    default.clip_max.assign(2.0)  # the restored variable is still read at gradient time
    out["clip_variable_after_assign"] = gradient(default.clip_variable)
    out["gradient_inside"] = default.gradient_inside(x, dy).numpy().tolist()

    off = tf.saved_model.load(root + "/no_custom_gradients")
    out["off_scale_gradient"] = gradient(off.scale_gradient)
    out["off_gradient_inside"] = off.gradient_inside(x, dy).numpy().tolist()

    out["py_function"] = gradient(tf.saved_model.load(root + "/py_function").f)

    exported = tf.saved_model.load(root + "/keras_export")
    for i, layer_name in enumerate(json.loads(sys.argv[5])):
        out["keras_" + layer_name] = gradient(lambda t: exported.serve(t)[i])
    print(json.dumps(out))
    """
)


@pytest.fixture(scope="module")
def loaded_in_a_fresh_process(tmp_path_factory):
    root = tmp_path_factory.mktemp("saved")
    module = OpsModule()
    tf.saved_model.save(module, str(root / "default"))
    options = tf.saved_model.SaveOptions(experimental_custom_gradients=False)
    tf.saved_model.save(module, str(root / "no_custom_gradients"), options=options)
    tf.saved_model.save(PyFunctionModule(), str(root / "py_function"))

    inputs = keras.Input((3,))
    model = keras.Model(inputs, [layer(inputs) for layer, _ in LAYER_RULES.values()])
    quiet = {"verbose": False} if "verbose" in inspect.signature(model.export).parameters else {}  # Keras >= 3.4
    model.export(str(root / "keras_export"), format="tf_saved_model", **quiet)

    env = {**os.environ, "TF_CPP_MIN_LOG_LEVEL": "2", "TF_ENABLE_ONEDNN_OPTS": "0"}
    args = [str(root), json.dumps(list(OP_NAMES)), json.dumps(X.tolist()), json.dumps(DY.tolist()),
            json.dumps(list(LAYER_RULES))]
    result = subprocess.run([sys.executable, "-c", LOADER, *args], capture_output=True, text=True,
                            env=env, timeout=600)
    assert result.returncode == 0, result.stderr[-3000:]
    return json.loads(result.stdout.strip().splitlines()[-1])


@pytest.mark.slow
def test_every_op_keeps_its_gradient_in_a_fresh_process(loaded_in_a_fresh_process, assert_bitwise):
    for name in OP_NAMES:
        case = op_cases()[name]
        got = loaded_in_a_fresh_process[name]
        expected_y = X if case.identity else case.apply(tf.constant(X)).numpy()
        assert_bitwise(np.array(got["y"], np.float32), expected_y)
        expected = case.gradient(X.astype(np.float64), DY.astype(np.float64))
        np.testing.assert_allclose(got["grad"], expected, rtol=1e-6, err_msg=name)


@pytest.mark.slow
def test_variables_stay_variables_python_values_are_baked_in(loaded_in_a_fresh_process):
    got = loaded_in_a_fresh_process
    np.testing.assert_allclose(got["clip_variable"]["grad"], np.clip(DY, -1.0, 0.5))
    np.testing.assert_allclose(got["clip_variable_after_assign"]["grad"], np.clip(DY, -1.0, 2.0))
    np.testing.assert_allclose(got["closure"]["grad"], 3.0 * DY)  # self.k at save time


@pytest.mark.slow
def test_gradient_computed_inside_the_saved_function_is_always_kept(loaded_in_a_fresh_process):
    expected = DY * min(1.0, 1.0 / np.linalg.norm(DY))
    np.testing.assert_allclose(loaded_in_a_fresh_process["gradient_inside"], expected, rtol=1e-6)
    np.testing.assert_allclose(loaded_in_a_fresh_process["off_gradient_inside"], expected, rtol=1e-6)


@pytest.mark.slow
def test_without_experimental_custom_gradients_the_loaded_gradient_fails_loudly(
    loaded_in_a_fresh_process,
):
    """LIMITATION: SaveOptions(experimental_custom_gradients=False) drops the gradient entirely:
    even *calling* the loaded function while a tape watches its input raises (TensorFlow builds
    the backward function when a taped call is recorded); without a tape the forward still works.
    """
    got = loaded_in_a_fresh_process["off_scale_gradient"]
    np.testing.assert_array_equal(got["y"], X)  # the forward pass alone still works
    assert got["grad"]["error"] == "LookupError"
    assert got["grad"]["stage"] == "call under a tape"
    assert "No gradient defined for operation" in got["grad"]["message"]
    assert "IdentityN" in got["grad"]["message"]


@pytest.mark.slow
def test_py_function_in_a_gradient_does_not_survive_the_process(loaded_in_a_fresh_process):
    """LIMITATION: tf.py_function saves, but its Python callback is not in the new process."""
    got = loaded_in_a_fresh_process["py_function"]
    assert got["grad"]["error"] == "InvalidArgumentError"
    assert "callback" in got["grad"]["message"] or "pyfunc" in got["grad"]["message"]


@pytest.mark.slow
def test_keras_export_keeps_the_layers_gradients(loaded_in_a_fresh_process):
    for name, (_, rule) in LAYER_RULES.items():
        got = loaded_in_a_fresh_process["keras_" + name]
        np.testing.assert_array_equal(got["y"], X)
        np.testing.assert_allclose(got["grad"], rule(DY.astype(np.float64)), rtol=1e-6, err_msg=name)


# ------------------------------------------------------------------------------------------------
# What save() refuses, in this process (fast)
# ------------------------------------------------------------------------------------------------


def test_save_default_is_to_keep_custom_gradients():
    assert tf.saved_model.SaveOptions().experimental_custom_gradients is True


def test_save_refuses_an_untracked_variable_read_by_a_gradient(tmp_path):
    untracked = tf.Variable(2.0)

    class Untracked(tf.Module):
        @tf.function(input_signature=[SPEC])
        def f(self, x):
            return gradlab.scale_gradient(x, untracked)

    with pytest.raises((KeyError, AssertionError), match="not tracked|captures|'untracked' resource"):
        tf.saved_model.save(Untracked(), str(tmp_path / "untracked"))


def test_save_refuses_a_gradient_function_that_cannot_be_traced(tmp_path):
    class Untraceable(tf.Module):
        @tf.function(input_signature=[SPEC])
        def f(self, x):
            return gradlab.map_gradient(x, lambda dy: dy * float(dy.numpy().max()))

    with pytest.raises(ValueError, match="Error when tracing gradients for SavedModel"):
        tf.saved_model.save(Untraceable(), str(tmp_path / "untraceable"))
    # the way out TensorFlow suggests: save without the custom gradients
    options = tf.saved_model.SaveOptions(experimental_custom_gradients=False)
    tf.saved_model.save(Untraceable(), str(tmp_path / "forward_only"), options=options)
