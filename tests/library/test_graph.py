"""register_gradient and gradient_override: graph-mode overrides that fail loudly, not silently."""

from __future__ import annotations

import itertools
import threading

import numpy as np
import pytest
import tensorflow as tf

import gradlab

_ids = itertools.count()


def unique(prefix: str) -> str:
    """A registry name not used by any other test (the registry lives for the whole process)."""
    return f"gradlab_tests.{prefix}.{next(_ids)}"


def times(k: float):
    def gradient(op, grad):
        return k * grad

    return gradient


def identity_gradient_in_function(name_or_fn):
    """A fresh tf.function: tf.gradients of a tf.identity built under the override."""

    @tf.function
    def gradient(x):
        with gradlab.gradient_override({"Identity": name_or_fn}):
            y = tf.identity(x)
        return tf.gradients(y, x)[0]

    return float(gradient(tf.constant(1.0)))


def sign_gradient_under(override):
    """A fresh tf.function: tf.gradients of a tf.sign built under ``gradient_override(override)``."""

    @tf.function
    def sign_gradient(x):
        with gradlab.gradient_override(override):
            y = tf.sign(x)
        return tf.gradients(y, x)[0]

    return sign_gradient


# ------------------------------------------------------------------------------------------------
# register_gradient
# ------------------------------------------------------------------------------------------------


def test_register_gradient_returns_the_name_and_the_gradient_is_used():
    name = unique("Five")
    assert gradlab.register_gradient(times(5.0), name) == name
    assert identity_gradient_in_function(name) == 5.0


def test_registering_the_same_name_again_replaces_the_function():
    name = unique("Rerun")
    gradlab.register_gradient(times(2.0), name)
    assert identity_gradient_in_function(name) == 2.0
    assert gradlab.register_gradient(times(3.0), name) == name  # tf.RegisterGradient: KeyError
    assert identity_gradient_in_function(name) == 3.0


def test_register_gradient_default_names():
    def my_gradient(op, grad):
        return grad

    name = gradlab.register_gradient(my_gradient)
    assert isinstance(name, str) and name.startswith("gradlab:") and "my_gradient" in name
    assert gradlab.register_gradient(my_gradient) == name  # re-running a cell: same name
    first, second = gradlab.register_gradient(lambda op, g: g), gradlab.register_gradient(
        lambda op, g: g
    )
    assert first != second  # lambdas cannot be told apart by name


@pytest.mark.parametrize("name", ["Relu", "Identity", "MatMul"])
def test_a_name_owned_by_tensorflow_is_refused(name):
    with pytest.raises(
        ValueError, match=rf"name '{name}' already names a gradient that gradlab did not register"
    ):
        gradlab.register_gradient(times(1.0), name)


def test_a_name_registered_with_tf_register_gradient_is_refused():
    name = unique("ByTensorFlow")
    tf.RegisterGradient(name)(times(1.0))
    with pytest.raises(ValueError, match=name):
        gradlab.register_gradient(times(2.0), name)


@pytest.mark.parametrize(
    "fn, name, error, message",
    [
        (3, "X", TypeError, r"fn must be callable.*int 3"),
        (times(1.0), 7, TypeError, r"name must be a string; got int 7"),
        (times(1.0), "", ValueError, r"name must be a non-empty string"),
    ],
    ids=["fn", "name type", "empty name"],
)
def test_register_gradient_bad_arguments(fn, name, error, message):
    with pytest.raises(error, match=message):
        gradlab.register_gradient(fn, name)


# ------------------------------------------------------------------------------------------------
# gradient_override
# ------------------------------------------------------------------------------------------------


def test_gradient_override_raises_in_eager_mode():
    with pytest.raises(RuntimeError, match=r"gradient_override has no effect in eager mode"):
        with gradlab.gradient_override({"Identity": times(5.0)}):
            pass


def test_gradient_override_in_tf_function_with_a_name_or_a_function():
    name = gradlab.register_gradient(times(5.0), unique("Named"))
    assert identity_gradient_in_function(name) == 5.0
    assert identity_gradient_in_function(times(-2.0)) == -2.0
    assert identity_gradient_in_function(lambda op, grad: 0.5 * grad) == 0.5


