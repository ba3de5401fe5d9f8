"""Bad input fails at call time with a ValueError or TypeError that names the argument and value."""

from __future__ import annotations

import numpy as np
import pytest
import tensorflow as tf

import gradlab
from gradlab import layers

X = [1.0, -2.0]

# (id, call, exception, regex the message must match: the argument's name and the bad value)
BAD_CALLS = [
    (
        "clip_min>clip_max",
        lambda: gradlab.clip_gradient(X, 1.0, -1.0),
        ValueError,
        r"clip_min must be <= clip_max.*clip_min=1\.0.*clip_max=-1\.0",
    ),
    (
        "clip_min>clip_max tensors",
        lambda: gradlab.clip_gradient(X, tf.constant(0.5), tf.constant(0.25)),
        ValueError,
        r"clip_min=0\.5 > clip_max=0\.25",
    ),
    (
        "max_norm=0",
        lambda: gradlab.clip_gradient_norm(X, 0.0),
        ValueError,
        r"max_norm must be > 0; got 0\.0",
    ),
    (
        "max_norm<0",
        lambda: gradlab.clip_gradient_norm(X, -1),
        ValueError,
        r"max_norm must be > 0; got -1\.0",
    ),
    ("width=0", lambda: gradlab.surrogate_step(X, 0.0), ValueError, r"width must be > 0; got 0\.0"),
    (
        "width<0",
        lambda: gradlab.surrogate_step(X, width=-2.0),
        ValueError,
        r"width must be > 0; got -2\.0",
    ),
    (
        "factor=nan",
        lambda: gradlab.scale_gradient(X, float("nan")),
        ValueError,
        r"factor must be finite; got nan",
    ),
    (
        "factor=inf",
        lambda: gradlab.reverse_gradient(X, np.inf),
        ValueError,
        r"factor must be finite; got inf",
    ),
    (
        "factor=nan tensor",
        lambda: gradlab.scale_gradient(X, tf.constant(np.nan)),
        ValueError,
        r"factor must be finite",
    ),
    (
        "clip_min=-inf",
        lambda: gradlab.clip_gradient(X, -np.inf, 1.0),
        ValueError,
        r"clip_min must be finite; got -inf",
    ),
    (
        "clip_max=nan",
        lambda: gradlab.clip_gradient(X, -1.0, np.nan),
        ValueError,
        r"clip_max must be finite; got nan",
    ),
    (
        "max_norm=inf",
        lambda: gradlab.clip_gradient_norm(X, np.inf),
        ValueError,
        r"max_norm must be finite; got inf",
    ),
    (
        "width=nan",
        lambda: gradlab.surrogate_step(X, np.float32(np.nan)),
        ValueError,
        r"width must be finite",
    ),
    (
        "factor non-scalar",
        lambda: gradlab.scale_gradient(X, tf.constant([1.0, 2.0])),
        ValueError,
        r"factor must be a scalar.*shape \(2,\)",
    ),
    (
        "factor array",
        lambda: gradlab.scale_gradient(X, np.ones(3)),
        ValueError,
        r"factor must be a scalar.*\(3,\)",
    ),
    (
        "factor str",
        lambda: gradlab.scale_gradient(X, "2"),
        TypeError,
        r"factor must be a real number.*'2'",
    ),
    (
        "factor bool",
        lambda: gradlab.scale_gradient(X, True),
        TypeError,
        r"factor must be a real number, not a bool",
    ),
    (
        "factor None",
        lambda: gradlab.reverse_gradient(X, None),
        TypeError,
        r"factor must be a real number.*None",
    ),
    (
        "int list",
        lambda: gradlab.scale_gradient([1, 2], 2.0),
        TypeError,
        r"x must have a floating dtype.*int32",
    ),
    (
        "int tensor",
        lambda: gradlab.clip_gradient(tf.constant([1, 2]), -1.0, 1.0),
        TypeError,
        r"x must have a floating dtype.*int32",
    ),
    (
        "int64 array",
        lambda: gradlab.surrogate_step(np.arange(3)),
        TypeError,
        r"x must have a floating dtype.*int64",
    ),
    (
        "bool tensor",
        lambda: gradlab.reverse_gradient(tf.constant([True])),
        TypeError,
        r"x must have a floating dtype.*bool",
    ),
    (
        "complex tensor",
        lambda: gradlab.clip_gradient_norm(tf.constant([1j]), 1.0),
        TypeError,
        r"x must have a floating dtype.*complex128",
    ),
    (
        "string",
        lambda: gradlab.scale_gradient("1.0", 2.0),
        TypeError,
        r"x must be a floating-point tensor.*'1\.0'",
    ),
    (
        "None",
        lambda: gradlab.map_gradient(None, tf.identity),
        TypeError,
        r"x must be a floating-point tensor.*None",
    ),
    (
        "ragged",
        lambda: gradlab.scale_gradient(tf.ragged.constant([[1.0], [2.0, 3.0]]), 2.0),
        TypeError,
        r"x is a tf\.RaggedTensor.*flat_values",
    ),
    (
        "sparse",
        lambda: gradlab.scale_gradient(tf.sparse.from_dense([[1.0, 0.0]]), 2.0),
        TypeError,
        r"x is a tf\.SparseTensor",
    ),
    (
        "fn not callable",
        lambda: gradlab.map_gradient(X, 3.0),
        TypeError,
        r"fn must be callable.*float 3\.0",
    ),
    ("fn None", lambda: gradlab.map_gradient(X, None), TypeError, r"fn must be callable.*None"),
    (
        "forward int",
        lambda: gradlab.straight_through([1, 2], X),
        TypeError,
        r"forward must have a floating dtype",
    ),
    (
        "backward int",
        lambda: gradlab.straight_through(X, tf.constant([1, 2])),
        TypeError,
        r"backward must have a floating dtype",
    ),
    (
        "straight_through shapes",
        lambda: gradlab.straight_through([1.0, 2.0], [1.0, 2.0, 3.0]),
        ValueError,
        r"forward and backward must have one shape.*forward \(2,\) and backward \(3,\)",
    ),
    (
        "straight_through broadcastable shapes",
        lambda: gradlab.straight_through([[1.0, 2.0]], [1.0, 2.0]),
        ValueError,
        r"forward and backward must have one shape",
    ),
    (
        "straight_through dtypes",
        lambda: gradlab.straight_through(tf.constant(X, tf.float64), tf.constant(X)),
        TypeError,
        r"forward and backward must have one dtype.*float64.*float32",
    ),
    (
        "layer ClipGradient",
        lambda: layers.ClipGradient(0.5, -0.5),
        ValueError,
        r"clip_min=0\.5 > clip_max=-0\.5",
    ),
    (
        "layer ClipGradientNorm",
        lambda: layers.ClipGradientNorm(0),
        ValueError,
        r"max_norm must be > 0",
    ),
    (
        "layer ScaleGradient",
        lambda: layers.ScaleGradient(float("inf")),
        ValueError,
        r"factor must be finite",
    ),
    (
        "layer GradientReversal",
        lambda: layers.GradientReversal("1"),
        TypeError,
        r"factor must be a real number",
    ),
    # issue 30: a parameter that the dtype of the arithmetic would round to a subnormal, 0 or inf
    (
        "factor below float32's normal numbers",
        lambda: gradlab.scale_gradient(X, 1e-40),
        ValueError,
        r"factor=1e-40 cannot be represented in float32.*between 1\.175e-38 and 3\.403e\+38",
    ),
    (
        "factor beyond float32 for a float16 gradient",
        lambda: gradlab.reverse_gradient(np.array(X, np.float16), 1e39),
        ValueError,
        r"factor=1e\+39 cannot be represented in float32, the dtype this gradient is computed in",
    ),
    (
        "width subnormal in float32",
        lambda: gradlab.surrogate_step(X, width=1e-45),
        ValueError,
        r"width=1e-45 cannot be represented in float32",
    ),
    (
        "factor subnormal in float64",
        lambda: gradlab.scale_gradient(np.array(X), 1e-320),
        ValueError,
        r"factor=1e-320 cannot be represented in float64.*2\.225e-308",
    ),
]


