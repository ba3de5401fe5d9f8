"""The contract of gradlab.GradientProbe: an exact identity that records the gradient through it.

Checked in every execution mode (eager, tf.function, jit_compile=True) and every dtype: the
forward value is bitwise the input, the gradient passes unchanged, and what is recorded is the
gradient of the loss with respect to the probed tensor (as ``tape.gradient`` computes it for the
intermediate tensor). Then the documented limitations, and bad arguments.
"""

from __future__ import annotations

import ml_dtypes
import numpy as np
import pytest
import tensorflow as tf

import gradlab


def special_values(dtype: tf.DType) -> np.ndarray:
    """Signed zeros, infinities, NaNs, the extremes and a subnormal of ``dtype`` (4 x 4)."""
    np_dtype = dtype.as_numpy_dtype
    info = ml_dtypes.finfo(np_dtype)
    tiny = float(info.tiny)
    values = [0.0, -0.0, np.inf, -np.inf, np.nan, -np.nan, float(info.max), -float(info.max),
              tiny, -tiny, tiny / 4, -tiny / 4, 2.5, -1.5, 0.5, 1.0]
    return np.array([np.array(v, np_dtype) for v in values], np_dtype).reshape(4, 4)

X = [[0.3, -1.75, 2.5], [-0.0, 0.5, 1e-3]]
DY = [[1.0, -2.0, 0.05], [3.0, -0.4, 0.25]]


def _mlp_weights(seed: int = 0):
    rng = np.random.default_rng(seed)
    return [tf.constant(rng.normal(0.0, 0.8, size=(3, 3)), tf.float32) for _ in range(3)]


def _mlp(x, weights, probe=None):
    """A 3-layer tanh MLP; returns the loss and the activations (probed when probe is given)."""
    activations = []
    h = x
    for i, w in enumerate(weights):
        h = tf.tanh(tf.matmul(h, w))
        if probe is not None:
            h = probe(h, name=f"layer{i}")
        activations.append(h)
    return tf.reduce_sum(h * tf.constant([1.0, -2.0, 0.5])), activations


# ------------------------------------------------------------------------------------------------
# Forward: bitwise identity; backward: unchanged
# ------------------------------------------------------------------------------------------------


def test_forward_is_bitwise_identity(mode, dtype, run_in_mode, assert_bitwise):
    probe = gradlab.GradientProbe()
    x_np = special_values(dtype)
    y = run_in_mode(lambda t: probe(t, name="x"))(tf.constant(x_np))
    assert y.dtype == dtype and y.shape == x_np.shape
    assert_bitwise(y, x_np)  # NaN payloads, signed zeros and subnormals included


def test_gradient_passes_unchanged_and_is_recorded(
    mode, dtype, run_in_mode, forward_and_gradient, assert_bitwise
):
    probe = gradlab.GradientProbe()
    x, dy = tf.constant(X, dtype), tf.constant(DY, dtype)

    def run(a, b):
        y, grad = forward_and_gradient(lambda t: probe(t, name="x"), a, b)
        return y, grad, probe.gradient("x")

    y, grad, recorded = run_in_mode(run)(x, dy)
    assert_bitwise(y, x)
    assert_bitwise(grad, dy)  # the identity's gradient is the upstream gradient, bit for bit
    assert_bitwise(recorded, dy)
    assert_bitwise(probe.gradients["x"], dy)
    assert probe.counts == {"x": 1}


