"""Self-checks for notebook 04 (surrogate gradients for a step function)."""
from __future__ import annotations

import numpy as np
import tensorflow as tf

import gradlab

from exercises._harness import NotYet, running, self_check

__all__ = ["check_exercise_1", "check_exercise_2"]


def heaviside(x):
    """The step H(x): 1.0 where x > 0, else 0.0 (in x's dtype)."""
    return tf.cast(x > 0, x.dtype)


def triangle_reference(x, upstream):
    """What a triangle surrogate should send back: upstream * max(0, 1 - |x|)."""
    return upstream * tf.maximum(tf.constant(0.0, x.dtype), 1.0 - tf.abs(x))


@self_check
def check_exercise_1(step_fn) -> str:
    """Checks ``step_fn``: forward exactly H(x); backward ``dy / (1 + (pi x)^2)`` for any upstream ``dy``."""
    x = tf.constant(np.linspace(-2.5, 2.5, 41, dtype=np.float32))
    dy = tf.constant(np.random.default_rng(7).standard_normal(41).astype(np.float32))
    with running():
        with tf.GradientTape() as tape:
            tape.watch(x)
            y = tf.convert_to_tensor(step_fn(x))
        sent = tape.gradient(y, x, output_gradients=dy)
    if not np.array_equal(y.numpy(), heaviside(x).numpy()):
        raise NotYet("the forward value must be exactly the step tf.cast(x > 0, x.dtype).")
    if sent is None:
        raise NotYet("no gradient reaches x, just like the plain step. Wrap the step in tf.custom_gradient.")
    bump = 1.0 / (1.0 + (np.pi * x.numpy()) ** 2)
    if np.allclose(sent.numpy(), bump, rtol=1e-5, atol=1e-6):
        raise NotYet("your backward pass returns the surrogate itself: it ignores dy (the bug of notebook 01, section 1).\n"
                     "Multiply by dy.")
    if not np.allclose(sent.numpy(), dy.numpy() * bump, rtol=1e-5, atol=1e-6):
        raise NotYet("under a random upstream dy, your backward pass does not send dy / (1 + (pi x)^2).")
    return ("Forward exactly the step; backward dy / (1 + (pi x)^2), the arctan surrogate.")


@self_check
def check_exercise_2(fixed_fn) -> str:
    """Checks the repaired ``non_differentiable`` with ``gradlab.check_gradient`` against the triangle reference."""
    points = tf.constant([-1.5, -0.6, -0.1, 0.2, 0.7, 1.4])
    with running():
        value = tf.convert_to_tensor(fixed_fn(points))
        result = gradlab.check_gradient(fixed_fn, points, reference=triangle_reference)
    if not np.array_equal(value.numpy(), heaviside(points).numpy()):
        raise NotYet("keep the forward value: tf.cast(x > 0, x.dtype).")
    if not result.linear_in_upstream:
        raise NotYet("the gradient still does not scale with the upstream gradient dy. Multiply by dy.")
    if not result.ok:
        raise NotYet(f"the gradient scales with dy but is not dy * max(0, 1 - |x|): {result.message.splitlines()[0]}")
    return (f"check_gradient agrees (max error {result.max_error:.1e}) and the gradient is linear in dy.")
