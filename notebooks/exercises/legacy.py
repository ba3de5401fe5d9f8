"""Self-checks for notebook 10 (appendix: the TF1 legacy route)."""
from __future__ import annotations

import numpy as np
import tensorflow as tf

from exercises._report import first_line

__all__ = ["check_exercise_1", "check_exercise_2"]


def check_exercise_1(fn) -> bool:
    """Checks fn(x) inside a tf.function: the value of relu(x), and the gradient of leaky ReLU(0.1)."""
    xs = tf.constant([-2.0, -0.5, 0.5, 2.0])

    @tf.function
    def run(x):
        y = tf.convert_to_tensor(fn(x))
        return y, tf.gradients(y, x)[0]

    try:
        y, grad = run(xs)
    except Exception as exc:  # a learner's answer may raise anything; report it, never crash
        print(f"Not yet: your function raised {first_line(exc, last=True)}")
        return False
    if not np.array_equal(y.numpy(), tf.nn.relu(xs).numpy()):
        print(f"Not yet: the forward value must stay relu(x) = {tf.nn.relu(xs).numpy()}; you return {y.numpy()}.")
        return False
    grad = np.zeros(4, np.float32) if grad is None else grad.numpy()
    expected = np.where(xs.numpy() > 0, 1.0, 0.1).astype(np.float32)
    if np.array_equal(grad, [0.0, 0.0, 1.0, 1.0]):
        print(f"Not yet: the gradient {grad} is ReLU's own; the override is not applied. Is the op type\n"
              "spelled 'Relu', and is tf.nn.relu created inside the with block?")
    elif not np.allclose(grad, expected):
        print(f"Not yet: the gradient at x = {xs.numpy()} is {grad}; expected {expected}\n"
              "(upstream gradient times 1 where x > 0, times 0.1 elsewhere).")
    else:
        print(f"Correct! Forward relu(x), gradient {grad}: a leaky-ReLU gradient behind an exact ReLU.")
        return True
    return False


def check_exercise_2(fn) -> bool:
    """Checks that fn(x) is an identity whose gradient is clip_by_value(dy, -0.1, 0.1), eagerly."""
    x = tf.constant([3.0, -1.0, 0.5, 2.0])
    dy = tf.constant([1.0, -0.05, -4.0, 0.07])
    try:
        with tf.GradientTape() as tape:
            tape.watch(x)
            y = tf.convert_to_tensor(fn(x))
        grad = tape.gradient(y, x, output_gradients=dy)
    except Exception as exc:  # a learner's answer may raise anything; report it, never crash
        print(f"Not yet: your function raised {first_line(exc)}")
        return False
    if not np.array_equal(y.numpy(), x.numpy()):
        print(f"Not yet: the forward value must be x = {x.numpy()} exactly; you return {y.numpy()}.")
        return False
    if grad is None:
        print("Not yet: no gradient reaches x. Did the forward pass go through NumPy?")
        return False
    expected = np.clip(dy.numpy(), -0.1, 0.1)
    if np.array_equal(grad.numpy(), dy.numpy()):
        print(f"Not yet: the gradient {grad.numpy()} is the upstream gradient, unclipped: in eager mode\n"
              "the override map is silently ignored (section 4). Use tf.custom_gradient or gradlab.")
    elif not np.allclose(grad.numpy(), expected):
        print(f"Not yet: for the upstream gradient {dy.numpy()} you send back {grad.numpy()};\n"
              f"clip_by_value(dy, -0.1, 0.1) is {expected}.")
    else:
        print(f"Correct! Eager, forward unchanged, upstream {dy.numpy()} clipped to {grad.numpy()}.")
        return True
    return False