def test_records_the_gradients_of_the_intermediate_tensors(mode, run_in_mode):
    weights = _mlp_weights()
    x = tf.constant([[0.2, -0.4, 0.9], [1.1, 0.3, -0.7]])
    probe = gradlab.GradientProbe()

    def probed(inputs):
        with tf.GradientTape() as tape:
            tape.watch(inputs)
            loss, activations = _mlp(inputs, weights, probe)
        grads = tape.gradient(loss, [inputs] + activations)
        return grads, [probe.gradient(f"layer{i}") for i in range(3)]

    def reference(inputs):
        with tf.GradientTape() as tape:
            tape.watch(inputs)
            loss, activations = _mlp(inputs, weights)
        return tape.gradient(loss, [inputs] + activations)

    (grads, in_function), expected = run_in_mode(probed)(x), run_in_mode(reference)(x)
    recorded = probe.gradients
    assert list(recorded) == ["layer0", "layer1", "layer2"]  # watch order
    np.testing.assert_array_equal(grads[0].numpy(), expected[0].numpy())  # input gradient unchanged
    for i in range(3):
        np.testing.assert_allclose(recorded[f"layer{i}"], expected[i + 1].numpy(), rtol=1e-6,
                                   atol=1e-7)
        np.testing.assert_array_equal(in_function[i].numpy(), recorded[f"layer{i}"])
    norms = probe.norms()
    assert list(norms) == list(recorded)
    for name, value in norms.items():
        assert value == pytest.approx(float(np.linalg.norm(recorded[name].astype(np.float64))))


@pytest.mark.parametrize("jit_compile", [False, True], ids=["function", "xla"])
def test_eager_tape_over_a_tf_function_forward(jit_compile):
    """The backward function TensorFlow builds for a tf.function also records (control deps)."""
    probe = gradlab.GradientProbe()
    forward = tf.function(lambda t: tf.reduce_sum(probe(t * 3.0, name="h") ** 2),
                          jit_compile=jit_compile)
    x = tf.constant([1.0, -2.0])
    with tf.GradientTape() as tape:
        tape.watch(x)
        loss = forward(x)
    np.testing.assert_allclose(tape.gradient(loss, x).numpy(), [18.0, -36.0])
    np.testing.assert_allclose(probe.gradients["h"], [6.0, -12.0])  # 2h


def test_second_order_gradients_pass_through(mode, run_in_mode):
    probe = gradlab.GradientProbe()

    def second(x):
        with tf.GradientTape() as outer:
            outer.watch(x)
            with tf.GradientTape() as inner:
                inner.watch(x)
                y = probe(x, name="x") ** 3
            first = inner.gradient(y, x)
        return first, outer.gradient(first, x)

    first, second_derivative = run_in_mode(second)(tf.constant(2.0))
    assert float(first) == 12.0 and float(second_derivative) == 12.0  # 3x^2 and 6x at 2


def test_indexed_slices_upstream_is_recorded_densely(mode, run_in_mode):
    probe = gradlab.GradientProbe()

    def run(table):
        with tf.GradientTape() as tape:
            tape.watch(table)
            rows = tf.gather(probe(table, name="table"), [0, 2, 2])
            loss = tf.reduce_sum(rows * 2.0)
        return tape.gradient(loss, table)

    grad = run_in_mode(run)(tf.ones([3, 2]))
    expected = [[2.0, 2.0], [0.0, 0.0], [4.0, 4.0]]
    np.testing.assert_array_equal(tf.convert_to_tensor(grad).numpy(), expected)
    np.testing.assert_array_equal(probe.gradients["table"], expected)
    # the norm is the dense gradient's: row 2's two slices are summed (4), not squared apart
    assert probe.norms() == {"table": pytest.approx(float(np.linalg.norm(expected)))}
    assert probe.replica_gradients["table"][0].tolist() == expected


REF = [[1.0, 2.0, 3.0], [3.0, -4.0, 5.0]]
JACOBIAN_X = [[1.0, 2.0, 0.5], [3.0, 4.0, -1.0]]


def _jacobian_run(probe, batch, use_pfor, parallel_iterations=None):
    """y = probe(x) ** 2 * REF; its (batch) Jacobian with respect to x."""
    def run(x):
        with tf.GradientTape(persistent=True) as tape:
            tape.watch(x)
            h = x if probe is None else probe(x, name="h")
            y = h ** 2 * tf.constant(REF)
        jacobian = tape.batch_jacobian if batch else tape.jacobian
        return jacobian(y, x, experimental_use_pfor=use_pfor,
                        parallel_iterations=parallel_iterations)
    return run


