"""``gradlab.explain_gradient``: every cause it tells apart, eagerly and in ``tf.function``, and on Keras models.

Each case function marks the line that builds the culprit op with ``# <- culprit``; the expected
``where`` is that line, found with ``inspect`` (never a hard-coded number).
"""
from __future__ import annotations

import dataclasses
import inspect
from typing import Callable, Optional

import keras
import numpy as np
import pytest
import tensorflow as tf

import gradlab

MARK = "# <- culprit"


def culprit_line(obj) -> str:
    """``file:line`` of the line of ``obj``'s source that carries the culprit mark."""
    lines, start = inspect.getsourcelines(obj)
    hits = [start + k for k, line in enumerate(lines) if MARK in line]
    assert len(hits) == 1, f"{obj} must mark exactly one line"
    return f"{inspect.getsourcefile(obj)}:{hits[0]}"


# --- the cases: one function each --------------------------------------------------------------------


def rounds(x):
    return tf.round(x * 3.0) * 2.0  # <- culprit


def floors(x):
    return tf.floor(x) + 1.0  # <- culprit


def argmax(x):
    index = tf.argmax(x)  # <- culprit
    return tf.cast(index, tf.float32) * 2.0


def casts_to_int(x):
    return tf.cast(tf.cast(x, tf.int32), tf.float32) * 2.0  # <- culprit


def compares(x):
    return tf.where(x > 1.0, 1.0, 0.0)  # <- culprit


def numpy_function(x):
    return tf.numpy_function(np.sin, [x], tf.float32, stateful=False)  # <- culprit


def stops(x):
    y = x * 2.0
    return tf.stop_gradient(y) ** 2  # <- culprit


def unused(x):
    return tf.constant(1.0)


def calls_numpy(x):
    y = tf.constant(x.numpy())  # <- culprit
    return y * 2.0


def calls_float(x):
    scale = float(tf.reduce_sum(x))  # <- culprit
    return tf.constant(scale) * 2.0


def dataset(x):
    batches = tf.data.Dataset.from_tensor_slices(x)  # <- culprit
    return batches.map(lambda t: t * 2.0).reduce(0.0, lambda a, b: a + b)


def square_root(x):
    return tf.sqrt(x) * 2.0  # <- culprit


def logarithm_in_where(x):
    return tf.where(x > 0.0, tf.math.log(x), 0.0)  # <- culprit


def norm_at_zero(x):
    return tf.norm(x[:1])  # <- culprit


def power(x):
    return x ** 0.5  # <- culprit


def dead_relu(x):
    return tf.nn.relu(x - 10.0) * 2.0  # <- culprit


def saturated_clip(x):
    return tf.clip_by_value(x, 5.0, 6.0) * 2.0  # <- culprit


def flows(x):
    return tf.reduce_sum(x ** 2)


@dataclasses.dataclass
class Case:
    fn: Callable
    status: str
    op_type: Optional[str]
    marked: bool = True  # whether fn marks its culprit's line
    reason: str = ""  # a word the reason must contain
    autograph: bool = True  # autograph turns float(t) into a cast: that float() stays in TensorFlow


