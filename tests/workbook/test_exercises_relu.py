"""The self-checks of notebook 05 (exercises/relu.py) accept the answers and explain mistakes."""
from __future__ import annotations

import numpy as np
import pytest
import tensorflow as tf

import gradlab
from exercises.relu import check_exercise_1, check_exercise_2


def test_exercise_1_accepts_map_gradient_on_either_side(accepted):
    assert accepted(check_exercise_1(lambda x: tf.nn.relu(gradlab.map_gradient(x, tf.nn.relu)))).startswith("Correct!")
    # The mask and the positive part commute: after the ReLU works as well.
    assert check_exercise_1(lambda x: gradlab.map_gradient(tf.nn.relu(x), tf.nn.relu)).passed is True


def test_exercise_1_accepts_map_gradient_in_a_tf_function():
    assert check_exercise_1(tf.function(lambda x: tf.nn.relu(gradlab.map_gradient(x, tf.nn.relu)))).passed is True


@tf.custom_gradient
def _own_guided_relu(x):
    return tf.nn.relu(x), lambda dy: tf.nn.relu(dy) * tf.cast(x > 0, dy.dtype)


def test_exercise_1_refuses_a_guided_relu_of_ones_own(refused):
    # The exercise is guided backprop *without* tf.custom_gradient: map_gradient and tf.nn.relu only.
    out = refused(check_exercise_1(_own_guided_relu))
    assert "custom gradient of\nyour own" in out and "gradlab.map_gradient and tf.nn.relu only" in out


_AT = "at x        [-0.553, -0.785, -1.233, -0.958]\nwith dy     [0.667, 0.795, 1.72 , 0.856]\n"


def test_exercise_1_explains_mistakes(refused):
    out = refused(check_exercise_1(tf.nn.relu))  # the starting point
    assert "plain ReLU gradient" in out and "at 46 of 200 inputs" in out
    assert "with dy     [-1.014, -0.699, -0.188, -0.193]\nx receives  [-1.014, -0.699, -0.188, -0.193];" in out
    assert "expected    [0., 0., 0., 0.]." in out
    deconvnet = lambda x: gradlab.straight_through(tf.nn.relu(x), gradlab.map_gradient(x, tf.nn.relu))  # noqa: E731
    out = refused(check_exercise_1(deconvnet))
    assert "deconvnet rule" in out and _AT in out and "x receives  [0.667, 0.795, 1.72 , 0.856];" in out
    assert "x receives dy unchanged" in refused(check_exercise_1(lambda x: gradlab.straight_through(tf.nn.relu(x), x)))
    out = refused(check_exercise_1(lambda x: tf.nn.relu(gradlab.map_gradient(x, tf.abs))))
    assert "dy where both x > 0 and dy > 0" in out and "x receives  [1.014, 0.699, 0.188, 0.193];" in out
    assert "no gradient" in refused(check_exercise_1(lambda x: tf.stop_gradient(tf.nn.relu(x))))
    out = refused(check_exercise_1(tf.nn.leaky_relu))
    assert "forward value" in out and "you return [-0.16 , -0.265, -0.05 , -0.111]; relu(x) is [0., 0., 0., 0.]" in out


def _saliency_under(forward, weights, top_relu):
    @tf.function
    def saliency(images, labels):
        logits = forward(weights, images, relu=(tf.nn.relu, tf.nn.relu, top_relu))
        return tf.gradients(tf.reduce_sum(logits * tf.one_hot(labels, 10)), images)[0]
    return saliency


_GUIDED = gradlab.register_gradient(lambda op, g: tf.nn.relu(g) * tf.cast(op.inputs[0] > 0, g.dtype), "GuidedReluTest")


def _guided_top_relu(t):
    with gradlab.gradient_override({"Relu": _GUIDED}):
        return tf.nn.relu(t)


def test_exercise_2_accepts_an_override_on_the_top_relu_only(relu_network, accepted):
    forward, weights, images, labels = relu_network
    assert accepted(check_exercise_2(_saliency_under(forward, weights, _guided_top_relu), images, labels, forward,
                                     weights)).startswith("Correct!")


def test_exercise_2_explains_mistakes_with_a_pixel(relu_network, refused):
    forward, weights, images, labels = relu_network
    out = refused(check_exercise_2(_saliency_under(forward, weights, tf.nn.relu), images, labels, forward, weights))
    assert "plain-gradient maps" in out and "Section 3 shows how to open one." in out
    assert "gradient_override" not in out  # no solution
    assert "At image 0, pixel (0, 1) your map has -0.3747, the plain-gradient map -0.3747,\n" in out
    assert "and the map with the guided rule in the top ReLU only 0." in out

    @tf.function
    def all_guided(images, labels):
        with gradlab.gradient_override({"Relu": _GUIDED}):
            logits = forward(weights, images)
        return tf.gradients(tf.reduce_sum(logits * tf.one_hot(labels, 10)), images)[0]
    out = refused(check_exercise_2(all_guided, images, labels, forward, weights))
    assert "full guided-backprop maps" in out and "the full guided map" in out

    deconvnet = gradlab.register_gradient(lambda op, g: tf.nn.relu(g), "DeconvnetReluTest")

    def top_deconvnet(t):
        with gradlab.gradient_override({"Relu": deconvnet}):
            return tf.nn.relu(t)
    out = refused(check_exercise_2(_saliency_under(forward, weights, top_deconvnet), images, labels, forward,
                                   weights))
    assert "neither plain, nor guided" in out
    assert "At image 1, pixel (1, 0) your map has 1.055, the plain-gradient map -0.06705," in out
    assert "ZeroDivisionError" in refused(check_exercise_2(lambda imgs, labs: 1 / 0, images, labels, forward, weights))