def _row_gradients(batch):
    """The gradient dy_row/dh of every row of the Jacobian (what the probe sees per row)."""
    x, ref = np.array(JACOBIAN_X, np.float32), np.array(REF, np.float32)
    local = 2 * x * ref  # dy/dh, elementwise
    rows = []
    for j in range(x.shape[1] if batch else x.size):
        one_hot = np.zeros(x.shape[1] if batch else x.size, np.float32)
        one_hot[j] = 1.0
        upstream = np.tile(one_hot, (x.shape[0], 1)) if batch else one_hot.reshape(x.shape)
        rows.append(upstream * local)
    return rows


@pytest.mark.parametrize("use_pfor", [True, False], ids=["pfor", "while_loop"])
@pytest.mark.parametrize("batch", [False, True], ids=["jacobian", "batch_jacobian"])
def test_jacobians_run_and_record_every_row(mode, run_in_mode, batch, use_pfor):
    """tape.jacobian / batch_jacobian vectorize the backward pass (pfor) by default: the probe's
    variable writes have a vectorized form, so the Jacobian is the one without the probe, the
    count grows by one per row, and one row's gradient is kept (the last, in eager mode)."""
    probe = gradlab.GradientProbe()
    x = tf.constant(JACOBIAN_X)
    got = run_in_mode(_jacobian_run(probe, batch, use_pfor))(x)
    expected = run_in_mode(_jacobian_run(None, batch, use_pfor))(x)
    np.testing.assert_array_equal(got.numpy(), expected.numpy())
    rows = _row_gradients(batch)
    assert probe.counts == {"h": len(rows)}
    recorded = probe.gradients["h"]
    assert any(np.array_equal(recorded, row) for row in rows), recorded
    if mode == "eager" or use_pfor:
        np.testing.assert_array_equal(recorded, rows[-1])


@pytest.mark.parametrize("parallel_iterations", [2, 4])
def test_jacobian_in_vectorized_chunks_counts_every_row(parallel_iterations):
    """parallel_iterations splits the rows into chunks (a remainder, then full chunks in a loop)."""
    probe = gradlab.GradientProbe()
    x = tf.constant(JACOBIAN_X)
    got = _jacobian_run(probe, False, True, parallel_iterations)(x)
    np.testing.assert_array_equal(got.numpy(), _jacobian_run(None, False, True)(x).numpy())
    assert probe.counts == {"h": 6}
    np.testing.assert_array_equal(probe.gradients["h"], _row_gradients(False)[-1])


def test_vectorized_map_of_per_example_gradients_counts_every_example():
    probe = gradlab.GradientProbe()

    def per_example(x):
        with tf.GradientTape() as tape:
            tape.watch(x)
            loss = tf.reduce_sum(probe(x, name="h") ** 2)
        return tape.gradient(loss, x)

    batch = tf.constant(JACOBIAN_X)
    np.testing.assert_array_equal(tf.vectorized_map(per_example, batch).numpy(), 2 * batch.numpy())
    assert probe.counts == {"h": 2}
    np.testing.assert_array_equal(probe.gradients["h"], 2 * batch.numpy()[-1])


def test_a_reused_backward_function_under_pfor_raises_a_clear_error():
    """A tf.function forward differentiated once keeps its backward function, built outside the
    vectorized loop: pfor cannot count its rows, and the error says what to do."""
    probe = gradlab.GradientProbe()
    forward = tf.function(lambda t: probe(t, "h") ** 2 * tf.constant(REF))
    x = tf.constant(JACOBIAN_X)
    with tf.GradientTape(persistent=True) as tape:
        tape.watch(x)
        y = forward(x)
    tape.gradient(y, x)
    with pytest.raises(RuntimeError, match="built before.*Pass experimental_use_pfor=False"):
        tape.jacobian(y, x)
    probe.clear()
    jacobian = tape.jacobian(y, x, experimental_use_pfor=False)  # the advice works
    np.testing.assert_array_equal(jacobian.numpy(), _jacobian_run(None, False, True)(x).numpy())
    assert probe.counts == {"h": 6}