X = [0.0, 1.0, 2.0]  # 0 makes sqrt, log and the norm singular; below 5 saturates the clip
CASES = {
    "Round": Case(rounds, "none", "Round", reason="piecewise constant"),
    "Floor": Case(floors, "none", "Floor", reason="piecewise constant"),
    "ArgMax": Case(argmax, "none", "ArgMax", reason="integer"),
    "Cast to int": Case(casts_to_int, "none", "Cast", reason="int32"),
    "comparison": Case(compares, "none", "Greater", reason="boolean"),
    "numpy_function": Case(numpy_function, "none", "PyFuncStateless", reason="numpy_function"),
    "stop_gradient": Case(stops, "none", "StopGradient", reason="stop_gradient"),
    "unused": Case(unused, "none", None, marked=False, reason="does not use"),
    ".numpy()": Case(calls_numpy, "none", None, reason="out of TensorFlow"),
    "float()": Case(calls_float, "none", None, reason="out of TensorFlow", autograph=False),
    "tf.data": Case(dataset, "none", "TensorSliceDataset", reason="tf.data"),
    "Sqrt": Case(square_root, "nonfinite", "Sqrt", reason="sqrt"),
    "tf.where trap": Case(logarithm_in_where, "nonfinite", "Log", reason="SelectV2"),
    "norm at zero": Case(norm_at_zero, "nonfinite", "Sqrt", reason="norm"),
    "Pow": Case(power, "nonfinite", "Pow", reason="u^p"),
    "dead ReLU": Case(dead_relu, "zero", "Relu", reason="dead ReLU"),
    "saturated clip": Case(saturated_clip, "zero", "Maximum", reason="clip_by_value"),
    "ok": Case(flows, "ok", None, marked=False),
}


def in_mode(fn: Callable, mode: str, autograph: bool = True) -> Callable:
    return tf.function(fn, autograph=autograph) if mode == "function" else fn


def check(entry, case: Case) -> None:
    assert (entry.status, entry.op_type) == (case.status, case.op_type), str(entry)
    assert entry.where == (culprit_line(case.fn) if case.marked else None), str(entry)
    assert case.reason in entry.reason, entry.reason
    assert entry.fix and entry.reason.endswith("."), str(entry)


@pytest.mark.parametrize("mode", ["eager", "function"])
@pytest.mark.parametrize("name", list(CASES))
def test_each_cause(name, mode):
    case = CASES[name]
    report = gradlab.explain_gradient(in_mode(case.fn, mode, case.autograph), tf.constant(X))
    assert len(report) == 1
    check(report[0], case)


@pytest.mark.parametrize("mode", ["eager", "function"])
def test_an_integer_or_boolean_source(mode):
    fn = in_mode(lambda x, n, b: x * tf.cast(n, tf.float32) * tf.cast(b, tf.float32), mode)
    report = gradlab.explain_gradient(fn, tf.constant([1.0, 2.0]), tf.constant([1, 2]), tf.Variable([True, False]))
    assert report.statuses == ("ok", "none", "none")
    for entry, dtype in zip(report[1:], ["int32", "bool"]):
        assert (entry.op_type, entry.where) == (None, None)
        assert f"dtype {dtype}" in entry.reason and "tf.cast" in entry.fix


@pytest.mark.parametrize("mode", ["eager", "function"])
def test_sources_in_order_with_variables_and_closures(mode):
    w = tf.Variable([1.0, -1.0])
    frozen = tf.Variable(2.0, trainable=False)

    def fn(x, w, frozen, unused_source):
        return tf.reduce_sum(tf.round(x) * w) * frozen  # <- culprit

    report = gradlab.explain_gradient(in_mode(fn, mode), tf.constant([0.4, 1.6]), w, frozen, np.float32(3.0))
    assert report.statuses == ("none", "ok", "ok", "none")
    assert (report[0].op_type, report[0].where) == ("Round", culprit_line(fn))
    assert "not trainable" in report[2].reason
    assert "does not use" in report[3].reason
    np.testing.assert_allclose(report[1].gradient.numpy(), [0.0, 4.0])  # round(x) * frozen


def test_a_source_read_from_a_closure_as_well():
    x = tf.constant([0.0, 4.0])

    def fn(_):
        return tf.sqrt(x)  # <- culprit

    entry = gradlab.explain_gradient(fn, x)[0]
    assert (entry.status, entry.op_type, entry.where) == ("nonfinite", "Sqrt", culprit_line(fn))


def test_the_norm_at_zero_leads_with_the_double_where_that_keeps_the_value():
    """Notebook 14 answers the tf.norm question with the double where; the doctor's fix leads with it too."""
    fix = gradlab.explain_gradient(norm_at_zero, tf.constant(X))[0].fix
    assert fix.startswith("Use the double tf.where, which keeps the value exact")
    assert fix.index("double tf.where") < fix.index("epsilon") and "changes the value" in fix


