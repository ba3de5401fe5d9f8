"""Hostile and careless input for every public function and layer constructor.

Tables of bad values (wrong types, wrong dtypes, NaN/inf, non-scalars, empty, ragged, sparse,
Keras symbolic tensors...) are crossed with every argument that accepts them; each combination
must raise ``TypeError`` or ``ValueError`` at call time with a message that names the argument.
``test_count_of_hostile_inputs`` prints how many combinations were tried.

Also here: parameters given as tensors and variables (read at run time in the forward pass, checked when the
gradient runs),
empty and 0-d inputs in every mode, very large inputs (no copy), and non-finite upstream
gradients (a property test: NaN appears only where the rule's arithmetic defines it).
"""

from __future__ import annotations

import decimal
import itertools

import keras
import numpy as np
import pytest
import tensorflow as tf
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp

import gradlab
from gradlab import layers

from helpers import OP_NAMES, WIDTH, op_cases

X = [1.0, -2.0]
X64 = tf.constant([0.5, -1.0, 2.0], tf.float64)

# ------------------------------------------------------------------------------------------------
# Tables
# ------------------------------------------------------------------------------------------------


def _symbolic_keras_tensor():
    return keras.Input((3,))


#: Not a floating-point tensor: (value factory). Every one must be a TypeError.
BAD_TENSORS = {
    "None": lambda: None,
    "str": lambda: "1.0",
    "bytes": lambda: b"1.0",
    "int list": lambda: [1, 2],
    "bool list": lambda: [True, False],
    "int64 array": lambda: np.arange(2),
    "uint8 array": lambda: np.array([1, 2], np.uint8),
    "int32 tensor": lambda: tf.constant([1, 2]),
    "uint8 tensor": lambda: tf.constant([1, 2], tf.uint8),
    "bool tensor": lambda: tf.constant([True, False]),
    "complex tensor": lambda: tf.constant([1j, 2j]),
    "complex array": lambda: np.array([1j, 2j]),
    "string tensor": lambda: tf.constant(["a", "b"]),
    "object array": lambda: np.array([1.0, None], dtype=object),
    "datetime array": lambda: np.array(["2020-01-01", "2020-01-02"], dtype="datetime64[D]"),
    "longdouble array": lambda: np.array([1.0, 2.0], np.longdouble),
    "ragged list": lambda: [[1.0], [2.0, 3.0]],
    "ragged tensor": lambda: tf.ragged.constant([[1.0], [2.0, 3.0]]),
    "sparse tensor": lambda: tf.sparse.from_dense([[1.0, 0.0]]),
    "sparse tensor value": lambda: tf.compat.v1.SparseTensorValue([[0]], [1.0], [2]),
    "dict": lambda: {"x": 1.0},
    "set": lambda: {1.0, 2.0},
    "generator": lambda: (float(i) for i in range(2)),
    "object": lambda: object(),
    "function": lambda: (lambda: 1.0),
    "TensorArray": lambda: tf.TensorArray(tf.float32, size=2),
    "KerasTensor": _symbolic_keras_tensor,
    "int Variable": lambda: tf.Variable([1, 2]),
}

#: Every argument that takes a tensor: (builder(value) -> result).
TENSOR_ARGS = {
    "map_gradient.x": ("x", lambda v: gradlab.map_gradient(v, lambda dy: dy)),
    "scale_gradient.x": ("x", lambda v: gradlab.scale_gradient(v, 2.0)),
    "clip_gradient.x": ("x", lambda v: gradlab.clip_gradient(v, -1.0, 1.0)),
    "clip_gradient_norm.x": ("x", lambda v: gradlab.clip_gradient_norm(v, 1.0)),
    "reverse_gradient.x": ("x", lambda v: gradlab.reverse_gradient(v)),
    "surrogate_step.x": ("x", lambda v: gradlab.surrogate_step(v)),
    "straight_through.forward": ("forward", lambda v: gradlab.straight_through(v, X)),
    "straight_through.backward": ("backward", lambda v: gradlab.straight_through(X, v)),
    "check_gradient.x": ("x", lambda v: gradlab.check_gradient(tf.sin, v)),
}