# ------------------------------------------------------------------------------------------------
# Repeated calls, clearing, unconnected names, retracing
# ------------------------------------------------------------------------------------------------


def test_repeated_steps_keep_the_last_gradient_without_retracing(mode, run_in_mode):
    probe = gradlab.GradientProbe()
    factor = tf.Variable(1.0)

    def step(x):
        with tf.GradientTape() as tape:
            tape.watch(x)
            loss = tf.reduce_sum(probe(x, name="x") * factor)
        return tape.gradient(loss, x)

    run = run_in_mode(step)
    x = tf.constant([1.0, 2.0])
    run(x)  # the first call creates the probe's variables (tf.function then traces twice)
    traces = None if mode == "eager" else run.experimental_get_tracing_count()
    probe.clear()
    for value in (1.0, -3.0, 0.5):
        factor.assign(value)
        run(x)
        np.testing.assert_array_equal(probe.gradients["x"], [value, value])
    assert probe.counts == {"x": 3}
    probe.clear()
    assert probe.gradients == {} and probe.counts == {"x": 0} and probe.names == ("x",)
    run(x)  # the traced function still writes to the same probe after clear()
    assert probe.counts == {"x": 1}
    if mode != "eager":
        assert run.experimental_get_tracing_count() == traces  # no retracing after the first call


def test_clear_inside_a_tf_function():
    probe = gradlab.GradientProbe()
    x = tf.constant(1.0)
    with tf.GradientTape() as tape:
        tape.watch(x)
        y = probe(x, "x") * 2.0
    tape.gradient(y, x)
    tf.function(probe.clear)()
    assert probe.counts == {"x": 0}


def test_eager_shapes_may_change_between_steps():
    probe = gradlab.GradientProbe()
    for n in (2, 5, 3):
        x = tf.ones([n])
        with tf.GradientTape() as tape:
            tape.watch(x)
            y = tf.reduce_sum(probe(x, "x") * 7.0)
        tape.gradient(y, x)
        np.testing.assert_array_equal(probe.gradients["x"], np.full([n], 7.0, np.float32))


def test_a_name_without_a_gradient_is_left_out():
    probe = gradlab.GradientProbe()
    x = tf.constant([1.0, 2.0])
    with tf.GradientTape() as tape:
        tape.watch(x)
        used = probe(x, "used")
        probe(x * 2.0, "unused")  # not on the path to the loss
        loss = tf.reduce_sum(used)
    tape.gradient(loss, x)
    assert list(probe.gradients) == ["used"]
    assert probe.counts == {"used": 1, "unused": 0}
    assert probe.norms() == {"used": pytest.approx(np.sqrt(2.0))}


def test_one_name_on_two_tensors_is_counted_twice():
    probe = gradlab.GradientProbe()
    x = tf.constant(1.0)
    with tf.GradientTape() as tape:
        tape.watch(x)
        loss = probe(x, "h") * 2.0 + probe(x, "h") * 3.0
    assert float(tape.gradient(loss, x)) == 5.0
    assert probe.counts == {"h": 2}
    assert float(probe.gradients["h"]) in (2.0, 3.0)  # one of the two, as documented


def test_model_fit_records_in_keras_train_function():
    import keras

    probe = gradlab.GradientProbe()

    class Probed(keras.layers.Layer):
        def call(self, inputs):
            return probe(inputs, name="hidden")

    keras.utils.set_random_seed(0)
    model = keras.Sequential([keras.Input((4,)), keras.layers.Dense(3), Probed(),
                              keras.layers.Dense(1)])
    model.compile(optimizer="sgd", loss="mse")
    x, y = np.ones((8, 4), np.float32), np.zeros((8, 1), np.float32)
    model.fit(x, y, batch_size=8, epochs=2, verbose=0)
    assert probe.counts == {"hidden": 2}
    assert probe.gradients["hidden"].shape == (8, 3)