def test_gradient_override_yields_the_resolved_mapping_and_leaves_other_ops_alone():
    name = gradlab.register_gradient(times(5.0), unique("Resolved"))

    @tf.function
    def gradients(x):
        with gradlab.gradient_override({"Identity": name, "Relu": times(0.0)}) as resolved:
            inside = tf.identity(x)
            relu = tf.nn.relu(x)  # every mapped type must be built in the block
        outside = tf.identity(x)
        assert resolved["Identity"] == name and isinstance(resolved["Relu"], str)
        return tf.gradients(inside, x)[0], tf.gradients(outside, x)[0], tf.gradients(relu, x)[0]

    inside, outside, relu = gradients(tf.constant(1.0))
    assert float(inside) == 5.0 and float(outside) == 1.0 and float(relu) == 0.0


def test_gradient_override_in_a_tf1_graph_and_session():
    """The source material's ReLU question: let the gradient through where x > -1."""

    def leaky_window(op, grad):
        return grad * tf.cast(op.inputs[0] > -1.0, grad.dtype)

    graph = tf.Graph()
    with graph.as_default():
        x = tf.compat.v1.placeholder(tf.float32, [4])
        with gradlab.gradient_override({"Relu": leaky_window}):
            y = tf.nn.relu(x)
        plain = tf.nn.relu(x)
        dy, dplain = tf.gradients(y, x)[0], tf.gradients(plain, x)[0]
        with tf.compat.v1.Session(graph=graph) as session:
            values = session.run([y, dy, dplain], {x: [-2.0, -0.5, 0.5, 3.0]})
    np.testing.assert_array_equal(values[0], [0.0, 0.0, 0.5, 3.0])  # forward unchanged
    np.testing.assert_array_equal(values[1], [0.0, 1.0, 1.0, 1.0])
    np.testing.assert_array_equal(values[2], [0.0, 0.0, 1.0, 1.0])


def test_the_source_examples_five_times_and_clipped_identity():
    five, clipped = gradlab.register_gradient(
        times(5.0), unique("CustomGrad")
    ), gradlab.register_gradient(
        lambda op, grad: tf.clip_by_value(grad, -0.1, 0.1), unique("CustomClipGrad")
    )
    assert identity_gradient_in_function(five) == 5.0
    assert identity_gradient_in_function(clipped) == pytest.approx(0.1)


def test_functions_with_one_qualified_name_keep_their_own_gradient():
    """Two closures from one factory (same __qualname__) each keep the gradient they were given."""

    @tf.function
    def gradients(x):
        with gradlab.gradient_override({"Identity": times(2.0)}):
            a = tf.identity(x)
        with gradlab.gradient_override({"Identity": times(3.0)}):
            b = tf.identity(x)
        return tf.gradients(a, x)[0], tf.gradients(b, x)[0]

    a, b = gradients(tf.constant(1.0))
    assert (float(a), float(b)) == (2.0, 3.0)


def test_passing_the_same_function_again_reuses_its_registration():
    gradient = times(4.0)

    @tf.function
    def names(x):
        with gradlab.gradient_override({"Identity": gradient}) as first:
            tf.identity(x)
        with gradlab.gradient_override({"Identity": gradient}) as second:
            tf.identity(x)
        return first["Identity"], second["Identity"]

    first, second = names(tf.constant(1.0))
    assert first == second


@pytest.mark.parametrize(
    "mapping, error, message",
    [
        (
            {"relu": times(1.0)},
            ValueError,
            r"'relu' is not a TensorFlow op type.*Did you mean 'Relu'",
        ),
        ({"identity": times(1.0)}, ValueError, r"Did you mean 'Identity'"),
        (
            {"NoSuchOpAnywhere": times(1.0)},
            ValueError,
            r"'NoSuchOpAnywhere' is not a TensorFlow op type",
        ),
        (
            {"Relu": "gradlab_tests.never_registered"},
            ValueError,
            r"no gradient is registered under 'gradlab_tests\.never_registered' "
            r"\(for op type 'Relu'\)",
        ),
        (
            {"Relu": 5.0},
            TypeError,
            r"the gradient for op type 'Relu' must be a registered name or a function",
        ),
        ({3: times(1.0)}, TypeError, r"op types in the mapping must be strings"),
        ([("Relu", "X")], TypeError, r"mapping must be a dict"),
    ],
    ids=["relu", "identity", "unknown op", "unknown name", "bad value", "bad key", "not a mapping"],
)
def test_gradient_override_bad_mappings(mapping, error, message):
    @tf.function
    def build(x):
        with gradlab.gradient_override(mapping):
            return tf.nn.relu(x)

    with pytest.raises(error, match=message):
        build(tf.constant(1.0))