#: Not a usable scalar: (value factory, error).
BAD_SCALARS = {
    "None": (lambda: None, TypeError),
    "str": (lambda: "2", TypeError),
    "bytes": (lambda: b"2", TypeError),
    "bool": (lambda: True, TypeError),
    "np.bool_": (lambda: np.bool_(False), TypeError),
    "list": (lambda: [2.0], TypeError),
    "tuple": (lambda: (2.0,), TypeError),
    "dict": (lambda: {"v": 2.0}, TypeError),
    "complex": (lambda: 2j, TypeError),
    "np.complex64": (lambda: np.complex64(2), TypeError),
    "Decimal": (lambda: decimal.Decimal("2"), TypeError),
    "object": (lambda: object(), TypeError),
    "function": (lambda: (lambda: 2.0), TypeError),
    "string tensor": (lambda: tf.constant("2"), TypeError),
    "bool tensor": (lambda: tf.constant(True), TypeError),
    "complex tensor": (lambda: tf.constant(2j), TypeError),
    "bool 0-d array": (lambda: np.array(True), TypeError),
    "str 0-d array": (lambda: np.array("2"), TypeError),
    "nan": (lambda: float("nan"), ValueError),
    "inf": (lambda: float("inf"), ValueError),
    "-inf": (lambda: -np.inf, ValueError),
    "np.float32 nan": (lambda: np.float32("nan"), ValueError),
    "np.float16 inf": (lambda: np.float16(np.inf), ValueError),
    "int beyond float": (lambda: 10**400, ValueError),
    "nan tensor": (lambda: tf.constant(np.nan), ValueError),
    "inf float16 tensor": (lambda: tf.constant(np.inf, tf.float16), ValueError),
    "nan 0-d array": (lambda: np.array(np.nan), ValueError),
    "vector tensor": (lambda: tf.constant([1.0, 2.0]), ValueError),
    "empty tensor": (lambda: tf.zeros([0]), ValueError),
    "matrix array": (lambda: np.ones((2, 2)), ValueError),
    "empty array": (lambda: np.array([]), ValueError),
    "vector Variable": (lambda: tf.Variable([1.0, 2.0]), ValueError),
    "ragged tensor": (lambda: tf.ragged.constant([[1.0], []]), TypeError),
}

#: Extra bad values for parameters that must be > 0.
BAD_POSITIVE = {
    "0": lambda: 0,
    "0.0": lambda: 0.0,
    "-0.0": lambda: -0.0,
    "-1": lambda: -1,
    "tiny negative": lambda: -1e-300,
    "0 tensor": lambda: tf.constant(0.0),
    "negative int tensor": lambda: tf.constant(-3),
}

#: Every scalar parameter: (name, builder(value), must be positive).
SCALAR_ARGS = {
    "scale_gradient.factor": ("factor", lambda p: gradlab.scale_gradient(X, p), False),
    "reverse_gradient.factor": ("factor", lambda p: gradlab.reverse_gradient(X, p), False),
    "clip_gradient.clip_min": ("clip_min", lambda p: gradlab.clip_gradient(X, p, 1.0), False),
    "clip_gradient.clip_max": ("clip_max", lambda p: gradlab.clip_gradient(X, -1.0, p), False),
    "clip_gradient_norm.max_norm": ("max_norm", lambda p: gradlab.clip_gradient_norm(X, p), True),
    "surrogate_step.width": ("width", lambda p: gradlab.surrogate_step(X, p), True),
    "check_gradient.delta": ("delta", lambda p: gradlab.check_gradient(tf.sin, X64, delta=p), True),
    "check_gradient.rtol": ("rtol", lambda p: gradlab.check_gradient(tf.sin, X64, rtol=p), True),
    "check_gradient.atol": ("atol", lambda p: gradlab.check_gradient(tf.sin, X64, atol=p), True),
    "ScaleGradient.factor": ("factor", lambda p: layers.ScaleGradient(p), False),
    "GradientReversal.factor": ("factor", lambda p: layers.GradientReversal(p), False),
    "ClipGradient.clip_min": ("clip_min", lambda p: layers.ClipGradient(p, 1.0), False),
    "ClipGradient.clip_max": ("clip_max", lambda p: layers.ClipGradient(-1.0, p), False),
    "ClipGradientNorm.max_norm": ("max_norm", lambda p: layers.ClipGradientNorm(p), True),
}
LAYER_ARGS = [k for k in SCALAR_ARGS if k[0].isupper()]

#: Values the ops accept but a layer cannot store in its config.
BAD_LAYER_PARAMS = {
    "tf.Variable": lambda: tf.Variable(0.5),
    "keras.Variable": lambda: keras.Variable(0.5, trainable=False),
}

