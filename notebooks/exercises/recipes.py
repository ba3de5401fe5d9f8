"""Self-checks for notebook 13 (recipes: a NaN-free log under XLA, one gradient row per embedding id)."""
from __future__ import annotations

import numpy as np
import tensorflow as tf

from exercises._harness import NotYet, running, self_check

__all__ = ["check_exercise_1", "check_exercise_2"]

#: Zero, negative and positive points; 0 is where a naive tf.where(x > 0, log(x), 0) fails. 1e-37
#: (a normal float32) refuses an epsilon or a clamp (log(x + eps), log(max(x, eps))): any eps whose
#: 1/eps is finite moves log there, and a smaller one makes the gradient at 0 infinite.
POINTS = np.array([-2.0, -0.5, 0.0, 1e-37, 0.25, 1.0, 3.0], np.float32)
#: An upstream gradient other than ones: a custom grad that forgets to multiply by dy shows.
UPSTREAM = np.array([0.5, -2.0, 3.0, 1.0, 1.5, -0.25, 2.0], np.float32)


def _value_and_gradient(fn, x, jit_compile):
    def run(x):
        with tf.GradientTape() as tape:
            tape.watch(x)
            y = tf.convert_to_tensor(fn(x))
        return y, tape.gradient(y, x, output_gradients=tf.constant(UPSTREAM, y.dtype))
    return tf.function(run, jit_compile=True)(x) if jit_compile else run(x)


def _first_difference(got, want) -> int:
    """The first point where ``got`` is off, preferring an ordinary one to 1e-37."""
    off = np.flatnonzero(~np.isclose(got, want, rtol=1e-6, atol=1e-7))
    ordinary = [i for i in off if POINTS[i] != np.float32(1e-37)]
    return int(ordinary[0] if ordinary else off[0])


@self_check
def check_exercise_1(safe_log) -> str:
    """Checks ``safe_log``: log(x) for x > 0 and 0 elsewhere; gradient dy/x there and 0 elsewhere, eager and XLA.

    Includes x = 1e-37, where an epsilon (``log(x + eps)``) or a clamp (``log(max(x, eps))``)
    shows in the value: the exercise asks for the double where or a custom gradient, which keep
    log x exact for every positive x.
    """
    x = tf.constant(POINTS)
    positive = POINTS > 0
    value = np.where(positive, np.log(np.where(positive, POINTS, 1.0)), 0.0)
    local = np.where(positive, 1.0 / np.where(positive, POINTS, 1.0), 0.0)
    gradient = UPSTREAM * local
    for mode, jit in (("eagerly", False), ("under jit_compile=True", True)):
        with running(f"{mode}, your function", last=True):
            y, g = _value_and_gradient(safe_log, x, jit)
        y = y.numpy()
        if y.shape != value.shape or not np.allclose(y, value, rtol=1e-6, atol=1e-7):
            if y.shape != value.shape:
                raise NotYet(f"{mode}, safe_log(x) has shape {y.shape}; x has shape {value.shape}.")
            i = _first_difference(y, value)
            hint = ""
            if POINTS[i] == np.float32(1e-37):
                hint = ("\nAn epsilon or a clamp changes log near 0. Keep log(x) exact: give the unselected "
                        "branch\na safe input with a second tf.where (or write a custom gradient).")
            elif POINTS[i] <= 0:
                hint = "\nWhere x <= 0 the value is 0."
            raise NotYet(f"{mode}, at x = {POINTS[i]:g} safe_log returns {y[i]:.6g}; expected "
                         f"{'log(x) = ' if POINTS[i] > 0 else ''}{value[i]:.6g}.{hint}")
        if g is None:
            raise NotYet(f"{mode}, no gradient reaches x (tape.gradient returned None). "
                         "Is the path to x cut by tf.stop_gradient?")
        g = g.numpy()
        if not np.isfinite(g).all():
            bad = ", ".join(f"{p:g}" for p in POINTS[~np.isfinite(g)])
            raise NotYet(f"{mode}, the gradient is NaN or infinite at x = {bad}. The unselected branch still "
                         "sees x <= 0:\nwhat does the double where of section 2 give it instead?")
        if not np.allclose(g, gradient, rtol=1e-6, atol=1e-7):
            i = _first_difference(g, gradient)
            said = (f"{mode}, with the upstream gradient dy = {UPSTREAM[i]:g} at x = {POINTS[i]:g}, x receives "
                    f"{g[i]:.6g};\nexpected {gradient[i]:.6g} (dy / x for x > 0, 0 elsewhere).")
            if np.allclose(g, local, rtol=1e-6, atol=1e-7):
                raise NotYet(f"{said} The gradient is still 1/x: does your grad multiply by dy?")
            raise NotYet(said)
    return ("log(x) where x > 0, 0 elsewhere, and a finite gradient (1/x or 0) eagerly and under XLA.")