# ------------------------------------------------------------------------------------------------
# Which differentiation sees an override (the docstring's table, measured on this TensorFlow)
# ------------------------------------------------------------------------------------------------


def test_a_tape_outside_the_tf_function_sees_the_override():
    @tf.function
    def forward(x):
        with gradlab.gradient_override({"Identity": times(5.0)}):
            return tf.identity(x)

    x = tf.constant(1.0)
    with tf.GradientTape() as tape:
        tape.watch(x)
        y = forward(x)
    assert float(tape.gradient(y, x)) == 5.0


def _override_by_tape_inside_a_function(x):
    with tf.GradientTape() as tape:
        tape.watch(x)
        with gradlab.gradient_override({"Identity": times(5.0)}):
            y = tf.identity(x)
    return tape.gradient(y, x)


def _override_by_tape_opened_inside_the_block(x):
    with gradlab.gradient_override({"Identity": times(5.0)}):
        with tf.GradientTape() as tape:
            tape.watch(x)
            y = tf.identity(x)
        return tape.gradient(y, x)


def _override_by_forward_accumulator(x):
    with tf.autodiff.ForwardAccumulator(x, tf.ones_like(x)) as accumulator:
        with gradlab.gradient_override({"Identity": times(5.0)}):
            y = tf.identity(x)
    return accumulator.jvp(y)


def _override_by_tape_on_a_variable(x):
    variable = tf.Variable(1.0)  # a fresh function per test, so created at the first trace only
    with tf.GradientTape() as tape:
        with gradlab.gradient_override({"Identity": times(5.0)}):
            y = tf.identity(variable * x)
    return tape.gradient(y, variable)


@pytest.mark.parametrize("jit_compile", [False, True], ids=["tf.function", "xla"])
@pytest.mark.parametrize(
    "body",
    [_override_by_tape_inside_a_function, _override_by_tape_opened_inside_the_block,
     _override_by_forward_accumulator, _override_by_tape_on_a_variable],
    ids=["tape inside the function", "tape inside the block", "forward accumulator", "variable"],
)
def test_a_tape_recording_the_ops_is_refused(body, jit_compile):
    """Each of these gave 1.0, the plain gradient, with no warning: the tape ignores the map."""
    with pytest.raises(RuntimeError, match=r"gradient_override cannot change the gradient of op "
                       r"'Identity\w*' \(type 'Identity'\): a tf.GradientTape .* is recording it"):
        tf.function(body, jit_compile=jit_compile)(tf.constant(1.0))


def test_a_tape_in_a_tf1_graph_is_refused():
    with tf.Graph().as_default():
        x = tf.compat.v1.placeholder(tf.float32, [])
        with tf.GradientTape() as tape:
            tape.watch(x)
            with pytest.raises(RuntimeError, match="is recording it"):
                with gradlab.gradient_override({"Identity": times(5.0)}):
                    tf.identity(x)


def _honoured_tf_gradients(x):
    with gradlab.gradient_override({"Identity": times(5.0)}):
        y = tf.identity(x)
    return tf.gradients(y, x)[0]


def _honoured_under_stop_recording(x):
    with tf.GradientTape() as tape:
        tape.watch(x)
        with tape.stop_recording(), gradlab.gradient_override({"Identity": times(5.0)}):
            y = tf.identity(x)
    return tf.gradients(y, x)[0]