#: Other misuse: (call, error, regex of the message).
OTHER_BAD_CALLS = {
    "map_gradient fn None": (lambda: gradlab.map_gradient(X, None), TypeError, "fn must be callable"),
    "map_gradient fn float": (lambda: gradlab.map_gradient(X, 2.0), TypeError, "fn must be callable"),
    "map_gradient fn str": (lambda: gradlab.map_gradient(X, "square"), TypeError, "fn must be callable"),
    "map_gradient fn list": (lambda: gradlab.map_gradient(X, []), TypeError, "fn must be callable"),
    "straight_through dtypes": (
        lambda: gradlab.straight_through(tf.constant(X, tf.float16), tf.constant(X)),
        TypeError, "one dtype"),
    "straight_through shapes": (
        lambda: gradlab.straight_through([1.0], X), ValueError, "one shape"),
    "straight_through scalar vs vector": (
        lambda: gradlab.straight_through(1.0, X), ValueError, "one shape"),
    "clip bounds inverted": (lambda: gradlab.clip_gradient(X, 1.0, -1.0), ValueError, "clip_min must be <= clip_max"),
    "clip bounds inverted (tensors)": (
        lambda: gradlab.clip_gradient(X, tf.constant(1), tf.constant(0)), ValueError, "clip_min must be <= clip_max"),
    "ClipGradient inverted": (lambda: layers.ClipGradient(0.5, -0.5), ValueError, "clip_min must be <= clip_max"),
    "register_gradient fn None": (lambda: gradlab.register_gradient(None), TypeError, "fn must be callable"),
    "register_gradient fn str": (lambda: gradlab.register_gradient("Relu"), TypeError, "fn must be callable"),
    "register_gradient name int": (
        lambda: gradlab.register_gradient(lambda op, g: g, 3), TypeError, "name must be a string"),
    "register_gradient name bytes": (
        lambda: gradlab.register_gradient(lambda op, g: g, b"x"), TypeError, "name must be a string"),
    "register_gradient name empty": (
        lambda: gradlab.register_gradient(lambda op, g: g, ""), ValueError, "non-empty"),
    "register_gradient built-in Relu": (
        lambda: gradlab.register_gradient(lambda op, g: g, "Relu"), ValueError, "did not register"),
    "register_gradient built-in Identity": (
        lambda: gradlab.register_gradient(lambda op, g: g, "Identity"), ValueError, "did not register"),
    "check_gradient fn None": (lambda: gradlab.check_gradient(None, X64), TypeError, "fn must be callable"),
    "check_gradient reference str": (
        lambda: gradlab.check_gradient(tf.sin, X64, reference="exact"), TypeError, "reference must be callable"),
    "check_gradient seed str": (lambda: gradlab.check_gradient(tf.sin, X64, seed="a"), TypeError, "seed must be an int"),
    "check_gradient seed float": (lambda: gradlab.check_gradient(tf.sin, X64, seed=1.5), TypeError, "seed must be an int"),
    "check_gradient seed bool": (lambda: gradlab.check_gradient(tf.sin, X64, seed=True), TypeError, "seed must be an int"),
    "check_gradient seed None": (lambda: gradlab.check_gradient(tf.sin, X64, seed=None), TypeError, "seed must be an int"),
    "check_gradient seed negative": (lambda: gradlab.check_gradient(tf.sin, X64, seed=-1), ValueError, "seed must be >= 0"),
    "check_gradient fn returns None": (
        lambda: gradlab.check_gradient(lambda t: None, X64), TypeError, r"fn\(x\) must be"),
    "check_gradient fn returns str": (
        lambda: gradlab.check_gradient(lambda t: "y", X64), TypeError, r"fn\(x\) must be"),
    "check_gradient fn returns int": (
        lambda: gradlab.check_gradient(lambda t: tf.cast(t, tf.int32), X64), TypeError, r"fn\(x\) must have a floating dtype"),
    "check_gradient fn returns ragged": (
        lambda: gradlab.check_gradient(lambda t: tf.RaggedTensor.from_row_lengths(t, [3]), X64),
        TypeError, r"fn\(x\) is a tf\.RaggedTensor"),
    "check_gradient reference returns None": (
        lambda: gradlab.check_gradient(tf.sin, X64, reference=lambda x, u: None),
        TypeError, r"reference\(x, upstream\) must be"),
    "check_gradient reference wrong shape": (
        lambda: gradlab.check_gradient(tf.sin, X64, reference=lambda x, u: tf.zeros([2], tf.float64)),
        ValueError, "reference returned shape"),
    "layer dtype int32": (
        lambda: layers.ScaleGradient(2.0, dtype="int32")(np.ones((1, 2), np.float32)),
        TypeError, "floating dtype"),
}


