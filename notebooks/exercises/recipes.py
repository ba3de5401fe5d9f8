"""Self-checks for notebook 13 (recipes: a NaN-free log under XLA, one gradient row per embedding id)."""
from __future__ import annotations

import numpy as np
import tensorflow as tf
from tensorflow.python.framework.function_def_to_graph import function_def_to_graph

from gradlab._compat import functions_traced_inline

from exercises._harness import NotYet, first_line, running, self_check
from exercises._i18n import _

__all__ = ["check_exercise_1", "check_exercise_2"]

#: The smallest normal float32, 2**-126 (about 1.2e-38).
TINY = np.finfo(np.float32).tiny
#: Zero, negative and positive points; 0 is where a naive tf.where(x > 0, log(x), 0) fails. 1e-37, 2e-38
#: and TINY (normal float32) refuse an epsilon (log(x + eps)): any eps whose 1/eps is finite moves log
#: there, and a smaller one makes the gradient at 0 infinite; and a clamp above TINY (log(max(x, eps))),
#: which moves log at TINY. A clamp at TINY or below changes nothing TensorFlow computes (see _clamp_hint).
POINTS = np.array([-2.0, -0.5, 0.0, 1e-37, 0.25, 1.0, 3.0, 2e-38, TINY], np.float32)
#: An upstream gradient other than ones: a custom grad that forgets to multiply by dy shows.
UPSTREAM = np.array([0.5, -2.0, 3.0, 1.0, 1.5, -0.25, 2.0, -1.0, 0.75], np.float32)


def _second_case() -> tuple[np.ndarray, np.ndarray]:
    """Other points (seeded), with subnormals, and another upstream: numbers copied from a message fail here.

    TensorFlow on CPU flushes float32 subnormals to zero (eagerly and under XLA, ``tf.constant(1e-40) > 0``
    is False), so for it they are 0: the expected values follow TensorFlow's own ``x > 0``.
    """
    rng = np.random.default_rng(13)
    magnitudes = 10.0 ** rng.uniform(-37.5, 2.0, 6)
    points = np.concatenate([magnitudes * [1, 1, 1, 1, -1, -1], [0.0, 1e-40, 1e-45, -1e-40]]).astype(np.float32)
    return points, rng.uniform(-3.0, 3.0, points.size).astype(np.float32)


def _held_out_points(seed: int) -> tuple[np.ndarray, np.ndarray]:
    """Other points and upstream gradients, drawn from ``seed``: 0, 1e-37, negatives and positives, shuffled."""
    rng = np.random.default_rng(seed)
    points = np.concatenate([[0.0, 1e-37], -rng.uniform(0.1, 5.0, 3), 10.0 ** rng.uniform(-3, 1, 4)])
    order = rng.permutation(len(points))
    upstream = rng.choice([-1.0, 1.0], len(points)) * rng.uniform(0.25, 3.0, len(points))
    return points[order].astype(np.float32), upstream.astype(np.float32)


def _value_and_gradient(fn, x, upstream, jit_compile):
    def run(x):
        with tf.GradientTape() as tape:
            tape.watch(x)
            y = tf.convert_to_tensor(fn(x))
        return y, tape.gradient(y, x, output_gradients=tf.constant(upstream, y.dtype))
    return tf.function(run, jit_compile=True)(x) if jit_compile else run(x)


def _first_difference(points, got, want) -> int:
    """The first point where ``got`` is off, preferring an ordinary one to a tiny one (below 1e-30)."""
    off = np.flatnonzero(~np.isclose(got, want, rtol=1e-6, atol=1e-7))
    ordinary = [i for i in off if not 0 < abs(points[i]) < 1e-30]
    return int(ordinary[0] if ordinary else off[0])


def _apart(got: float, want: float) -> tuple[str, str]:
    """``got`` and ``want`` with 6 significant digits, or up to 9 when 6 print them the same; trailing
    zeros kept when both are nonzero (-6.04076 and -6.04080, not -6.0408)."""
    keep = "#" if got and want else ""
    for digits in range(6, 10):
        a, b = f"{got:{keep}.{digits}g}", f"{want:{keep}.{digits}g}"
        if float(a) != float(b):
            break
    return a, b


