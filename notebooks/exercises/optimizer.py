"""Self-checks for notebook 07 (optimizer-level changes)."""
from __future__ import annotations

import keras
import numpy as np
import tensorflow as tf

from exercises._harness import NotYet, running, self_check

__all__ = ["check_exercise_1", "check_exercise_2"]

# Global norm 13 (halved by max_norm 6.5), then global norm 1.3 (left alone by max_norm 6.5).
_CASES = (
    ([[3.0, 4.0], [[0.0, 12.0]]], 6.5),
    ([[0.3, 0.4], [[0.0, 1.2]]], 6.5),
)


def _as_tensors(result) -> list:
    return [tf.convert_to_tensor(r, tf.float32) for r in result]


@self_check
def check_exercise_1(fn) -> str:
    """Checks ``fn(grads, max_norm)`` against ``tf.clip_by_global_norm`` above and below ``max_norm``.

    The right answer multiplies every gradient by one factor, ``min(1, max_norm / global_norm)``
    with ``global_norm = sqrt(sum of the squares of all elements of all tensors)``. Per-variable
    clipping (``tf.clip_by_norm`` on each tensor) is recognised and explained.
    """
    for values, max_norm in _CASES:
        grads = [tf.constant(v) for v in values]
        with running():
            result = _as_tensors(fn(list(grads), max_norm))
        expected = tf.clip_by_global_norm(grads, max_norm)[0]
        if len(result) != len(expected) or any(r.shape != e.shape for r, e in zip(result, expected)):
            raise NotYet("return one tensor per gradient, each with its gradient's shape.")
        if all(np.allclose(r.numpy(), e.numpy(), rtol=1e-5, atol=1e-6) for r, e in zip(result, expected)):
            continue
        per_variable = [tf.clip_by_norm(g, max_norm) for g in grads]
        if all(np.allclose(r.numpy(), p.numpy(), rtol=1e-5, atol=1e-6) for r, p in zip(result, per_variable)):
            raise NotYet("that is per-variable clipping (each tensor on its own). Use one factor for all\n"
                         "tensors, computed from the global norm sqrt(sum of all squares).")
        else:
            norm = float(tf.linalg.global_norm(grads))
            raise NotYet(f"for gradients with global norm {norm:.1f} and max_norm {max_norm} you return\n"
                         f"{[r.numpy().tolist() for r in result]}, expected {[e.numpy().tolist() for e in expected]}.")
    return ("One factor min(1, max_norm / global norm) for every tensor: gradients with global\n"
            "norm 13 were halved, those with global norm 1.3 were left alone.")


def _probe_variables() -> list:
    """The trainable variables of notebook 07's model shape: 'hidden' Dense(4), then 'out' Dense(1)."""
    inputs = keras.Input((3,))
    hidden = keras.layers.Dense(4, activation="tanh", name="hidden")(inputs)
    return keras.Model(inputs, keras.layers.Dense(1, name="out")(hidden)).trainable_variables


@self_check
def check_exercise_2(transform) -> str:
    """Checks that ``transform(grads, variables)`` multiplies the 'hidden' layer's gradients by 0.1 only.

    The gradients are ``1, 2, 3, 4`` times ones for ``hidden/kernel``, ``hidden/bias``,
    ``out/kernel`` and ``out/bias``; the answer must return ``0.1`` times the first two and the
    last two unchanged, as a list with one gradient per variable.
    """
    variables = _probe_variables()
    grads = [tf.ones_like(v) * (i + 1) for i, v in enumerate(variables)]
    with running("your transform"):
        result = _as_tensors(transform(list(grads), variables))
    if len(result) != len(grads):
        raise NotYet(f"return one gradient per variable ({len(grads)}); you returned {len(result)}.")
    for variable, grad, got in zip(variables, grads, result):
        factor = 0.1 if variable.path.startswith("hidden/") else 1.0
        if got.shape != grad.shape:
            raise NotYet(f"the gradient of {variable.path} has shape {tuple(grad.shape)}; you returned "
                         f"shape {tuple(got.shape)}.")
        if not np.allclose(got.numpy(), factor * grad.numpy()):
            ratio = float(np.mean(got.numpy() / grad.numpy()))
            raise NotYet(f"the gradient of {variable.path} should be multiplied by {factor}, but it was\n"
                         f"multiplied by {ratio:.2f}. Tell the layers apart by variable.path.")
    return ("hidden/kernel and hidden/bias get 0.1 of their gradient, out/kernel and out/bias all of it.\n"
            "(With SGD this is a 10 times smaller learning rate for the hidden layer.)")