def _override_in_graph(mapping):
    with tf.Graph().as_default():
        with gradlab.gradient_override(mapping):
            pass


OVERRIDE_BAD_CALLS = {
    "mapping None": (lambda: _override_in_graph(None), TypeError, "mapping must be a dict"),
    "mapping list": (lambda: _override_in_graph([("Relu", "x")]), TypeError, "mapping must be a dict"),
    "mapping str": (lambda: _override_in_graph("Relu"), TypeError, "mapping must be a dict"),
    "key int": (lambda: _override_in_graph({3: lambda op, g: g}), TypeError, "must be strings"),
    "key lower-case": (lambda: _override_in_graph({"relu": lambda op, g: g}), ValueError, "Did you mean 'Relu'"),
    "key unknown": (lambda: _override_in_graph({"NotAnOpType": lambda op, g: g}), ValueError, "not a TensorFlow op type"),
    "key empty": (lambda: _override_in_graph({"": lambda op, g: g}), ValueError, "not a TensorFlow op type"),
    "value int": (lambda: _override_in_graph({"Relu": 3}), TypeError, "registered name or a function"),
    "value None": (lambda: _override_in_graph({"Relu": None}), TypeError, "registered name or a function"),
    "value unregistered name": (
        lambda: _override_in_graph({"Relu": "gradlab_tests.hostile.nothing"}), ValueError, "no gradient is registered"),
    "eager": (lambda: gradlab.gradient_override({"Relu": lambda op, g: g}).__enter__(), RuntimeError, "no effect in eager"),
}

# ------------------------------------------------------------------------------------------------
# The cross products, as parametrized tests
# ------------------------------------------------------------------------------------------------

TENSOR_CASES = list(itertools.product(TENSOR_ARGS, BAD_TENSORS))
SCALAR_CASES = [  # None is check_gradient's default ("use the dtype's default"), so valid there
    (a, b) for a, b in itertools.product(SCALAR_ARGS, BAD_SCALARS)
    if not (a.startswith("check_gradient.") and b == "None")
]
POSITIVE_CASES = [(a, b) for a in SCALAR_ARGS if SCALAR_ARGS[a][2] for b in BAD_POSITIVE]
LAYER_PARAM_CASES = list(itertools.product(LAYER_ARGS, BAD_LAYER_PARAMS))


@pytest.mark.parametrize("arg, value", TENSOR_CASES, ids=[f"{a}={v}" for a, v in TENSOR_CASES])
def test_bad_tensor_arguments_raise_type_error_naming_the_argument(arg, value):
    name, call = TENSOR_ARGS[arg]
    with pytest.raises(TypeError, match=rf"^{name}\b"):
        call(BAD_TENSORS[value]())


@pytest.mark.parametrize("arg, value", SCALAR_CASES, ids=[f"{a}={v}" for a, v in SCALAR_CASES])
def test_bad_scalar_parameters_raise_naming_the_argument(arg, value):
    name, call, _ = SCALAR_ARGS[arg]
    factory, error = BAD_SCALARS[value]
    with pytest.raises(error, match=rf"^{name} must"):
        call(factory())


@pytest.mark.parametrize("arg, value", POSITIVE_CASES, ids=[f"{a}={v}" for a, v in POSITIVE_CASES])
def test_non_positive_values_raise_for_positive_parameters(arg, value):
    name, call, _ = SCALAR_ARGS[arg]
    with pytest.raises(ValueError, match=rf"^{name} must be > 0"):
        call(BAD_POSITIVE[value]())


@pytest.mark.parametrize(
    "arg, value", LAYER_PARAM_CASES, ids=[f"{a}={v}" for a, v in LAYER_PARAM_CASES]
)
def test_layers_refuse_variables_with_a_pointer_to_the_op(arg, value):
    """A layer's parameters live in its config (.keras files); a variable would not survive, and
    used to fail only at load time with an obscure deserialisation error."""
    name, call, _ = SCALAR_ARGS[arg]
    with pytest.raises(TypeError, match=rf"^{name} of a gradlab layer must be a number.*add_weight"):
        call(BAD_LAYER_PARAMS[value]())


@pytest.mark.parametrize("case", list(OTHER_BAD_CALLS))
def test_other_misuse_raises_a_clear_error(case):
    call, error, pattern = OTHER_BAD_CALLS[case]
    with pytest.raises(error, match=pattern):
        call()


