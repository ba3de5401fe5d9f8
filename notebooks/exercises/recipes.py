"""Self-checks for notebook 13 (recipes: a NaN-free log under XLA, one gradient row per embedding id)."""
from __future__ import annotations

import numpy as np
import tensorflow as tf

from exercises._harness import NotYet, running, self_check

__all__ = ["check_exercise_1", "check_exercise_2"]

#: Zero, negative and positive points; 0 and -2 are where a naive tf.where(x > 0, log(x), 0) fails.
POINTS = np.array([-2.0, -0.5, 0.0, 0.25, 1.0, 3.0], np.float32)
#: An upstream gradient other than ones: a custom grad that forgets to multiply by dy shows.
UPSTREAM = np.array([0.5, -2.0, 3.0, 1.5, -0.25, 2.0], np.float32)


def _value_and_gradient(fn, x, jit_compile):
    def run(x):
        with tf.GradientTape() as tape:
            tape.watch(x)
            y = tf.convert_to_tensor(fn(x))
        return y, tape.gradient(y, x, output_gradients=tf.constant(UPSTREAM, y.dtype))
    return tf.function(run, jit_compile=True)(x) if jit_compile else run(x)


@self_check
def check_exercise_1(safe_log) -> str:
    """Checks ``safe_log``: log(x) for x > 0 and 0 elsewhere; gradient dy/x there and 0 elsewhere, eager and XLA."""
    x = tf.constant(POINTS)
    positive = POINTS > 0
    value = np.where(positive, np.log(np.where(positive, POINTS, 1.0)), 0.0)
    local = np.where(positive, 1.0 / np.where(positive, POINTS, 1.0), 0.0)
    gradient = UPSTREAM * local
    for mode, jit in (("eagerly", False), ("under jit_compile=True", True)):
        with running(f"{mode}, your function", last=True):
            y, g = _value_and_gradient(safe_log, x, jit)
        if not np.allclose(y.numpy(), value, rtol=1e-6, atol=1e-7):
            raise NotYet(f"the values are not log(x) for x > 0 and 0 elsewhere ({mode}).")
        if g is None:
            raise NotYet(f"no gradient reaches x ({mode}).")
        g = g.numpy()
        if not np.isfinite(g).all():
            bad = ", ".join(f"{p:g}" for p in POINTS[~np.isfinite(g)])
            raise NotYet(f"the gradient is NaN or infinite at x = {bad} ({mode}). The unselected branch still "
                         "sees x <= 0: give it a safe input with a second tf.where.")
        if not np.allclose(g, gradient, rtol=1e-6, atol=1e-7):
            if np.allclose(g, local, rtol=1e-6, atol=1e-7):
                raise NotYet(f"under the upstream gradient dy = {UPSTREAM} the gradient is still 1/x ({mode}): "
                             "does your grad multiply by dy?")
            else:
                raise NotYet(f"the gradient is finite but not dy / x for x > 0 and 0 elsewhere ({mode}).")
    return ("log(x) where x > 0, 0 elsewhere, and a finite gradient (1/x or 0) eagerly and under XLA.")


def _example_slices() -> tf.IndexedSlices:
    """A gradient of a 6 x 2 table with ids 4, 1, 4, 4, 0, 1 looked up (ids repeat, out of order)."""
    values = tf.constant([[1.0, 2.0], [0.5, -1.0], [3.0, 0.0], [-1.0, 1.0], [2.0, 2.0], [0.0, 4.0]])
    return tf.IndexedSlices(values, tf.constant([4, 1, 4, 4, 0, 1]), tf.constant([6, 2]))


@self_check
def check_exercise_2(one_row_per_id) -> str:
    """Checks ``one_row_per_id``: an IndexedSlices with each index once and the same dense value."""
    slices = _example_slices()
    with running():
        result = one_row_per_id(slices)
        dense = tf.convert_to_tensor(result).numpy() if result is not None else None
    if not isinstance(result, tf.IndexedSlices):
        raise NotYet(f"return a tf.IndexedSlices (got {type(result).__name__}); a dense tensor would work "
                     "but costs the whole table's memory.")
    if not np.allclose(dense, tf.convert_to_tensor(slices).numpy()):
        raise NotYet("the result's dense value differs from the input's: sum the repeated rows, do not drop them.")
    indices = result.indices.numpy()
    if len(set(indices.tolist())) != len(indices):
        raise NotYet(f"the indices still repeat ({indices.tolist()}): one row per id.")
    looked_up = sorted(set(slices.indices.numpy().tolist()))
    if sorted(indices.tolist()) != looked_up:
        raise NotYet(f"return rows only for the ids looked up ({looked_up}); rows for every id cost the "
                     "table's memory. tf.unique gives the ids, tf.math.unsorted_segment_sum adds their rows.")
    norm, table_norm = float(np.linalg.norm(result.values.numpy())), float(np.linalg.norm(dense))
    return (f"ids {sorted(indices.tolist())}, once each; the rows' norm {norm:.4f} is the table "
            f"gradient's norm {table_norm:.4f}, so clipnorm now clips what you meant.")