def _clamps(fn) -> list[float]:
    """The constants ``fn`` clamps x at (``tf.maximum(x, c)``, ``tf.clip_by_value``), from its traced graph."""
    try:
        graph = tf.function(fn).get_concrete_function(tf.TensorSpec([None], tf.float32)).graph
    except Exception:  # an answer that cannot be traced fails the XLA run anyway
        return []
    found = []
    for op in graph.get_operations():
        if op.type in ("Maximum", "ClipByValue"):
            for tensor in op.inputs[1:]:
                if tensor.op.type == "Const":
                    found += tf.make_ndarray(tensor.op.get_attr("value")).ravel().tolist()
    return found


def _clamp_hint(fn, symptom: str) -> str:
    """What a clamp in ``fn`` did, told by what the check saw (``symptom``: "value", "gradient" or
    "passed"), or "" when no clamp explains it.

    A clamp ``c`` above the smallest normal float32 changes log x for x between it and ``c``, which
    ``TINY`` shows. One at ``TINY`` or below changes no value: TensorFlow on CPU treats every float32
    below ``TINY`` as 0 (a subnormal ``c`` is flushed to 0, so ``max(x, c)`` is ``max(x, 0)``, whose
    log at 0 is -inf); it is accepted when the numbers are right, and named when the gradient is not.
    """
    clamps = [float(c) for c in _clamps(fn) if c > 0]
    above = [c for c in clamps if np.float32(c) > TINY]
    if above and symptom in ("value", "passed"):
        c = max(above)
        return _("\nYour clamp {c:g} changes log x below it: at x = {tiny:.6g} (the smallest normal float32)\n"
                 "log(max(x, c)) is {clamped:.6g}, where log x is {log:.6g}. Keep log(x) "
                 "exact, and give the\nunselected branch a safe input with a second tf.where.").format(
                     c=c, tiny=TINY, clamped=np.log(np.float32(c)), log=np.log(TINY))
    flushed = [c for c in clamps if np.float32(c) < TINY]
    if flushed and symptom == "gradient":
        return _("\nYour clamp {c:g} is below the smallest normal float32 ({tiny:.3g}): TensorFlow on CPU "
                 "flushes\nsuch a subnormal to zero, so max(x, c) is max(x, 0), and log's gradient at 0 is "
                 "infinite.").format(c=flushed[0], tiny=TINY)
    return ""