@pytest.mark.parametrize("case", list(OVERRIDE_BAD_CALLS))
def test_gradient_override_misuse_raises_a_clear_error(case):
    call, error, pattern = OVERRIDE_BAD_CALLS[case]
    with pytest.raises(error, match=pattern):
        call()


def test_layer_parameters_are_plain_floats_in_the_config():
    for value in (2, np.float32(2.0), np.int64(2), np.array(2.0), tf.constant(2.0), tf.constant(2)):
        layer = layers.ScaleGradient(value)
        assert type(layer.factor) is float and layer.get_config()["factor"] == 2.0


def test_keras_tensor_gets_a_pointer_to_the_layers():
    with pytest.raises(TypeError, match="KerasTensor.*gradlab.layers.ScaleGradient"):
        gradlab.scale_gradient(keras.Input((3,)), 2.0)


# ------------------------------------------------------------------------------------------------
# Parameters known only at run time: variables and symbolic tensors
# ------------------------------------------------------------------------------------------------

# (op using a variable v, the rule for value val, an invalid value and the message it must give)
RUN_TIME_CASES = {
    "scale_gradient.factor nan": (
        lambda x, v: gradlab.scale_gradient(x, v), lambda dy, val: val * dy, np.nan, "factor must be finite"),
    "reverse_gradient.factor inf": (
        lambda x, v: gradlab.reverse_gradient(x, v), lambda dy, val: -val * dy, np.inf, "factor must be finite"),
    "clip_gradient.clip_max below clip_min": (
        lambda x, v: gradlab.clip_gradient(x, -1.0, v), lambda dy, val: np.clip(dy, -1.0, val), -2.0,
        "clip_min must be <= clip_max"),
    "clip_gradient.clip_min nan": (
        lambda x, v: gradlab.clip_gradient(x, v, 1.0), lambda dy, val: np.clip(dy, val, 1.0), np.nan,
        "clip_min must be finite"),
    "clip_gradient_norm.max_norm 0": (
        lambda x, v: gradlab.clip_gradient_norm(x, v),
        lambda dy, val: dy * min(1.0, val / np.linalg.norm(dy)), 0.0, "max_norm must be (finite and )?> 0"),
    "clip_gradient_norm.max_norm negative": (
        lambda x, v: gradlab.clip_gradient_norm(x, v),
        lambda dy, val: dy * min(1.0, val / np.linalg.norm(dy)), -1.0, "max_norm must be (finite and )?> 0"),
    "surrogate_step.width negative": (
        lambda x, v: gradlab.surrogate_step(x, v),
        lambda dy, val: dy * np.maximum(0, 1 - np.abs([0.5, -1.0, 1.5]) / val), -1.0,
        "width must be (finite and )?> 0"),
}
RT_X, RT_DY = tf.constant([0.5, -1.0, 1.5]), tf.constant([0.8, -1.5, 3.0])


def _gradient_with(apply, variable):
    def run(x, dy):
        with tf.GradientTape() as tape:
            tape.watch(x)
            y = apply(x, variable)
        return tape.gradient(y, x, output_gradients=dy)

    return run


@pytest.mark.parametrize("case", list(RUN_TIME_CASES))
def test_invalid_variable_values_are_caught_when_the_gradient_is_computed(case, mode, run_in_mode):
    """A variable passes the call-time checks without a value; it is checked when read. Eagerly
    that is a ValueError, in a graph an InvalidArgumentError. XLA drops assert ops (a TensorFlow
    limitation), so under jit_compile=True the gradient is TF's arithmetic on the bad value."""
    apply, rule, invalid, message = RUN_TIME_CASES[case]
    variable = tf.Variable(0.75 if "clip_min" not in case else -0.75)
    run = run_in_mode(_gradient_with(apply, variable))
    valid = run(RT_X, RT_DY)
    np.testing.assert_allclose(valid.numpy(), rule(RT_DY.numpy().astype(np.float64), float(variable.numpy())), rtol=1e-6)
    variable.assign(invalid)
    if mode == "eager":
        with pytest.raises(ValueError, match=message):
            run(RT_X, RT_DY)
    elif mode == "function":
        with pytest.raises(tf.errors.InvalidArgumentError, match=message):
            run(RT_X, RT_DY)
    else:  # LIMITATION: XLA ignores tf.debugging.Assert; nothing is raised
        run(RT_X, RT_DY)


