"""The self-checks of notebook 05 (exercises/relu.py) accept the answers and explain mistakes."""
from __future__ import annotations

import numpy as np
import pytest
import tensorflow as tf

import gradlab
from exercises.relu import check_exercise_1, check_exercise_2


def test_exercise_1_accepts_map_gradient_on_either_side(capsys):
    assert check_exercise_1(lambda x: tf.nn.relu(gradlab.map_gradient(x, tf.nn.relu))).passed is True
    assert capsys.readouterr().out.startswith("Correct!")
    # The mask and the positive part commute: after the ReLU works as well.
    assert check_exercise_1(lambda x: gradlab.map_gradient(tf.nn.relu(x), tf.nn.relu)).passed is True


def test_exercise_1_explains_mistakes(capsys):
    assert check_exercise_1(tf.nn.relu).passed is False
    assert "plain ReLU gradient" in capsys.readouterr().out
    deconvnet = lambda x: gradlab.straight_through(tf.nn.relu(x), gradlab.map_gradient(x, tf.nn.relu))  # noqa: E731
    assert check_exercise_1(deconvnet).passed is False
    assert "differs" in capsys.readouterr().out                       # the deconvnet rule
    assert check_exercise_1(lambda x: tf.stop_gradient(tf.nn.relu(x))).passed is False
    assert "no gradient" in capsys.readouterr().out
    assert check_exercise_1(tf.nn.leaky_relu).passed is False
    assert "forward value" in capsys.readouterr().out


@pytest.fixture(scope="module")
def network():
    rng = np.random.default_rng(0)
    shapes = [(4, 6), (6,), (6, 6), (6,), (6, 5), (5,), (5, 10), (10,)]
    weights = [tf.constant(rng.normal(0, 0.5, s).astype(np.float32)) for s in shapes]

    def forward(w, images, relu=tf.nn.relu):
        relus = tuple(relu) if isinstance(relu, (tuple, list)) else (relu,) * 3
        h = tf.reshape(images, [-1, 4])
        for i in range(3):
            h = relus[i](tf.matmul(h, w[2 * i]) + w[2 * i + 1])
        return tf.matmul(h, w[6]) + w[7]
    images = rng.normal(size=(6, 2, 2, 1)).astype(np.float32)
    labels = rng.integers(0, 10, 6).astype(np.int32)
    return forward, weights, images, labels


def _saliency_under(forward, weights, top_relu):
    @tf.function
    def saliency(images, labels):
        logits = forward(weights, images, relu=(tf.nn.relu, tf.nn.relu, top_relu))
        return tf.gradients(tf.reduce_sum(logits * tf.one_hot(labels, 10)), images)[0]
    return saliency


def test_exercise_2_accepts_an_override_on_the_top_relu_only(network, capsys):
    forward, weights, images, labels = network
    guided = gradlab.register_gradient(lambda op, g: tf.nn.relu(g) * tf.cast(op.inputs[0] > 0, g.dtype), "GuidedReluTest")

    def top_relu(t):
        with gradlab.gradient_override({"Relu": guided}):
            return tf.nn.relu(t)
    assert check_exercise_2(_saliency_under(forward, weights, top_relu), images, labels, forward, weights).passed is True
    assert capsys.readouterr().out.startswith("Correct!")
    assert check_exercise_2(_saliency_under(forward, weights, tf.nn.relu), images, labels, forward, weights).passed is False
    assert "plain-gradient maps" in capsys.readouterr().out
    assert check_exercise_2(lambda imgs, labs: 1 / 0, images, labels, forward, weights).passed is False
    assert "ZeroDivisionError" in capsys.readouterr().out