@self_check
def check_exercise_1(safe_log, *, seed: int | None = None) -> str:
    """Checks ``safe_log``: log(x) for x > 0 and 0 elsewhere; gradient dy/x there and 0 elsewhere, eager and XLA.

    Includes x = 1e-37, 2e-38 and the smallest normal float32, where an epsilon (``log(x + eps)``) or
    a clamp (``log(max(x, eps))``) shows in the value, and a second seeded case with subnormals (which
    TensorFlow flushes to zero) and another upstream. A clamp above the smallest normal float32 found
    in the traced graph is named, also when its numbers pass (held-out points need not show it): the
    exercise asks for the double where or a custom gradient, which keep log x exact for every
    positive x. A clamp at or below it changes no value (see :func:`_clamp_hint`). With ``seed`` (the
    instructor edition's held-out cases) it tries points and upstream gradients drawn from it instead.
    """
    cases = ((POINTS, UPSTREAM), _second_case()) if seed is None else (_held_out_points(seed),)
    for case, (points, upstream) in enumerate(cases):
        x = tf.constant(points)
        positive = (x > 0).numpy()      # TensorFlow's own comparison: subnormals count as 0
        value = np.where(positive, np.log(np.where(positive, points, 1.0)), 0.0)
        local = np.where(positive, 1.0 / np.where(positive, points, 1.0), 0.0)
        gradient = upstream * local
        for mode, jit in ((_("eagerly"), False), (_("under jit_compile=True"), True)):
            mode = f"{mode}{_(' (other points)') if case else ''}"
            with running(_("{mode}, your function").format(mode=mode), last=True):
                y, g = _value_and_gradient(safe_log, x, upstream, jit)
            y = y.numpy()
            if y.shape != value.shape or not np.allclose(y, value, rtol=1e-6, atol=1e-7):
                if y.shape != value.shape:
                    raise NotYet(_("{mode}, safe_log(x) has shape {got}; x has shape {shape}.").format(
                        mode=mode, got=y.shape, shape=value.shape))
                i = _first_difference(points, y, value)
                hint = ""
                if positive[i] and y[i] > value[i]:  # log x raised: an epsilon or a clamp, at any point
                    hint = _clamp_hint(safe_log, "value") or _(
                        "\nAn epsilon or a clamp changes log(x), most near 0. Keep log(x) exact: give the "
                        "unselected branch\na safe input with a second tf.where (or write a custom gradient).")
                elif not positive[i]:
                    hint = _("\nWhere x <= 0 the value is 0.")
                got, want = _apart(y[i], value[i])
                raise NotYet((_("{mode}, at x = {x:g} safe_log returns {got}; expected log(x) = {want}.") if positive[i]
                              else _("{mode}, at x = {x:g} safe_log returns {got}; expected {want}.")).format(
                                  mode=mode, x=points[i], got=got, want=want) + hint)
            if g is None:
                raise NotYet(_("{mode}, no gradient reaches x (tape.gradient returned None). "
                               "Is the path to x cut by tf.stop_gradient?").format(mode=mode))
            g = g.numpy()
            if not np.isfinite(g).all():
                bad = ", ".join(f"{p:g}" for p in points[~np.isfinite(g)])
                raise NotYet(_("{mode}, the gradient is NaN or infinite at x = {bad}.").format(mode=mode, bad=bad) + (
                    _clamp_hint(safe_log, "gradient") or _(" The unselected branch still "
                                                           "sees x <= 0:\nwhat does the double where of section 2 "
                                                           "give it instead?")))
            if not np.allclose(g, gradient, rtol=1e-6, atol=1e-7):
                i = _first_difference(points, g, gradient)
                said = _("{mode}, with the upstream gradient dy = {dy:g} at x = {x:g}, x receives "
                         "{got:.6g};\nexpected {want:.6g} (dy / x for x > 0, 0 elsewhere).").format(
                             mode=mode, dy=upstream[i], x=points[i], got=g[i], want=gradient[i])
                if np.allclose(g, local, rtol=1e-6, atol=1e-7):
                    raise NotYet(said + _(" The gradient is still 1/x: does your grad multiply by dy?"))
                raise NotYet(said)
    hint = _clamp_hint(safe_log, "passed")
    if hint:
        raise NotYet(_("the numbers are right here, but your function clamps x.") + hint)
    return _("log(x) where x > 0, 0 elsewhere, and a finite gradient (1/x or 0) eagerly and under XLA.")


#: The embedding table's shape: 8 rows, more than the 6 looked up, so a table-sized tensor shows.
TABLE = (8, 2)


def _example_slices(seed: int | None = None) -> tf.IndexedSlices:
    """A gradient of an 8 x 2 table with ids 4, 1, 4, 4, 0, 1 looked up (ids repeat, out of order).

    With ``seed``: another table (10 to 15 rows, 2 or 3 columns) and 6 to 9 ids with repeats, drawn from it.
    """
    if seed is None:
        values = tf.constant([[1.0, 2.0], [0.5, -1.0], [3.0, 0.0], [-1.0, 1.0], [2.0, 2.0], [0.0, 4.0]])
        return tf.IndexedSlices(values, tf.constant([4, 1, 4, 4, 0, 1]), tf.constant(TABLE))
    rng = np.random.default_rng(seed)
    rows, columns, count = int(rng.integers(10, 16)), int(rng.integers(2, 4)), int(rng.integers(6, 10))
    ids = rng.choice(rng.choice(rows, 4, replace=False), count)
    ids[:2] = ids[2]                                 # one id three times at least
    values = rng.normal(0.0, 2.0, (count, columns)).astype(np.float32)
    return tf.IndexedSlices(tf.constant(values), tf.constant(rng.permutation(ids)), tf.constant((rows, columns)))


#: A second example: 5 rows looked up (ids 700, 3, 250) in a 1000 x 3 table, so that a tensor with as
#: many rows as the largest id (an unsorted_segment_sum over max id + 1 segments) shows, as a dense copy does.
LARGE_TABLE = (1000, 3)