def test_under_xla_an_invalid_variable_gives_tensorflows_arithmetic():
    """LIMITATION (XLA drops assert ops), documented in docs/execution_modes.md: a NaN factor
    gives a NaN gradient, and clip_min > clip_max gives clip_min everywhere (tf.clip_by_value)."""
    factor, clip_max = tf.Variable(np.nan), tf.Variable(-2.0)
    scaled = tf.function(_gradient_with(lambda x, v: gradlab.scale_gradient(x, v), factor),
                         jit_compile=True)(RT_X, RT_DY)
    clipped = tf.function(_gradient_with(lambda x, v: gradlab.clip_gradient(x, -1.0, v), clip_max),
                          jit_compile=True)(RT_X, RT_DY)
    assert np.isnan(scaled.numpy()).all()
    np.testing.assert_array_equal(clipped.numpy(), [-1.0, -1.0, -1.0])


def test_a_variable_bound_changing_inside_one_tf_function_is_honoured():
    """Several training steps inside ONE tf.function (a tf.range loop): each step's gradient uses
    the bound assigned in that step, not the value at trace time."""
    bound = tf.Variable(1.0)
    x = tf.constant([5.0, -5.0, 0.3])

    @tf.function
    def steps(values):
        out = tf.TensorArray(tf.float32, size=tf.shape(values)[0])
        for i in tf.range(tf.shape(values)[0]):
            bound.assign(values[i])
            with tf.GradientTape() as tape:
                tape.watch(x)
                y = gradlab.clip_gradient(x, -bound, bound)
            out = out.write(i, tape.gradient(y, x, output_gradients=x))
        return out.stack()

    values = tf.constant([1.0, 0.5, 2.0, 0.1])
    expected = [np.clip([5.0, -5.0, 0.3], -b, b) for b in values.numpy()]
    np.testing.assert_allclose(steps(values).numpy(), expected, rtol=1e-6)
    values = tf.constant([3.0, 0.2, 0.0, 4.0])
    np.testing.assert_allclose(
        steps(values).numpy(), [np.clip([5.0, -5.0, 0.3], -b, b) for b in values.numpy()], rtol=1e-6
    )
    assert steps.experimental_get_tracing_count() == 1


def test_bound_assigned_between_forward_and_backward_is_not_used():
    """Deliberately (issue 30): a variable is read in the forward pass, and that step's gradient
    uses the value read then, as TensorFlow's own ``v * x`` does; a variable read in a custom
    gradient fails inside tf.cond and tf.while_loop. The next step reads the new value."""
    bound = tf.Variable(1.0)

    @tf.function
    def run(x):
        bound.assign(1.0)
        with tf.GradientTape() as tape:
            tape.watch(x)
            y = gradlab.clip_gradient(x, -1.0, bound)
        bound.assign(0.25)  # after the forward pass, before the backward pass
        return tape.gradient(y, x, output_gradients=x)

    np.testing.assert_allclose(run(tf.constant([5.0, -5.0, 0.1])).numpy(), [1.0, -1.0, 0.1])


@pytest.mark.parametrize("mode", ["function", "xla"])  # symbolic tensors exist only in graphs
@pytest.mark.parametrize("name", ["scale_gradient", "clip_gradient", "clip_gradient_norm",
                                  "reverse_gradient", "surrogate_step"])
def test_symbolic_tensor_parameters_are_honoured_without_retracing(name, mode):
    """Parameters passed as tf.function arguments (symbolic tensors) work, are checked at run
    time and do not retrace when their value changes."""
    rules = {
        "scale_gradient": (lambda x, p: gradlab.scale_gradient(x, p), lambda dy, p: p * dy),
        "clip_gradient": (lambda x, p: gradlab.clip_gradient(x, -p, p), lambda dy, p: np.clip(dy, -p, p)),
        "clip_gradient_norm": (lambda x, p: gradlab.clip_gradient_norm(x, p),
                               lambda dy, p: dy * min(1.0, p / np.linalg.norm(dy))),
        "reverse_gradient": (lambda x, p: gradlab.reverse_gradient(x, p), lambda dy, p: -p * dy),
        "surrogate_step": (lambda x, p: gradlab.surrogate_step(x, p),
                           lambda dy, p: dy * np.maximum(0, 1 - np.abs([0.5, -1.0, 1.5]) / p)),
    }
    apply, rule = rules[name]

    @tf.function(jit_compile=(mode == "xla"))
    def run(x, dy, p):
        with tf.GradientTape() as tape:
            tape.watch(x)
            y = apply(x, p)
        return tape.gradient(y, x, output_gradients=dy)

    for p in (0.5, 2.0, 1.25):
        grad = run(RT_X, RT_DY, tf.constant(p))
        np.testing.assert_allclose(grad.numpy(), rule(RT_DY.numpy().astype(np.float64), p), rtol=1e-6)
    assert run.experimental_get_tracing_count() == 1
    if mode == "function":  # an invalid value is caught when the gradient runs
        invalid = tf.constant(np.nan if "gradient" in name and "clip" not in name else -1.0)
        with pytest.raises(tf.errors.InvalidArgumentError, match="must be"):
            run(RT_X, RT_DY, invalid)