@pytest.mark.parametrize(
    "call, error, message", [c[1:] for c in BAD_CALLS], ids=[c[0] for c in BAD_CALLS]
)
def test_bad_input_raises_naming_the_argument(call, error, message):
    with pytest.raises(error, match=message):
        call()


@pytest.mark.parametrize(
    "fn, error, message",
    [
        (
            lambda dy: tf.cast(dy, tf.float64),
            TypeError,
            r"fn must return the upstream gradient's dtype float32",
        ),
        (
            lambda dy: tf.reduce_sum(dy),
            ValueError,
            r"fn must return the upstream gradient's shape \(2,\)",
        ),
    ],
    ids=["dtype", "shape"],
)
def test_map_gradient_checks_what_fn_returns(fn, error, message):
    x = tf.constant(X)
    with tf.GradientTape() as tape:
        tape.watch(x)
        y = gradlab.map_gradient(x, fn)
    with pytest.raises(error, match=message):
        tape.gradient(y, x)


def test_bad_input_fails_at_trace_time_inside_tf_function():
    @tf.function
    def run(x):
        return gradlab.clip_gradient(x, 1.0, -1.0)

    with pytest.raises(ValueError, match=r"clip_min must be <= clip_max"):
        run(tf.constant(X))


def test_valid_numbers_of_every_kind_are_accepted():
    for factor in (
        2,
        2.0,
        np.float16(2.0),
        np.int64(2),
        np.array(2.0),
        tf.constant(2.0),
        tf.constant(2, tf.int32),
        tf.Variable(2.0),
    ):
        x = tf.constant(X)
        with tf.GradientTape() as tape:
            tape.watch(x)
            y = gradlab.scale_gradient(x, factor)
        np.testing.assert_array_equal(tape.gradient(y, x).numpy(), [2.0, 2.0])


def test_run_time_checks_name_the_dtype_in_a_graph():
    from gradlab import _validation as v

    @tf.function
    def check(value):
        with tf.control_dependencies(v.run_time_checks({"width": value}, positive=True, dtype=tf.float32)):
            return tf.identity(value)

    assert float(check(tf.constant(1e-3, tf.float64))) == 1e-3
    with pytest.raises(tf.errors.InvalidArgumentError,
                       match=r"width must be finite and > 0 and 0 or of magnitude between 1\.175e-38 and "
                             r"3\.403e\+38 \(a normal float32 number\); got"):
        check(tf.constant(1e-40, tf.float64))
    with pytest.raises(tf.errors.InvalidArgumentError, match=r"width must be finite and > 0"):
        check(tf.constant(-1.0, tf.float64))


def test_compute_dtype_widens_only_half_precision():
    from gradlab import _validation as v

    assert [v.compute_dtype(d) for d in (tf.float16, tf.bfloat16, tf.float32, tf.float64)] == [
        tf.float32, tf.float32, tf.float32, tf.float64]