def _large_slices() -> tf.IndexedSlices:
    values = tf.constant(np.random.default_rng(3).uniform(-2.0, 2.0, (5, 3)).astype(np.float32))
    return tf.IndexedSlices(values, tf.constant([700, 3, 700, 250, 3]), tf.constant(LARGE_TABLE))


def _in_a_graph(one_row_per_id, example) -> tuple[list, tuple]:
    """Runs ``one_row_per_id(example())`` in a ``tf.function``; every intermediate tensor's shape, and the result.

    The traced function returns, beside the result, every tensor its graph computes (the learner's
    ops included), so their run-time shapes show. A ``tf.function`` the answer calls is traced into
    the same graph (its Python function runs there: gradlab's ``functions_traced_inline``, as the
    doctor traces), so its tensors count too; the bodies of the functions that stay nested (``tf.cond``,
    ``tf.while_loop``) add their ops with the shapes known when traced. Raises ``NotYet`` for an
    answer that runs only eagerly (``.numpy()``, NumPy): a gradient is transformed inside a graph (a
    ``tf.function``, Keras' ``fit``), where it cannot run.
    """
    traced = []

    def run():
        result = one_row_per_id(example())
        traced[:] = [t for op in tf.compat.v1.get_default_graph().get_operations() for t in op.outputs
                     if t.dtype not in (tf.resource, tf.variant, tf.string)]
        return list(traced), (result.values, result.indices, result.dense_shape)

    try:
        with functions_traced_inline():   # a nested tf.function runs its Python here: its ops are traced
            concrete = tf.function(run, autograph=False).get_concrete_function()
        values, merged = concrete()
    except Exception as error:
        raise NotYet(_("the result is right, but your function cannot run in a graph (a tf.function, Keras' "
                       "fit),\nwhere gradients are transformed: {error}\n"
                       "Does it call .numpy() or NumPy? Merge the rows with TensorFlow ops.").format(
                           error=first_line(error, limit=70))) from error
    return [(t.op.type, tuple(v.shape)) for t, v in zip(traced, values)] + _nested_shapes(concrete.graph), merged


def _nested_shapes(graph) -> list:
    """``(op type, static shape)`` of every tensor in the function bodies ``graph`` nests (tf.cond, tf.while_loop...).

    ``graph.as_graph_def().library`` holds every function the graph calls, nested ones included;
    an unknown dimension counts as 0 rows (only a known table-sized shape is found here).
    """
    shapes = []
    for function in graph.as_graph_def().library.function:
        body = function_def_to_graph(function)
        for op in body.get_operations():
            if op.type == "Placeholder":
                continue   # the body's inputs: tensors of the graph outside, counted there
            for t in op.outputs:
                if t.dtype not in (tf.resource, tf.variant, tf.string) and t.shape.rank:
                    shapes.append((op.type, tuple(d or 0 for d in t.shape.as_list())))
    return shapes


def _op_label(op_type: str) -> str:
    """The op that built a table-sized tensor, as a learner may have written it."""
    if op_type == "UnsortedSegmentSum":   # what tf.convert_to_tensor(slices) runs, too
        return _("UnsortedSegmentSum: a segment sum over ids, or tf.convert_to_tensor of an IndexedSlices")
    return op_type