# ------------------------------------------------------------------------------------------------
# Empty, 0-d and very large inputs
# ------------------------------------------------------------------------------------------------


@pytest.mark.parametrize("shape", [(), (0,), (0, 3), (2, 0, 4)], ids=str)
def test_empty_and_scalar_inputs_in_every_mode(op_case, shape, mode, run_in_mode, forward_and_gradient):
    x = tf.fill(shape, tf.constant(0.75))
    y, grad = run_in_mode(lambda a, b: forward_and_gradient(op_case.apply, a, b))(x, tf.ones_like(x))
    assert y.shape == x.shape and grad.shape == x.shape and y.dtype == x.dtype
    expected = op_case.gradient(x.numpy().astype(np.float64), np.ones(shape))
    np.testing.assert_allclose(grad.numpy(), expected, rtol=1e-6)


@pytest.mark.parametrize(
    "name", ["ScaleGradient", "ClipGradient", "ClipGradientNorm", "GradientReversal"]
)
def test_layers_take_an_empty_batch(name):
    layer = {"ScaleGradient": layers.ScaleGradient(2.0), "ClipGradient": layers.ClipGradient(-1, 1),
             "ClipGradientNorm": layers.ClipGradientNorm(1.0),
             "GradientReversal": layers.GradientReversal()}[name]
    model = keras.Sequential([keras.Input((3,)), keras.layers.Dense(2), layer])
    x = tf.zeros((0, 3))
    with tf.GradientTape() as tape:
        tape.watch(x)
        y = model(x)
    assert y.shape == (0, 2) and tape.gradient(y, x).shape == (0, 3)


def test_keras_predict_on_zero_samples_fails_in_keras_itself():
    """LIMITATION (Keras 3.15, unrelated to gradlab): predict() on an empty array raises
    UnboundLocalError inside Keras' predict loop, for any model; call the model directly."""
    model = keras.Sequential([keras.Input((3,)), keras.layers.Dense(2)])
    with pytest.raises(UnboundLocalError):
        model.predict(np.zeros((0, 3), np.float32), verbose=0)


LARGE = 1 << 24  # 16 M float32 elements: 64 MiB


def _address(t: tf.Tensor) -> int:
    return t.numpy().__array_interface__["data"][0]


def test_very_large_input_is_not_copied_by_identity_forward_ops():
    """The identity-forward ops return a tensor sharing the input's buffer (TensorFlow forwards
    Identity's input): no 64 MiB copy per op. straight_through shares forward's buffer."""
    x = tf.random.uniform([LARGE])
    for name in ("map_gradient", "scale_gradient", "clip_gradient", "clip_gradient_norm",
                 "reverse_gradient"):
        assert _address(op_cases()[name].apply(x)) == _address(x), name
    forward = tf.round(x)
    assert _address(gradlab.straight_through(forward, x)) == _address(forward)


def test_ops_add_a_constant_number_of_graph_nodes_whatever_the_size():
    def count(apply, n):
        @tf.function
        def f(x, dy):
            with tf.GradientTape() as tape:
                tape.watch(x)
                y = apply(x)
            return y, tape.gradient(y, x, output_gradients=dy)

        spec = tf.TensorSpec([n], tf.float32)
        return len(f.get_concrete_function(spec, spec).graph.get_operations())

    # (TensorFlow writes a small zeros tensor as one Const and a large one as Const + Fill, so the
    # sizes compared are both "large": 64 Ki and 16 Mi elements.)
    medium = 1 << 16
    base_medium, base_large = count(tf.identity, medium), count(tf.identity, LARGE)
    assert base_medium == base_large
    for name in OP_NAMES:
        apply = op_cases()[name].apply
        ops_medium, ops_large = count(apply, medium), count(apply, LARGE)
        assert ops_medium == ops_large, name
        assert ops_large - base_large <= 40, (name, ops_large - base_large)  # a handful, not O(n)


