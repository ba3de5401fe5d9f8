"""Every gradlab op inside a TF1-style graph and session (``tf.compat.v1``), without ever
disabling eager execution globally: ``with tf.Graph().as_default():`` + ``tf.compat.v1.Session``.

Inside such a graph ``tf.custom_gradient`` takes its graph-mode path (an ``IdentityN`` op with a
gradient override), which ``tf.gradients`` honours; placeholders stand for the inputs, and
variables (initialised explicitly) are read when the gradient runs.
"""

from __future__ import annotations

import numpy as np
import pytest
import tensorflow as tf

import gradlab

from helpers import OP_NAMES, op_cases

X = [[0.3, -1.75, 2.5], [-0.0, 0.5, 1e-3]]
DY = [[1.0, -2.0, 0.05], [3.0, -0.4, 0.25]]


@pytest.fixture(autouse=True)
def eager_stays_on():
    assert tf.executing_eagerly()
    yield
    assert tf.executing_eagerly()


@pytest.mark.parametrize("name", OP_NAMES)
@pytest.mark.parametrize("dtype", ["float32", "float64", "float16"])
def test_every_op_in_a_v1_graph_and_session(name, dtype, assert_bitwise, assert_close):
    case = op_cases()[name]
    x_np, dy_np = np.array(X, dtype), np.array(DY, dtype)
    graph = tf.Graph()
    with graph.as_default():
        x = tf.compat.v1.placeholder(dtype, shape=[None, 3])
        dy = tf.compat.v1.placeholder(dtype, shape=[None, 3])
        y = case.apply(x)
        (grad,) = tf.gradients(y, x, grad_ys=dy)
        reference = None if case.reference_forward is None else case.reference_forward(x)
    with tf.compat.v1.Session(graph=graph) as session:
        fetches = [y, grad] + ([] if reference is None else [reference])
        values = session.run(fetches, feed_dict={x: x_np, dy: dy_np})
    assert_bitwise(values[0], x_np if reference is None else values[2])
    expected = case.gradient(x_np.astype(np.float64), dy_np.astype(np.float64))
    assert values[1].dtype == np.dtype(dtype)
    assert_close(values[1], expected, dtype)


def test_a_variable_parameter_is_read_at_each_session_run():
    graph = tf.Graph()
    with graph.as_default():
        limit = tf.Variable(1.0)
        x = tf.compat.v1.placeholder(tf.float32, shape=[3])
        (grad,) = tf.gradients(gradlab.clip_gradient(x, -limit, limit), x, grad_ys=3.0 * x)
        new_limit = tf.compat.v1.placeholder(tf.float32, shape=[])
        assign = limit.assign(new_limit)
    with tf.compat.v1.Session(graph=graph) as session:
        session.run(limit.initializer)
        feed = {x: [1.0, -2.0, 0.1]}
        np.testing.assert_allclose(session.run(grad, feed), [1.0, -1.0, 0.3], rtol=1e-6)
        session.run(assign, {new_limit: 0.5})
        np.testing.assert_allclose(session.run(grad, feed), [0.5, -0.5, 0.3], rtol=1e-6)
        # an invalid value is caught when the gradient runs, not turned into a wrong gradient
        session.run(assign, {new_limit: -0.5})  # clip_min = 0.5 > clip_max = -0.5
        with pytest.raises(tf.errors.InvalidArgumentError, match="clip_min must be <= clip_max"):
            session.run(grad, feed)