#: The embedding table's shape: 8 rows, more than the 6 looked up, so a table-sized tensor shows.
TABLE = (8, 2)


def _example_slices() -> tf.IndexedSlices:
    """A gradient of an 8 x 2 table with ids 4, 1, 4, 4, 0, 1 looked up (ids repeat, out of order)."""
    values = tf.constant([[1.0, 2.0], [0.5, -1.0], [3.0, 0.0], [-1.0, 1.0], [2.0, 2.0], [0.0, 4.0]])
    return tf.IndexedSlices(values, tf.constant([4, 1, 4, 4, 0, 1]), tf.constant(TABLE))


def _table_sized_ops(one_row_per_id) -> list[str]:
    """The op types in ``one_row_per_id``'s traced graph that build a tensor the size of the whole table.

    The example is built inside the trace, so the table's shape is a constant and such a tensor
    (``tf.convert_to_tensor`` of the slices, ``tf.scatter_nd`` into the dense shape...) has the
    static shape ``TABLE``. An answer that cannot be traced gives no evidence: an empty list.
    """
    try:
        graph = tf.function(lambda: one_row_per_id(_example_slices()), autograph=False).get_concrete_function().graph
    except Exception:  # an eager-only answer: it gave the right result; there is nothing to refuse it on
        return []
    return sorted({op.type for op in graph.get_operations()
                   if any(out.shape.rank == 2 and out.shape.as_list() == list(TABLE) for out in op.outputs)})


@self_check
def check_exercise_2(one_row_per_id) -> str:
    """Checks ``one_row_per_id``: an IndexedSlices with each index once and the same dense value.

    The rows are merged without a dense copy of the table (the point of keeping IndexedSlices): an
    answer whose traced graph builds a table-sized tensor is refused.
    """
    slices = _example_slices()
    with running():
        result = one_row_per_id(slices)
        dense = tf.convert_to_tensor(result).numpy() if isinstance(result, tf.IndexedSlices) else None
    if not isinstance(result, tf.IndexedSlices):
        raise NotYet(f"return a tf.IndexedSlices (got {type(result).__name__}); a dense tensor would work "
                     "but costs\nthe whole table's memory.")
    want = tf.convert_to_tensor(slices).numpy()
    if dense.shape != want.shape:
        raise NotYet(f"the result's dense shape is {list(dense.shape)}; the table's is {list(want.shape)}: "
                     "keep slices.dense_shape.")
    if not np.allclose(dense, want):
        row = int(np.flatnonzero(~np.isclose(dense, want).all(axis=1))[0])
        count = int(np.sum(slices.indices.numpy() == row))
        hint = (f"the {count} rows looked up for id {row} add up to {want[row]}: sum the repeated rows, "
                "do not drop them." if count > 1 else "keep each id's row as it is.")
        raise NotYet(f"the result's dense value differs from the input's: for id {row} it holds {dense[row]};\n{hint}")
    indices = result.indices.numpy()
    if len(set(indices.tolist())) != len(indices):
        raise NotYet(f"the indices still repeat ({indices.tolist()}): one row per id.")
    looked_up = sorted(set(slices.indices.numpy().tolist()))
    if sorted(indices.tolist()) != looked_up:
        raise NotYet(f"you return rows for ids {sorted(indices.tolist())}: return rows only for the ids looked "
                     f"up ({looked_up});\nrows for every id cost the table's memory. tf.unique gives the ids, "
                     "tf.math.unsorted_segment_sum\nadds their rows.")
    table_sized = _table_sized_ops(one_row_per_id)
    if table_sized:
        raise NotYet(f"the result is right, but on the way your function builds a tensor the size of the whole "
                     f"table,\n{list(TABLE)} ({', '.join(table_sized)}), as a dense copy does: that costs the "
                     "table's memory, which\nIndexedSlices avoid. Merge the looked-up rows themselves: "
                     "tf.unique on the indices,\ntf.math.unsorted_segment_sum on the values.")
    norm, table_norm = float(np.linalg.norm(result.values.numpy())), float(np.linalg.norm(dense))
    return (f"ids {sorted(indices.tolist())}, once each; the rows' norm {norm:.4f} is the table "
            f"gradient's norm {table_norm:.4f}, so clipnorm now clips what you meant.")