def test_an_op_without_any_gradient():
    def fn(x):
        return tf.truncatemod(x, 2.0)  # <- culprit

    entry = gradlab.explain_gradient(fn, tf.constant([3.0, 4.5]))[0]
    assert (entry.status, entry.op_type, entry.where) == ("none", "TruncateMod", culprit_line(fn))
    assert "registers no gradient" in entry.reason and "raises LookupError" in entry.reason
    assert "returns None" not in entry.reason
    assert "tf.truncatemod jumps" in entry.reason and "piecewise constant" not in entry.reason  # slope 1 between jumps


@pytest.mark.parametrize("op", [tf.round, tf.floor, tf.math.ceil])
def test_a_rounding_op_with_a_registered_gradient_is_not_called_unregistered(op):
    """Round, Floor, Ceil register a gradient that returns None: the tape returns None, it does not raise."""
    entry = gradlab.explain_gradient(lambda x: op(x * 3.0), tf.constant([0.2, 1.4]))[0]
    assert entry.status == "none"
    assert "registered gradient returns None" in entry.reason and "registers no gradient" not in entry.reason
    assert entry.reason.startswith({tf.round: "tf.round ", tf.floor: "tf.math.floor ", tf.math.ceil: "tf.math.ceil "}[op])


def test_a_singular_op_outside_a_norm_leads_with_the_double_where():
    """A hand-written norm, sqrt(sum(x**2)) at 0: the fix keeps the value exact first, the epsilon second."""
    entry = gradlab.explain_gradient(lambda x: tf.sqrt(tf.reduce_sum(x * x)), tf.constant([0.0, 0.0]))[0]
    assert (entry.status, entry.op_type) == ("nonfinite", "Sqrt")
    assert entry.fix.startswith("Where those inputs should give a fixed value, use the double tf.where")
    assert entry.fix.index("double tf.where") < entry.fix.index("epsilon") and "changes the value" in entry.fix


def guarded_square_root(x):
    safe = tf.where(x > 0.0, x, 1.0)
    return tf.where(x > 0.0, tf.sqrt(safe), 0.0)  # <- culprit


def guarded_norm(x):
    s = tf.reduce_sum(x ** 2)
    return tf.where(s > 0.0, tf.sqrt(tf.where(s > 0.0, s, 1.0)), 0.0)  # <- culprit


def selects_a_constant(x):
    return tf.where(x > 5.0, 2.0 * x, 0.0)  # <- culprit


@pytest.mark.parametrize("mode", ["eager", "function"])
@pytest.mark.parametrize("fn, x", [(guarded_square_root, [0.0, -1.0]), (guarded_norm, [0.0, 0.0])])
def test_the_double_where_at_its_guarded_points_is_zero_by_design(fn, x, mode):
    """Issue 39: the doctor's own fix, at the singular point, is not told to check its condition as if broken."""
    entry = gradlab.explain_gradient(in_mode(fn, mode), tf.constant(x))[0]
    assert (entry.status, entry.op_type, entry.where) == ("zero", "SelectV2", culprit_line(fn)), str(entry)
    assert "the branch that does not depend on this source" in entry.reason and "by design" in entry.reason
    assert "guarding a singular point (the Sqrt in its other branch)" in entry.reason
    assert entry.fix.startswith("Nothing to fix if these are the points the tf.where guards")
    assert "If you expected a gradient there, check the condition of the tf.where." in entry.fix
    assert gradlab.explain_gradient(fn, tf.constant([4.0, 1.0])).ok  # away from the guarded point: a gradient


@pytest.mark.parametrize("mode", ["eager", "function"])
def test_a_where_that_selects_a_constant_everywhere_points_at_the_condition_only_as_a_question(mode):
    entry = gradlab.explain_gradient(in_mode(selects_a_constant, mode), tf.constant(X))[0]
    assert (entry.status, entry.op_type, entry.where) == ("zero", "SelectV2", culprit_line(selects_a_constant))
    assert "the branch that does depend on it is selected nowhere" in entry.reason and "singular" not in entry.reason
    assert entry.fix.startswith("Nothing to fix if that is what the tf.where should select there. If you expected")