def test_very_large_gradient_matches_the_definition():
    x = tf.random.uniform([LARGE], -3, 3, seed=1)
    dy = tf.random.uniform([LARGE], -2, 2, seed=2)
    with tf.GradientTape() as tape:
        tape.watch(x)
        y = gradlab.clip_gradient_norm(x, 10.0)
    grad = tape.gradient(y, x, output_gradients=dy)
    norm = float(tf.norm(dy))
    np.testing.assert_allclose(float(tf.norm(grad)), 10.0, rtol=1e-4)
    np.testing.assert_allclose(grad.numpy()[:1000], dy.numpy()[:1000] * 10.0 / norm, rtol=1e-4)


# ------------------------------------------------------------------------------------------------
# Non-finite upstream gradients: NaN only where the rule's arithmetic makes it
# ------------------------------------------------------------------------------------------------


def expected_non_finite(name, x, dy):
    """Where each op's gradient is NaN when dy may hold inf and NaN (x finite), by definition."""
    nan, inf = np.isnan(dy), np.isinf(dy)
    if name in ("scale_gradient", "reverse_gradient", "straight_through", "clip_gradient"):
        return nan  # factor != 0: a * inf = +-inf; clip(+-inf) = a bound
    if name == "map_gradient":  # dy * dy
        return nan
    if name == "surrogate_step":  # dy * tri(x): inf * 0 = nan outside the triangle
        return nan | (inf & (np.abs(x) >= WIDTH))
    if name == "clip_gradient_norm":  # dy * min(1, m / norm) in IEEE arithmetic
        if nan.any():
            return np.ones_like(nan)  # the norm is nan, and so is every element
        if inf.any():
            return inf  # inf / inf = nan where dy is inf; finite / inf = 0 elsewhere
        return nan
    raise AssertionError(name)


@settings(max_examples=15)
@given(data=st.data())
def test_non_finite_upstream_gives_nan_only_where_defined(op_case, data):
    shape = data.draw(hnp.array_shapes(min_dims=1, max_dims=2, min_side=1, max_side=4), label="shape")
    x = data.draw(hnp.arrays(np.float32, shape, elements=st.floats(-3, 3, width=32)), label="x")
    dy = data.draw(hnp.arrays(np.float32, shape, elements=st.floats(width=32)), label="dy")
    xt = tf.constant(x)
    with tf.GradientTape() as tape:
        tape.watch(xt)
        y = op_case.apply(xt)
    grad = tape.gradient(y, xt, output_gradients=tf.constant(dy)).numpy()
    np.testing.assert_array_equal(np.isnan(grad), expected_non_finite(op_case.name, x, dy))


def test_scale_by_zero_turns_an_infinite_upstream_into_nan():
    """Documented: factor 0 sends 0 * dy, and 0 * inf is nan (unlike tf.stop_gradient)."""
    x = tf.constant([1.0, 2.0])
    with tf.GradientTape() as tape:
        tape.watch(x)
        y = gradlab.scale_gradient(x, 0.0)
    grad = tape.gradient(y, x, output_gradients=tf.constant([np.inf, 1.0]))
    assert np.isnan(grad.numpy()[0]) and grad.numpy()[1] == 0.0


# ------------------------------------------------------------------------------------------------
# The count
# ------------------------------------------------------------------------------------------------

HOSTILE_INPUT_COUNT = (
    len(TENSOR_CASES) + len(SCALAR_CASES) + len(POSITIVE_CASES) + len(LAYER_PARAM_CASES)
    + len(OTHER_BAD_CALLS) + len(OVERRIDE_BAD_CALLS) + len(RUN_TIME_CASES) * 3
)


def test_count_of_hostile_inputs(capsys):
    with capsys.disabled():
        print(
            f"\n[test_hostile] {HOSTILE_INPUT_COUNT} hostile inputs tried: "
            f"{len(TENSOR_CASES)} bad tensors ({len(TENSOR_ARGS)} arguments x {len(BAD_TENSORS)} values), "
            f"{len(SCALAR_CASES)} bad scalars ({len(SCALAR_ARGS)} parameters x {len(BAD_SCALARS)} values), "
            f"{len(POSITIVE_CASES)} non-positive, {len(LAYER_PARAM_CASES)} variables given to layers, "
            f"{len(OTHER_BAD_CALLS) + len(OVERRIDE_BAD_CALLS)} other misuses, "
            f"{len(RUN_TIME_CASES) * 3} invalid run-time values (x 3 modes)"
        )
    assert HOSTILE_INPUT_COUNT >= 700
