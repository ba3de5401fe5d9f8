"""Self-checks for notebook 01 (`tf.custom_gradient` in full)."""
from __future__ import annotations

import numpy as np
import tensorflow as tf

from exercises._harness import NotYet, running, self_check

__all__ = ["check_exercise_1", "check_exercise_2"]


@self_check
def check_exercise_1(fn) -> str:
    """Checks a stable ``log(sigmoid(x))``: finite values, and the gradient ``dy * sigmoid(-x)`` for any ``dy``."""
    x = tf.constant([-200.0, -5.0, 0.0, 5.0, 200.0])
    dy = tf.constant([2.0, -1.0, 0.5, 3.0, -2.0])
    with running():
        with tf.GradientTape() as tape:
            tape.watch(x)
            y = tf.convert_to_tensor(fn(x), tf.float32)
        grad = tape.gradient(y, x, output_gradients=dy)
    expected_y = -tf.nn.softplus(-x).numpy()
    if y.shape != x.shape or not np.all(np.isfinite(y.numpy())) or not np.allclose(
            y.numpy(), expected_y, rtol=1e-6, atol=1e-6):
        raise NotYet(f"at x = {x.numpy()} the value is {y.numpy()},\n"
                     f"but log(sigmoid(x)) = -softplus(-x) = {expected_y}.")
    if grad is None:
        raise NotYet("no gradient reaches x.")
    expected = (dy * tf.sigmoid(-x)).numpy()
    if not np.allclose(grad.numpy(), expected, rtol=1e-6, atol=1e-6):
        hint = " Did grad multiply by dy?" if np.allclose(grad.numpy(), tf.sigmoid(-x).numpy(), atol=1e-6) else ""
        raise NotYet(f"for the upstream dy = {dy.numpy()} you send back {grad.numpy()};\n"
                     f"dy * sigmoid(-x) is {expected}.{hint}")
    return (f"Values {y.numpy()}, all finite; gradient {grad.numpy()} = dy * sigmoid(-x).")


@self_check
def check_exercise_2(fn) -> str:
    """Checks a custom-gradient product ``x * w``: d/dx = dy * w and d/dw = dy * x, for any ``dy``."""
    x = tf.constant([1.0, -2.0, 3.0])
    w = tf.constant([0.5, 4.0, -1.0])
    dy = tf.constant([2.0, -1.0, 10.0])
    with running():
        with tf.GradientTape() as tape:
            tape.watch([x, w])
            y = tf.convert_to_tensor(fn(x, w))
        gx, gw = tape.gradient(y, [x, w], output_gradients=dy)
    if y.shape != x.shape or not np.array_equal(y.numpy(), (x * w).numpy()):
        raise NotYet(f"the forward value must be x * w = {(x * w).numpy()}; you return {y.numpy()}.")
    for name, got, want in (("x", gx, dy * w), ("w", gw, dy * x)):
        if got is None:
            raise NotYet(f"no gradient reaches {name} (grad returned None for it).")
        if not np.allclose(got.numpy(), want.numpy()):
            raise NotYet(f"for the upstream dy = {dy.numpy()} the gradient w.r.t. {name} is {got.numpy()};\n"
                         f"the chain rule gives {want.numpy()}.")
    return (f"d/dx = {gx.numpy()} = dy * w and d/dw = {gw.numpy()} = dy * x.")