# --- an unknown batch dimension, float16 ------------------------------------------------------------------


@pytest.mark.parametrize("name", list(CASES))
def test_each_cause_in_a_tf_function_with_an_unknown_batch_dimension(name):
    case = CASES[name]
    fn = tf.function(case.fn, input_signature=[tf.TensorSpec([None], tf.float32)], autograph=case.autograph)
    check(gradlab.explain_gradient(fn, tf.constant(X))[0], case)


def test_a_loss_that_calls_a_tf_function_with_an_unknown_batch_dimension():
    """The inner tf.function is traced into the doctor's graph: the culprit is its op, not a call op."""
    @tf.function(input_signature=[tf.TensorSpec([None, 2], tf.float32)])
    def features(x):
        return tf.nn.relu(x - 10.0)  # <- culprit

    w = tf.Variable([1.0, 2.0])

    def loss(w):
        return tf.reduce_sum(features(tf.ones([3, 2]) * w))

    report = gradlab.explain_gradient(loss, w)
    assert (report[0].status, report[0].op_type, report[0].where) == ("zero", "Relu", culprit_line(features.python_function))
    report = gradlab.explain_gradient(lambda x: tf.reduce_sum(features(x)), tf.ones([4, 2]))
    assert (report[0].status, report[0].op_type) == ("zero", "Relu")
    assert not tf.config.functions_run_eagerly()  # the doctor puts the setting back


_FLOAT32_ONLY = ("numpy_function", "tf.data")  # their functions name float32 (Tout, the reduce's initial value)


@pytest.mark.parametrize("mode", ["eager", "function"])
@pytest.mark.parametrize("name", [name for name in CASES if name not in _FLOAT32_ONLY])
def test_each_cause_with_a_float16_source(name, mode):
    case = CASES[name]
    entry = gradlab.explain_gradient(in_mode(case.fn, mode, case.autograph), tf.constant(X, tf.float16))[0]
    assert "float16" in entry.source
    check(entry, case)


@pytest.mark.parametrize("mode", ["eager", "function"])
def test_a_float16_overflow_is_not_called_a_singularity(mode):
    def reciprocal(x):
        return 1.0 / x  # <- culprit

    x = [0.001, 1.0]  # d(1/x)/dx = -10**6 at 0.001: finite in float32, beyond float16's 65,504
    assert gradlab.explain_gradient(in_mode(reciprocal, mode), tf.constant(x)).ok
    for source in (tf.constant(x, tf.float16), tf.Variable(x, dtype=tf.float16)):
        entry = gradlab.explain_gradient(in_mode(reciprocal, mode), source)[0]
        assert (entry.status, entry.op_type, entry.where) == ("nonfinite", "RealDiv", culprit_line(reciprocal))
        assert "float16" in entry.reason and "65,504" in entry.reason and "float32" in entry.fix


# --- Keras models --------------------------------------------------------------------------------------


class Quantize(keras.layers.Layer):
    """A layer that rounds its input: its weight gets no gradient."""

    def build(self, input_shape):
        self.scale = self.add_weight(shape=(input_shape[-1],), initializer="ones")

    def call(self, x):
        return tf.round(x * self.scale)  # <- culprit


class Frozen(keras.layers.Layer):
    """A layer that stops the gradient of its own weight."""

    def build(self, input_shape):
        self.shift = self.add_weight(shape=(input_shape[-1],), initializer="zeros")

    def call(self, x):
        return x + tf.stop_gradient(self.shift)  # <- culprit


def keras_model():
    dense = keras.layers.Dense(3, activation="relu", bias_initializer=keras.initializers.Constant(-100.0))
    inputs = keras.Input((2,))
    quantized = Quantize()(inputs)
    hidden = Frozen()(keras.layers.Dense(2)(quantized))
    outputs = keras.layers.Dense(1)(dense(hidden))
    return keras.Model(inputs, outputs), dense