def _honoured_tape_outside_the_inner_function(x):
    @tf.function
    def inner(t):
        with gradlab.gradient_override({"Identity": times(5.0)}):
            return tf.identity(t)

    with tf.GradientTape() as tape:  # records the call of `inner`, whose backward is symbolic
        tape.watch(x)
        y = inner(x)
    return tape.gradient(y, x)


@pytest.mark.parametrize(
    "body", [_honoured_tf_gradients, _honoured_under_stop_recording, _honoured_tape_outside_the_inner_function],
    ids=["tf.gradients", "ops under stop_recording", "tape outside a nested tf.function"],
)
def test_cases_that_honour_the_override_still_work(body):
    assert float(tf.function(body)(tf.constant(1.0))) == 5.0


def test_a_function_traced_under_an_outer_tape_still_honours_the_override():
    """The outer tape is active while the function is traced, but does not record its ops."""

    @tf.function
    def forward(x):
        with gradlab.gradient_override({"Identity": times(5.0)}):
            y = tf.identity(x)
        return y, tf.gradients(y, x)[0]

    x = tf.constant(1.0)
    with tf.GradientTape() as tape:
        tape.watch(x)
        y, inner_gradient = forward(x)  # traced here, under the tape
    assert float(inner_gradient) == 5.0 and float(tape.gradient(y, x)) == 5.0


def test_an_outer_eager_tape_and_a_tf1_graph_honour_the_override():
    with tf.GradientTape():
        graph = tf.Graph()
        with graph.as_default():
            x = tf.compat.v1.placeholder(tf.float32, [])
            with gradlab.gradient_override({"Identity": times(5.0)}):
                y = tf.identity(x)
            (gradient,) = tf.gradients(y, x)
            with tf.compat.v1.Session(graph=graph) as session:
                assert session.run(gradient, {x: 1.0}) == 5.0


def test_without_the_private_tape_api_the_tape_check_is_skipped(monkeypatch):
    """The documented fallback: nothing breaks, and the tape ignores the override as TF does."""
    import gradlab.graph

    monkeypatch.setattr(gradlab.graph, "_tape_probe", lambda: None)
    assert float(tf.function(_override_by_tape_inside_a_function)(tf.constant(1.0))) == 1.0


# ------------------------------------------------------------------------------------------------
# Without TensorFlow's private registry API: no name refused wrongly, no endless loop
# ------------------------------------------------------------------------------------------------


def finishes_within(seconds: float, fn):
    """fn(), run in a daemon thread: a test failure, not a hung session, if it loops forever."""
    outcome = {}

    def run():
        try:
            outcome["value"] = fn()
        except BaseException as error:  # noqa: BLE001 - re-raised in the test's thread
            outcome["error"] = error

    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    thread.join(seconds)
    assert not thread.is_alive(), f"still running after {seconds} s: an unbounded loop"
    if "error" in outcome:
        raise outcome["error"]
    return outcome["value"]


@pytest.fixture
def registry_lookup_missing(monkeypatch):
    """TensorFlow without ``ops._gradient_registry`` (a private name it plans to clean up).

    tf.gradients and tf.RegisterGradient use the public-in-module ``gradient_registry`` and keep
    working; eager tapes read the private name, so these tests differentiate with tf.gradients.
    """
    from tensorflow.python.framework import ops as tf_ops

    monkeypatch.delattr(tf_ops, "_gradient_registry")


def test_register_gradient_without_the_private_registry_api(registry_lookup_missing):
    name = unique("NoLookup")
    assert gradlab.register_gradient(times(5.0), name) == name
    assert identity_gradient_in_function(name) == 5.0
    assert gradlab.register_gradient(times(6.0), name) == name  # gradlab's own name: replaced
    assert identity_gradient_in_function(name) == 6.0
    with pytest.raises(ValueError, match="name 'Relu' already names a gradient that gradlab did not"):
        gradlab.register_gradient(times(1.0), "Relu")  # TensorFlow's KeyError, caught
    taken = unique("ByTensorFlowNoLookup")
    tf.RegisterGradient(taken)(times(1.0))
    with pytest.raises(ValueError, match="did not register"):
        gradlab.register_gradient(times(2.0), taken)


