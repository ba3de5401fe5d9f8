"""Self-checks for notebook 10 (appendix: the TF1 legacy route)."""
from __future__ import annotations

import numpy as np
import tensorflow as tf

from exercises._harness import NotYet, running, self_check

__all__ = ["check_exercise_1", "check_exercise_2"]


@self_check
def check_exercise_1(fn) -> str:
    """Checks fn(x) inside a tf.function: the value of relu(x), and the gradient of leaky ReLU(0.1)."""
    xs = tf.constant([-2.0, -0.5, 0.5, 2.0])

    @tf.function
    def run(x):
        y = tf.convert_to_tensor(fn(x))
        return y, tf.gradients(y, x)[0]

    with running("your function", last=True):
        y, grad = run(xs)
    if not np.array_equal(y.numpy(), tf.nn.relu(xs).numpy()):
        raise NotYet(f"the forward value must stay relu(x) = {tf.nn.relu(xs).numpy()}; you return {y.numpy()}.")
    grad = np.zeros(4, np.float32) if grad is None else grad.numpy()
    expected = np.where(xs.numpy() > 0, 1.0, 0.1).astype(np.float32)
    if np.array_equal(grad, [0.0, 0.0, 1.0, 1.0]):
        raise NotYet(f"the gradient {grad} is ReLU's own; the override is not applied. Is the op type\n"
                     "spelled 'Relu', and is tf.nn.relu created inside the with block?")
    elif not np.allclose(grad, expected):
        raise NotYet(f"the gradient at x = {xs.numpy()} is {grad}; expected {expected}\n"
                     "(upstream gradient times 1 where x > 0, times 0.1 elsewhere).")
    return f"Forward relu(x), gradient {grad}: a leaky-ReLU gradient behind an exact ReLU."


@self_check
def check_exercise_2(fn) -> str:
    """Checks that fn(x) is an identity whose gradient is clip_by_value(dy, -0.1, 0.1), eagerly."""
    x = tf.constant([3.0, -1.0, 0.5, 2.0])
    dy = tf.constant([1.0, -0.05, -4.0, 0.07])
    with running():
        with tf.GradientTape() as tape:
            tape.watch(x)
            y = tf.convert_to_tensor(fn(x))
        grad = tape.gradient(y, x, output_gradients=dy)
    if not np.array_equal(y.numpy(), x.numpy()):
        raise NotYet(f"the forward value must be x = {x.numpy()} exactly; you return {y.numpy()}.")
    if grad is None:
        raise NotYet("no gradient reaches x. Did the forward pass go through NumPy?")
    expected = np.clip(dy.numpy(), -0.1, 0.1)
    if np.array_equal(grad.numpy(), dy.numpy()):
        raise NotYet(f"the gradient {grad.numpy()} is the upstream gradient, unclipped: in eager mode\n"
                     "the override map is silently ignored (section 4). Use tf.custom_gradient or gradlab.")
    elif not np.allclose(grad.numpy(), expected):
        raise NotYet(f"for the upstream gradient {dy.numpy()} you send back {grad.numpy()};\n"
                     f"clip_by_value(dy, -0.1, 0.1) is {expected}.")
    return f"Eager, forward unchanged, upstream {dy.numpy()} clipped to {grad.numpy()}."