@pytest.fixture(scope="module")
def model():
    keras.utils.set_random_seed(0)
    return keras_model()


@pytest.mark.parametrize("mode", ["eager", "function"])
def test_a_keras_model(model, mode):
    net, dense = model
    x = tf.ones([4, 2])

    def loss(*weights):
        return tf.reduce_sum(net(x))  # <- culprit

    quantize, frozen = net.layers[1], net.layers[3]
    report = gradlab.explain_gradient(in_mode(loss, mode), quantize.scale, frozen.shift, dense.kernel,
                                      net.layers[-1].kernel)
    assert len(report) == 4
    assert (report[0].status, report[0].op_type, report[0].where) == ("none", "Round", culprit_line(Quantize.call))
    assert (report[1].status, report[1].op_type, report[1].where) == ("none", "StopGradient", culprit_line(Frozen.call))
    assert (report[2].status, report[2].op_type, report[2].where) == ("zero", "Relu", culprit_line(loss))
    assert dense.name in report[2].op_name and "dead ReLU" in report[2].reason
    assert report[3].status == "zero"  # the dead ReLU's zeros reach the last layer's kernel too
    assert "Keras variable" in report[0].source


def test_a_keras_model_as_fn_and_its_input_as_source(model):
    net, _ = model
    report = gradlab.explain_gradient(net, np.ones([1, 2], np.float32))
    assert report[0].status == "none" and report[0].op_type == "Round"
    assert report[0].where == culprit_line(Quantize.call)


# --- the report ---------------------------------------------------------------------------------------


def test_the_report_reads_as_text_and_as_a_table():
    report = gradlab.explain_gradient(lambda x, w: rounds(x) * w, tf.constant([1.0]), tf.Variable(2.0))
    assert len(report) == 2 and [e.status for e in report] == ["none", "ok"] and not report.ok
    text = str(report)
    assert text.startswith("Gradient report: 1 of 2 sources ok") and "Round" in text and "fix:" in text
    assert repr(report) == text
    table = report._repr_html_()
    assert table.startswith("<table>") and table.count("<tr>") == 3 and "test_doctor.py:" in table
    assert "Round" in str(report[0]) and report[0].reason in str(report[0])


def test_a_notebook_cell_shows_its_line_and_code_not_the_kernels_file(tmp_path):
    """A Jupyter kernel compiles a cell into ipykernel_<pid>/<hash>.py: a machine path, unstable from run to run."""
    cell = tmp_path / "ipykernel_4242" / "1234.py"
    cell.parent.mkdir()
    cell.write_text("w = 1.0\nq = tf.round(w * 4.0) / 4.0        # quarters\n")
    entry = gradlab.GradientDiagnosis("sources[0]: tensor float32 ()", "none", "Round", f"{cell}:2", "why.", "fix.")
    report = gradlab.GradientReport([entry])
    for text in (str(report), report._repr_html_()):
        assert "line 2 of a notebook cell: q = tf.round(w * 4.0) / 4.0" in text
        assert str(tmp_path) not in text
    assert entry.where == f"{cell}:2"  # the attribute keeps the file


def test_a_notebook_cell_in_a_reason_shows_its_line_and_code(tmp_path):
    """The reasons that name a second line (the tf.where of the trap, where a value left TensorFlow) show it the same way."""
    cell = tmp_path / "ipykernel_4242" / "5678.py"
    cell.parent.mkdir()
    cell.write_text("def f(x):\n    return tf.where(x > 0.0, tf.math.log(x), 0.0)\n"
                    "def g(x):\n    return tf.constant(x.numpy() * 2.0)\n")
    namespace = {"tf": tf}
    exec(compile(cell.read_text(), str(cell), "exec"), namespace)
    x = tf.constant([0.0, 2.0])
    for fn, says in ((namespace["f"], "(SelectV2 at line 2 of a notebook cell: return tf.where(x > 0.0, tf.math.log(x), 0.0))"),
                     (namespace["g"], "out of TensorFlow at line 4 of a notebook cell: return tf.constant(x.numpy() * 2.0)")):
        entry = gradlab.explain_gradient(fn, x)[0]
        assert entry.where == f"{cell}:{2 if fn is namespace['f'] else 4}"
        assert says in entry.reason and str(tmp_path) not in entry.reason and str(tmp_path) not in str(entry)