def test_gradient_override_of_a_function_without_the_private_registry_api(registry_lookup_missing):
    assert finishes_within(60, lambda: identity_gradient_in_function(times(7.0))) == 7.0
    assert finishes_within(60, lambda: identity_gradient_in_function(lambda op, grad: -grad)) == -1.0


def test_a_registry_that_reports_every_name_taken_gives_up_after_bounded_attempts(monkeypatch):
    from tensorflow.python.framework import ops as tf_ops

    class EverythingTaken:
        calls = 0

        def lookup(self, name):
            EverythingTaken.calls += 1
            return times(1.0)

    monkeypatch.setattr(tf_ops, "_gradient_registry", EverythingTaken())
    with pytest.raises(RuntimeError, match=r"found no free gradient-registry name .* in 100 attempts"):
        finishes_within(60, lambda: identity_gradient_in_function(times(8.0)))
    assert EverythingTaken.calls <= 101


# ------------------------------------------------------------------------------------------------
# An entry that matches no op built in the block is refused (issue 30)
# ------------------------------------------------------------------------------------------------


def test_an_op_type_never_built_in_the_block_is_refused_naming_the_types_built():
    """The widely copied recipe {"Cast": "Identity"} around tf.sign built a Sign op, no Cast, and
    silently left the gradient at 0."""

    sign_gradient = sign_gradient_under({"Cast": "Identity"})

    with pytest.raises(ValueError, match=r"no op of type 'Cast' was built inside the block.*"
                                         r"The block built ops of type 'Sign'"):
        sign_gradient(tf.constant([1.0, -2.0]))


def test_the_right_op_type_for_tf_sign_works():
    sign_gradient = sign_gradient_under({"Sign": "Identity"})
    np.testing.assert_array_equal(sign_gradient(tf.constant([1.0, -2.0])).numpy(), [1.0, 1.0])


def test_every_mapped_type_must_be_built_and_an_empty_block_is_refused():
    @tf.function
    def partly(x):
        with gradlab.gradient_override({"Identity": times(2.0), "Relu": times(0.0)}):
            y = tf.identity(x)
        return tf.gradients(y, x)[0]

    @tf.function
    def empty(x):
        with gradlab.gradient_override({"Identity": times(2.0)}):
            pass
        return x

    with pytest.raises(ValueError, match=r"no op of type 'Relu'.*The block built ops of type 'Identity'"):
        partly(tf.constant(1.0))
    with pytest.raises(ValueError, match=r"no op of type 'Identity'.*The block built no op at all"):
        empty(tf.constant(1.0))


def test_an_op_built_in_a_nested_cond_branch_counts():
    """The override reaches ops in a tf.cond branch built in the block, so they count."""

    @tf.function
    def gradient(x, flag):
        with gradlab.gradient_override({"Identity": times(5.0)}):
            y = tf.cond(flag, lambda: tf.identity(x) * 1.0, lambda: 2.0 * x)
        return tf.gradients(y, x)[0]

    assert float(gradient(tf.constant(1.0), tf.constant(True))) == 5.0


def test_an_unmatched_type_in_a_tf1_graph_is_refused():
    with tf.Graph().as_default():
        x = tf.compat.v1.placeholder(tf.float32, [2])
        with pytest.raises(ValueError, match=r"no op of type 'Cast'.*'Sign'"):
            with gradlab.gradient_override({"Cast": "Identity"}):
                tf.sign(x)


def test_a_block_that_raises_keeps_its_own_error():
    @tf.function
    def failing(x):
        with gradlab.gradient_override({"Cast": "Identity"}):
            raise KeyError("the user's own error")
        return x

    with pytest.raises(KeyError, match="the user's own error"):
        failing(tf.constant(1.0))


def test_without_the_private_op_callback_api_the_count_is_skipped(monkeypatch):
    """The documented fallback, as for the tape check: an unmatched entry is silent again."""
    import gradlab.graph

    monkeypatch.setattr(gradlab.graph, "_tape_probe", lambda: None)

    sign_gradient = sign_gradient_under({"Cast": "Identity"})
    np.testing.assert_array_equal(sign_gradient(tf.constant([1.0, -2.0])).numpy(), [0.0, 0.0])