def test_second_order_tf_gradients_and_hessians_in_a_graph():
    """The higher-order semantics of tests/library/test_higher_order.py hold in a v1 graph too."""
    graph = tf.Graph()
    with graph.as_default():
        x = tf.compat.v1.placeholder(tf.float64, shape=[4])
        y = tf.reduce_sum(gradlab.scale_gradient(x, -1.5) ** 3)
        (first,) = tf.gradients(y, x)
        (second,) = tf.gradients(first, x)
        (hessian,) = tf.hessians(y, x)
    values = np.array([0.3, -0.7, 1.2, -0.2])
    with tf.compat.v1.Session(graph=graph) as session:
        first_v, second_v, hessian_v = session.run([first, second, hessian], {x: values})
    np.testing.assert_allclose(first_v, -1.5 * 3 * values**2, rtol=1e-12)
    np.testing.assert_allclose(second_v, 2.25 * 6 * values, rtol=1e-12)
    np.testing.assert_allclose(hessian_v, np.diag(2.25 * 6 * values), rtol=1e-12)


def test_ops_compose_with_gradient_override_in_the_same_graph():
    """A gradlab op and a gradient_override_map override in one graph: both apply, in order."""
    graph = tf.Graph()
    with graph.as_default():
        x = tf.compat.v1.placeholder(tf.float32, shape=[2])
        with gradlab.gradient_override({"Relu": lambda op, grad: 2.0 * grad}):
            r = tf.nn.relu(x)
        y = gradlab.clip_gradient(r, -0.5, 0.5)
        (grad,) = tf.gradients(y, x, grad_ys=tf.constant([3.0, 0.25]))
    with tf.compat.v1.Session(graph=graph) as session:
        # clip first (3.0 -> 0.5; 0.25 stays), then the Relu override doubles, also where x < 0
        np.testing.assert_allclose(session.run(grad, {x: [1.0, -1.0]}), [1.0, 0.5])


def test_keras_free_graph_mode_training_step():
    """A TF1-style training loop (optimizer from tf.compat.v1) through a gradlab op."""
    graph = tf.Graph()
    with graph.as_default():
        w = tf.Variable([1.0, -1.0])
        loss = tf.reduce_sum(gradlab.reverse_gradient(w, 0.5) * tf.constant([2.0, 4.0]))
        train = tf.compat.v1.train.GradientDescentOptimizer(0.1).minimize(loss)
    with tf.compat.v1.Session(graph=graph) as session:
        session.run(tf.compat.v1.global_variables_initializer())
        session.run(train)
        # gradient -0.5 * [2, 4] = [-1, -2]; w - 0.1 * gradient: the loss goes UP (reversal)
        np.testing.assert_allclose(session.run(w), [1.1, -0.8], rtol=1e-6)


@pytest.mark.parametrize(
    "name, make, rule",
    [
        ("ScaleGradient", lambda: gradlab.layers.ScaleGradient(0.5), lambda dy: 0.5 * dy),
        ("ClipGradient", lambda: gradlab.layers.ClipGradient(-0.1, 0.2),
         lambda dy: np.clip(dy, -0.1, 0.2)),
        ("ClipGradientNorm", lambda: gradlab.layers.ClipGradientNorm(1.0),
         lambda dy: dy * min(1.0, 1.0 / np.linalg.norm(dy))),
        ("GradientReversal", lambda: gradlab.layers.GradientReversal(2.0), lambda dy: -2.0 * dy),
    ],
    ids=lambda v: v if isinstance(v, str) else "",
)
def test_every_layer_on_a_placeholder_in_a_v1_graph(name, make, rule, assert_bitwise):
    """Each layer works on a placeholder in a TF1 graph (GradientReversal keeps its factor in a
    variable, which the usual initializer sets)."""
    x_np, dy_np = np.array(X, np.float32), np.array(DY, np.float32)
    graph = tf.Graph()
    with graph.as_default():
        x = tf.compat.v1.placeholder(tf.float32, shape=[None, 3])
        y = make()(x)
        (grad,) = tf.gradients(y, x, grad_ys=tf.constant(dy_np))
        init = tf.compat.v1.global_variables_initializer()
    with tf.compat.v1.Session(graph=graph) as session:
        session.run(init)
        y_v, grad_v = session.run([y, grad], {x: x_np})
    assert_bitwise(y_v, x_np)
    np.testing.assert_allclose(grad_v, rule(dy_np.astype(np.float64)), rtol=1e-6)