# --- bad input ------------------------------------------------------------------------------------------


def test_fn_must_be_callable():
    with pytest.raises(TypeError, match=r"fn must be a callable.*str 'tf.round'"):
        gradlab.explain_gradient("tf.round", tf.constant(1.0))


def test_at_least_one_source():
    with pytest.raises(TypeError, match="at least one source"):
        gradlab.explain_gradient(lambda: tf.constant(1.0))


@pytest.mark.parametrize("source, message", [
    ("x", r"sources\[0\] must be a tensor.*str 'x'"),
    (None, r"sources\[0\] must be a tensor.*NoneType"),
    ({"x": 1.0}, r"sources\[0\] must be a tensor.*dict"),
    ([[1.0], [2.0, 3.0]], r"sources\[0\].*cannot convert"),
    (tf.ragged.constant([[1.0], [2.0, 3.0]]), r"sources\[0\] is a RaggedTensor"),
])
def test_a_source_must_be_a_tensor_variable_or_array(source, message):
    with pytest.raises(TypeError, match=message):
        gradlab.explain_gradient(lambda x: x, source)


@pytest.mark.parametrize("output, error, message", [
    (None, TypeError, "fn returned None"),
    ("loss", TypeError, "tensor or a nest.*str 'loss'"),
    (np.float32(1.0), TypeError, "left TensorFlow"),
    (2.0, TypeError, "left TensorFlow"),
    ([], ValueError, "empty structure"),
])
def test_the_output_must_be_tensors(output, error, message):
    with pytest.raises(error, match=message):
        gradlab.explain_gradient(lambda x: output, tf.constant(1.0))


def test_a_nest_of_outputs_is_summed():
    report = gradlab.explain_gradient(lambda x: {"a": x * 2.0, "b": (tf.round(x), x * 3.0)}, tf.constant([1.0]))
    assert report.ok and report[0].gradient.numpy().tolist() == [5.0]


def test_it_runs_eagerly_only():
    @tf.function
    def inside(x):
        return gradlab.explain_gradient(lambda t: t, x)

    with pytest.raises(RuntimeError, match="outside tf.function"):
        inside(tf.constant(1.0))


def test_an_error_inside_fn_is_raised_unchanged():
    def broken(x):
        raise KeyError("a bug in fn")

    with pytest.raises(KeyError, match="a bug in fn"):
        gradlab.explain_gradient(broken, tf.constant(1.0))


def test_every_status_is_one_of_the_four():
    assert gradlab.doctor.STATUSES == ("ok", "none", "nonfinite", "zero")
    seen = {case.status for case in CASES.values()}
    assert seen == set(gradlab.doctor.STATUSES)



def test_diagnoses_in_two_threads_restore_the_process_setting():
    """The trace switches tf.config.run_functions_eagerly on for the process; concurrent diagnoses (a lock) leave
    it as they found it, and each reports its own cause."""
    import concurrent.futures

    @tf.function
    def rounded(x):
        return tf.round(x) * 2.0

    def diagnose(_):
        return gradlab.explain_gradient(lambda x: rounded(x), tf.constant([0.3, 1.7]))[0].status

    assert not tf.config.functions_run_eagerly()
    with concurrent.futures.ThreadPoolExecutor(max_workers=4) as pool:
        statuses = list(pool.map(diagnose, range(8)))
    assert statuses == ["none"] * 8
    assert not tf.config.functions_run_eagerly()