def test_exercise_2_refuses_a_guided_relu_without_an_override(relu_network, refused):
    # A custom-gradient guided ReLU on top gives the same maps, but the exercise is about override maps.
    forward, weights, images, labels = relu_network
    out = refused(check_exercise_2(_saliency_under(forward, weights, _own_guided_relu), images, labels, forward,
                                   weights))
    assert "no Relu op in your saliency function carries an override" in out
    map_gradient_relu = lambda t: tf.nn.relu(gradlab.map_gradient(t, tf.nn.relu))  # noqa: E731   (exercise 1's)
    assert "gradlab.gradient_override" in refused(
        check_exercise_2(_saliency_under(forward, weights, map_gradient_relu), images, labels, forward, weights)
    )


def test_exercise_1_refuses_a_hard_coded_gradient(refused):
    """Issue 39: the first draw's guided gradient, sent by map_gradient whatever dy is: the second draw refuses it."""
    rng = np.random.default_rng(5)
    x, dy = rng.standard_normal(200).astype(np.float32), rng.standard_normal(200).astype(np.float32)
    first = tf.constant(np.maximum(dy, 0.0) * (x > 0))
    out = refused(check_exercise_1(lambda t: tf.nn.relu(gradlab.map_gradient(t, lambda g: first))))
    assert out.startswith("Not yet: on other inputs, eagerly, the backward pass differs from guided backprop at ")
    assert "the first inputs passed: is the gradient computed from the x and dy of this pass" in out


def test_exercise_2_refuses_the_first_images_maps(relu_network, refused):
    """The right maps of the first images, returned whatever the images: the mirrored images refuse them."""
    forward, weights, images, labels = relu_network
    maps = tf.constant(_saliency_under(forward, weights, _guided_top_relu)(images, labels))
    out = refused(check_exercise_2(lambda imgs, labs: maps, images, labels, forward, weights))
    assert out.startswith("Not yet: on other images (the same ones mirrored, other labels), the maps are neither ")
    assert "are these maps computed from the images and labels your function\nreceives" in out


def _guided(t):
    return tf.nn.relu(gradlab.map_gradient(t, tf.nn.relu))


@pytest.mark.parametrize("seed", [0, 1, 2024])
def test_held_out_cases_decide_as_the_public_ones(seed, relu_network):
    """The instructor edition's held-out cases (check_exercise_N(..., seed=...)): other inputs, same verdicts."""
    assert check_exercise_1.verdict(_guided, seed=seed).passed
    for wrong in (tf.nn.relu, lambda t: gradlab.map_gradient(t, tf.nn.relu), _own_guided_relu):
        assert not check_exercise_1.verdict(wrong, seed=seed).passed
    forward, weights, images, labels = relu_network
    assert check_exercise_2.verdict(_saliency_under(forward, weights, _guided_top_relu), images, labels, forward,
                                    weights, seed=seed).passed
    for wrong in (tf.nn.relu, _own_guided_relu):
        assert not check_exercise_2.verdict(_saliency_under(forward, weights, wrong), images, labels, forward,
                                            weights, seed=seed).passed


def test_held_out_cases_refuse_answers_fitted_to_the_public_ones(relu_network):
    """Answers fitted to the public cases: guided only for the inputs the public check tries, plain elsewhere."""
    public = [np.random.default_rng(draw).standard_normal(200).astype(np.float32) for draw in (5, 6)]

    def fitted_1(t):                   # also in a tf.function: the lookup is made of TensorFlow ops
        known = tf.constant(False)
        for x in public:
            if t.shape == x.shape:
                known = known | tf.reduce_all(t == x)
        return tf.where(known, _guided(t), tf.nn.relu(t))
    assert check_exercise_1.verdict(fitted_1).passed
    assert "this is the plain ReLU gradient" in check_exercise_1.verdict(fitted_1, seed=7).message

    forward, weights, images, labels = relu_network
    right, plain = _saliency_under(forward, weights, _guided_top_relu), _saliency_under(forward, weights, tf.nn.relu)
    seen = [images, np.ascontiguousarray(images[:, :, ::-1])]

    def fitted_2(imgs, labs):
        # Traced (the check looks for the override), it has no values: it builds the right graph then.
        known = not tf.executing_eagerly() or any(np.array_equal(imgs.numpy(), i) for i in seen)
        return (right if known else plain)(imgs, labs)
    assert check_exercise_2.verdict(fitted_2, images, labels, forward, weights).passed
    verdict = check_exercise_2.verdict(fitted_2, images, labels, forward, weights, seed=7)
    assert "these are plain-gradient maps" in verdict.message