def test_repr_lists_the_names():
    probe = gradlab.GradientProbe()
    probe(tf.zeros(2), "a")
    probe(tf.zeros(2), "b")
    assert repr(probe) == "GradientProbe(names=['a', 'b'])"


# ------------------------------------------------------------------------------------------------
# Documented limitations
# ------------------------------------------------------------------------------------------------


def test_xla_shapes_change_with_retracing_but_not_between_compiled_shapes():
    probe = gradlab.GradientProbe()

    @tf.function(jit_compile=True)
    def step(x):
        with tf.GradientTape() as tape:
            tape.watch(x)
            loss = tf.reduce_sum(probe(x, "x") ** 2)
        return tape.gradient(loss, x)

    step(tf.ones([3]))
    np.testing.assert_array_equal(probe.gradients["x"], [2.0, 2.0, 2.0])
    step(tf.ones([4]))  # a new trace: the variable is reshaped at trace time
    np.testing.assert_array_equal(probe.gradients["x"], [2.0] * 4)
    with pytest.raises(tf.errors.InvalidArgumentError, match="cannot be changed"):
        step(tf.ones([3]))  # the compiled [3] graph again: XLA refuses the [4] variable


def test_xla_needs_a_fully_known_shape():
    probe = gradlab.GradientProbe()
    step = tf.function(lambda x: probe(x, "x"), jit_compile=True,
                       input_signature=[tf.TensorSpec([None], tf.float32)])
    with pytest.raises(ValueError, match="fully known shape"):
        step(tf.ones([3]))


def test_a_new_name_in_a_later_trace_raises_runtime_error():
    probe = gradlab.GradientProbe()

    @tf.function
    def step(x, name):
        return probe(x, name)

    step(tf.ones([2]), "a")
    with pytest.raises(RuntimeError, match="first trace only"):
        step(tf.ones([2]), "b")  # a new Python argument: a second trace that creates variables
    probe(tf.ones([2]), "c")  # once eagerly first...
    step(tf.ones([2]), "c")  # ...then a later trace may use it


def test_tf1_graphs_are_refused():
    with tf.Graph().as_default():
        with pytest.raises(RuntimeError, match="tf.gradients"):
            gradlab.GradientProbe()(tf.constant([1.0]), "x")


def test_reading_values_inside_a_tf_function_raises():
    probe = gradlab.GradientProbe()
    probe(tf.zeros(2), "x")
    for attribute in ("gradients", "counts"):
        with pytest.raises(RuntimeError, match="probe.gradient\\(name\\)"):
            tf.function(lambda: getattr(probe, attribute))()
    with pytest.raises(RuntimeError, match="after the call"):
        tf.function(probe.norms)()


# ------------------------------------------------------------------------------------------------
# Bad arguments
# ------------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "x, name, error, match",
    [
        (tf.constant([1, 2]), "x", TypeError, "floating dtype"),
        ("abc", "x", TypeError, "x must be a floating-point"),
        (None, "x", TypeError, "x must be a floating-point"),
        ([1.0], 3, TypeError, "name must be a string.*int 3"),
        ([1.0], None, TypeError, "name must be a string"),
        ([1.0], "", ValueError, "non-empty"),
    ],
    ids=["int tensor", "string", "None", "int name", "None name", "empty name"],
)
def test_bad_arguments(x, name, error, match):
    with pytest.raises(error, match=match):
        gradlab.GradientProbe()(x, name)


def test_one_name_keeps_one_dtype():
    probe = gradlab.GradientProbe()
    probe(tf.zeros(2, tf.float32), "h")
    with pytest.raises(TypeError, match="'h' already records float32 gradients; got a float64"):
        probe(tf.zeros(2, tf.float64), "h")


def test_gradient_of_an_unknown_name():
    probe = gradlab.GradientProbe()
    probe(tf.zeros(2), "a")
    with pytest.raises(KeyError, match="'b' was never watched; watched names: \\['a'\\]"):
        probe.gradient("b")
    with pytest.raises(TypeError, match="name must be a string"):
        probe.gradient(0)