@self_check
def check_exercise_2(one_row_per_id, *, seed: int | None = None) -> str:
    """Checks ``one_row_per_id``: an IndexedSlices with each index once and the same dense value.

    Two examples: 6 rows of an 8 x 2 table, then 5 rows of a 1000 x 3 table. The rows are merged
    without a tensor as large as the table (the point of keeping IndexedSlices): the answer runs as
    a graph on the second example, and a tensor with as many rows as the largest id looked up (a
    dense copy, a scatter into the table, an unsorted_segment_sum over max id + 1 segments) is
    refused, as is an answer that runs only eagerly (``.numpy()``). With ``seed`` (the instructor
    edition's held-out cases) the first example is a table and ids drawn from it instead.
    """
    for number, example in enumerate((lambda: _example_slices(seed), _large_slices)):
        slices = example()
        rows, (height, width) = int(slices.indices.shape[0]), LARGE_TABLE
        other = "" if number == 0 else _("for {rows} rows of a {height} x {width} table, ").format(
            rows=rows, height=height, width=width)
        with running(_("{other}your function").format(other=other) if other else _("your function")):
            result = one_row_per_id(slices)
            dense = tf.convert_to_tensor(result).numpy() if isinstance(result, tf.IndexedSlices) else None
        if not isinstance(result, tf.IndexedSlices):
            raise NotYet(_("{other}return a tf.IndexedSlices (got {type}); a dense tensor would "
                           "work but costs\nthe whole table's memory.").format(other=other, type=type(result).__name__))
        want = tf.convert_to_tensor(slices).numpy()
        if dense.shape != want.shape:
            raise NotYet(_("{other}the result's dense shape is {got}; the table's is {shape}: "
                           "keep slices.dense_shape.").format(other=other, got=list(dense.shape), shape=list(want.shape)))
        if not np.allclose(dense, want):
            row = int(np.flatnonzero(~np.isclose(dense, want).all(axis=1))[0])
            count = int(np.sum(slices.indices.numpy() == row))
            hint = (_("the {count} rows looked up for id {row} add up to {sum}: sum the repeated "
                      "rows, do not drop them.").format(count=count, row=row, sum=want[row]) if count > 1
                    else _("keep each id's row as it is."))
            raise NotYet(_("{other}the result's dense value differs from the input's: for id {row} it holds "
                           "{got};").format(other=other, row=row, got=dense[row]) + f"\n{hint}")
        indices = result.indices.numpy()
        if len(set(indices.tolist())) != len(indices):
            raise NotYet(_("{other}the indices still repeat ({indices}): one row per id.").format(
                other=other, indices=indices.tolist()))
        looked_up = sorted(set(slices.indices.numpy().tolist()))
        if sorted(indices.tolist()) != looked_up:
            raise NotYet(_("{other}you return rows for ids {ids}: return rows only for the ids "
                           "looked up ({looked_up});\nrows for every id cost the table's memory. tf.unique gives "
                           "the ids, tf.math.unsorted_segment_sum\nadds their rows.").format(
                               other=other, ids=_ids(indices), looked_up=looked_up))
        if number == 0:
            first = (sorted(indices.tolist()), float(np.linalg.norm(result.values.numpy())), float(np.linalg.norm(dense)))
    largest = max(looked_up)
    shapes, _merged = _in_a_graph(one_row_per_id, _large_slices)
    large = [(op_type, shape) for op_type, shape in shapes if len(shape) >= 1 and shape[0] > largest]
    if large:
        # The dense table itself if it is built, else the tallest (then largest) tensor, as it is.
        table = [found for found in large if tuple(found[1]) == LARGE_TABLE]
        op_type, shape = table[0] if table else max(large, key=lambda found: (found[1][0], int(np.prod(found[1]))))
        size = (_("the size of the whole table") if tuple(shape) == LARGE_TABLE else
                _("with a row for every id of the table ({rows} rows)").format(rows=shape[0])
                if shape[0] >= LARGE_TABLE[0] else
                _("with a row for every id up to the largest one looked up ({largest})").format(largest=largest))
        raise NotYet(_("the result is right, but for {rows} rows of a {height} x {width} table your function builds "
                       "a tensor\n{size}, {shape} ({op_type}):\nmemory in proportion to the table, which IndexedSlices "
                       "avoid. Merge the looked-up rows\nthemselves, one segment per id looked up.").format(
                           rows=int(slices.indices.shape[0]), height=LARGE_TABLE[0], width=LARGE_TABLE[1], size=size,
                           shape=list(shape), op_type=_op_label(op_type)))
    ids, norm, table_norm = first
    return _("ids {ids}, once each; the rows' norm {norm:.4f} is the table "
             "gradient's norm {table_norm:.4f}, so clipnorm now clips what you meant.").format(
                 ids=ids, norm=norm, table_norm=table_norm)


def _ids(indices) -> str:
    ids = sorted(indices.tolist())
    return str(ids) if len(ids) <= 10 else _("{first}... ({count} ids)").format(first=ids[:8], count=len(ids))
