"""Self-checks for notebook 05 (ReLU gradients and saliency maps)."""
from __future__ import annotations

import numpy as np
import tensorflow as tf

from exercises._harness import NotYet, running, self_check

__all__ = ["check_exercise_1", "check_exercise_2"]


@tf.custom_gradient
def _guided_relu(x):
    return tf.nn.relu(x), lambda dy: tf.nn.relu(dy) * tf.cast(x > 0, dy.dtype)


@self_check
def check_exercise_1(relu_fn) -> str:
    """Checks that ``relu_fn`` is a ReLU forward with the guided-backprop backward pass ``relu(dy) * [x > 0]``.

    Run on seeded random inputs and upstream gradients of both signs, eagerly and in ``tf.function``.
    """
    rng = np.random.default_rng(5)
    x = tf.constant(rng.standard_normal(200).astype(np.float32))
    dy = tf.constant(rng.standard_normal(200).astype(np.float32))
    want = (tf.nn.relu(dy) * tf.cast(x > 0, dy.dtype)).numpy()
    for mode, run in (("eagerly", lambda f: f()), ("in tf.function", lambda f: tf.function(f)())):
        def value_and_gradient():
            with tf.GradientTape() as tape:
                tape.watch(x)
                y = tf.convert_to_tensor(relu_fn(x))
            return y, tape.gradient(y, x, output_gradients=dy)
        with running(f"{mode}, your function"):
            y, sent = run(value_and_gradient)
        if not np.array_equal(y.numpy(), tf.nn.relu(x).numpy()):
            raise NotYet("the forward value must be exactly relu(x).")
        if sent is None:
            raise NotYet("no gradient reaches x. Did a tf.stop_gradient cut the path?")
        if np.array_equal(sent.numpy(), (dy * tf.cast(x > 0, dy.dtype)).numpy()):
            raise NotYet("this is the plain ReLU gradient. Guided backprop also drops the negative upstream\n"
                         "gradients: which fn should gradlab.map_gradient(x, fn) apply to dy?")
        if not np.allclose(sent.numpy(), want):
            wrong = int(np.sum(~np.isclose(sent.numpy(), want)))
            raise NotYet(f"{mode}, the backward pass differs from relu(dy) * [x > 0] at {wrong} of 200 inputs.")
    return ("ReLU forward, guided backward relu(dy) * [x > 0], eagerly and in tf.function.")


def _saliency(forward, weights, images, labels, relus):
    images = tf.convert_to_tensor(images)
    with tf.GradientTape() as tape:
        tape.watch(images)
        score = tf.reduce_sum(forward(weights, images, relus) * tf.one_hot(labels, 10, dtype=images.dtype))
    return tape.gradient(score, images).numpy()[..., 0]


@self_check
def check_exercise_2(saliency_fn, images, labels, forward, weights) -> str:
    """Checks ``saliency_fn(images, labels)``: guided backprop in the top (dense) ReLU only, plain elsewhere.

    ``forward(weights, images, relus)`` is the notebook's network; the reference maps are computed
    with a ``tf.custom_gradient`` guided ReLU in the top position only.
    """
    relu = tf.nn.relu
    with running():
        got = np.asarray(saliency_fn(tf.constant(images), tf.constant(labels)))
    got = got[..., 0] if got.ndim == 4 else got
    want = _saliency(forward, weights, images, labels, (relu, relu, _guided_relu))
    if got.shape != want.shape:
        raise NotYet(f"expected maps of shape {want.shape}; got {got.shape}.")
    if np.allclose(got, _saliency(forward, weights, images, labels, (relu,) * 3), rtol=1e-5, atol=1e-6):
        raise NotYet("these are plain-gradient maps: no ReLU got the guided gradient. Build the top ReLU\n"
                     "inside gradlab.gradient_override(...), and differentiate with tf.gradients (a tape opened\n"
                     "inside a tf.function ignores override maps).")
    if np.allclose(got, _saliency(forward, weights, images, labels, (_guided_relu,) * 3), rtol=1e-5, atol=1e-6):
        raise NotYet("these are full guided-backprop maps: all three ReLUs were overridden. Only the ReLU\n"
                     "created inside the with block gets the override; wrap just the top one.")
    if not np.allclose(got, want, rtol=1e-5, atol=1e-6):
        raise NotYet("the maps are neither plain, nor guided, nor guided-in-the-top-layer-only.")
    return ("Only the Relu op built inside the override block got the guided gradient:\n"
            "an override map applies to ops *created* in the block, not to every op of the type.")
