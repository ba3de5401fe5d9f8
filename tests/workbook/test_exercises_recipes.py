"""The self-checks of notebook 13 (exercises/recipes.py) accept the answers and explain mistakes."""
from __future__ import annotations

import re

import numpy as np
import pytest
import tensorflow as tf

from exercises.recipes import _example_slices, check_exercise_1, check_exercise_2


def _double_where_log(x):
    positive = x > 0
    return tf.where(positive, tf.math.log(tf.where(positive, x, 1.0)), 0.0)


@tf.custom_gradient
def _custom_safe_log(x):
    positive = x > 0
    safe = tf.where(positive, x, 1.0)
    return tf.where(positive, tf.math.log(safe), 0.0), lambda dy: tf.where(positive, dy / safe, 0.0)


def test_exercise_1_accepts_the_double_where_and_a_custom_gradient(accepted):
    assert accepted(check_exercise_1(_double_where_log)).startswith("Correct!")
    assert check_exercise_1(_custom_safe_log).passed is True
    assert check_exercise_1(lambda x: tf.math.log(tf.where(x > 0, x, 1.0))).passed is True   # log(1) = 0 already


def test_exercise_1_explains_the_starting_point(refused):
    out = refused(check_exercise_1(lambda x: tf.where(x > 0, tf.math.log(x), 0.0)))
    assert "eagerly, the gradient is NaN or infinite at x = 0." in out
    assert "what does the double where of section 2 give it instead?" in out
    assert "second tf.where" not in out  # no solution


def test_exercise_1_refuses_an_epsilon_or_a_clamp(refused):
    """log(x + eps) and log(max(x, eps)) give a finite gradient; only at tiny x does the value show them."""
    out = refused(check_exercise_1(lambda x: tf.where(x > 0, tf.math.log(x + 1e-8), 0.0)))
    assert "at x = 1e-37 safe_log returns -18.4207; expected log(x) = -85.1956" in out
    assert "An epsilon or a clamp changes log(x), most near 0" in out
    assert "Your clamp 1e-30 changes log x below it" in refused(
        check_exercise_1(lambda x: tf.where(x > 0, tf.math.log(tf.maximum(x, 1e-30)), 0.0)))
    assert "returns -69.0776; expected log(x) = -85.1956" in refused(
        check_exercise_1(lambda x: tf.where(x > 0, tf.math.log(tf.maximum(x, 1e-30)), 0.0))
    )
    assert "NaN or infinite at x = 0" in refused(
        check_exercise_1(lambda x: tf.where(x > 0, tf.math.log(x + 1e-38), 0.0))
    )  # an eps too small for 1/eps


@pytest.mark.parametrize("seed", [None, 3])
def test_exercise_1_names_the_usual_epsilon_wherever_it_shows(seed, refused):
    """log(x + 1e-7) first shows at an ordinary x (1, or a held-out point): the hint is given there too,
    with digits enough to tell the two numbers apart."""
    out = refused(check_exercise_1(lambda x: tf.where(x > 0, tf.math.log(x + 1e-7), 0.0), seed=seed))
    assert "An epsilon or a clamp changes log(x), most near 0" in out
    got, want = re.search(r"safe_log returns (\S+); expected log\(x\) = (\S+)\.", out).groups()
    assert float(got) != float(want) and (float(want) == 0 or len(got) == len(want))


def test_exercise_1_refuses_a_clamp_just_above_the_smallest_normal(refused):
    """Issue 39: a clamp at 1e-37 or 2e-38 changes log x below it, which the smallest normals show."""
    out = refused(check_exercise_1(lambda x: tf.where(x > 0, tf.math.log(tf.maximum(x, 1e-37)), 0.0)))
    assert "at x = 2e-38 safe_log returns -85.1956; expected log(x) = -86.8051" in out
    assert "Your clamp 1e-37 changes log x below it" in out
    out = refused(check_exercise_1(lambda x: tf.where(x > 0, tf.math.log(tf.maximum(x, 2e-38)), 0.0)))
    assert "at x = 1.17549e-38 safe_log returns -86.8051; expected log(x) = -87.3365" in out
    assert ("Your clamp 2e-38 changes log x below it: at x = 1.17549e-38 (the smallest normal float32)\n"
            "log(max(x, c)) is -86.8051, where log x is -87.3365.") in out


def test_exercise_1_accepts_a_clamp_that_changes_no_value(accepted):
    """A clamp at the smallest normal float32, or a subnormal one beside the double where, changes no value or
    gradient TensorFlow computes (every float32 below it is 0 to TensorFlow): nothing observable to refuse."""
    tiny = float(np.finfo(np.float32).tiny)
    accepted(check_exercise_1(lambda x: tf.where(x > 0, tf.math.log(tf.maximum(x, tiny)), 0.0)))
    accepted(check_exercise_1(lambda x: _double_where_log(tf.maximum(x, 1e-38))))


def test_exercise_1_held_out_points_name_a_clamp_by_what_it_changes(refused):
    """The held-out points (no smallest normal among them) pass a 2e-38 clamp's numbers; the graph shows it,
    and the message says what it changes."""
    out = refused(check_exercise_1(lambda x: tf.where(x > 0, tf.math.log(tf.maximum(x, 2e-38)), 0.0), seed=3))
    assert out.startswith("Not yet: the numbers are right here, but your function clamps x.\nYour clamp 2e-38")
    assert "log(max(x, c)) is -86.8051, where log x is -87.3365" in out


def test_exercise_1_names_a_subnormal_clamp_flushed_to_zero(refused):
    """1e-38 is a subnormal float32, which TensorFlow on CPU flushes to zero: the clamp is max(x, 0)."""
    assert not (tf.constant(1e-38) > 0).numpy() and not (tf.constant(1e-40) > 0).numpy()   # measured: flushed
    out = refused(check_exercise_1(lambda x: tf.where(x > 0, tf.math.log(tf.maximum(x, 1e-38)), 0.0)))
    assert "the gradient is NaN or infinite at x = 0.\nYour clamp 1e-38 is below the smallest normal float32" in out
    assert "flushes\nsuch a subnormal to zero, so max(x, c) is max(x, 0)" in out
    assert "unselected branch still sees" not in out


def test_exercise_1_refuses_a_hard_coded_answer(refused):
    """The first case's values and gradients, returned whatever x is: the second, seeded case refuses them."""
    from exercises.recipes import POINTS, UPSTREAM
    value = _double_where_log(tf.constant(POINTS))
    gradient = tf.constant(UPSTREAM / np.where(POINTS > 0, POINTS, np.inf))

    @tf.custom_gradient
    def hard_coded(x):
        return tf.identity(value), lambda dy: tf.identity(gradient)
    out = refused(check_exercise_1(hard_coded))
    assert out.startswith("Not yet: eagerly (other points), safe_log(x) has shape (9,); x has shape (10,).")


def test_exercise_1_explains_wrong_values_and_gradients(refused):
    out = refused(check_exercise_1(lambda x: tf.math.log(tf.maximum(x, 1e-30))))
    assert "at x = -2 safe_log returns -69.0776; expected 0." in out and "Where x <= 0 the value is 0" in out
    assert "no gradient reaches x" in refused(check_exercise_1(lambda x: tf.stop_gradient(_double_where_log(x))))
    wrong_slope = lambda x: 2.0 * _double_where_log(x) - tf.stop_gradient(_double_where_log(x))  # noqa: E731
    out = refused(check_exercise_1(wrong_slope))
    assert "with the upstream gradient dy = 1.5 at x = 0.25, x receives 12;\nexpected 6 (dy / x" in out
    assert "ZeroDivisionError" in refused(check_exercise_1(lambda x: 1 / 0))


@tf.custom_gradient
def _forgets_dy(x):
    positive = x > 0
    safe = tf.where(positive, x, 1.0)
    return tf.where(positive, tf.math.log(safe), 0.0), lambda dy: tf.where(positive, 1.0 / safe, 0.0)


def test_exercise_1_refuses_a_custom_gradient_that_forgets_dy(refused):
    out = refused(check_exercise_1(_forgets_dy))
    assert "dy = 1.5 at x = 0.25, x receives 4;\nexpected 6" in out and "does your grad multiply by dy?" in out


def _one_row_per_id(slices):
    ids, position = tf.unique(slices.indices)
    return tf.IndexedSlices(tf.math.unsorted_segment_sum(slices.values, position, tf.size(ids)), ids, slices.dense_shape)


def test_exercise_2_accepts_merged_rows(accepted):
    out = accepted(check_exercise_2(_one_row_per_id))
    assert out.startswith("Correct!") and "ids [0, 1, 4]" in out

    assert check_exercise_2(tf.function(_one_row_per_id)).passed is True


def test_exercise_2_refuses_a_dense_copy_of_the_table(refused):
    """Gathering the looked-up rows from a dense copy gives the right IndexedSlices at the table's memory cost."""
    def via_dense(slices):
        ids, _ = tf.unique(slices.indices)
        return tf.IndexedSlices(tf.gather(tf.convert_to_tensor(slices), ids), ids, slices.dense_shape)
    out = refused(check_exercise_2(via_dense))
    assert "builds a tensor\nthe size of the whole table, [1000, 3] (UnsortedSegmentSum)" in out

    def via_scatter(slices):
        ids, _ = tf.unique(slices.indices)
        table = tf.scatter_nd(tf.expand_dims(slices.indices, 1), slices.values, slices.dense_shape)
        return tf.IndexedSlices(tf.gather(table, ids), ids, slices.dense_shape)
    assert "[1000, 3] (ScatterNd)" in refused(check_exercise_2(via_scatter))


def test_exercise_2_looks_inside_a_nested_tf_function(refused):
    """Issue 39: a dense copy or a scatter inside the answer's own tf.function is found, with its run-time shape."""
    @tf.function
    def dense(slices):
        return tf.convert_to_tensor(slices)

    def via_inner_dense(slices):
        ids, _ = tf.unique(slices.indices)
        return tf.IndexedSlices(tf.gather(dense(slices), ids), ids, slices.dense_shape)
    out = refused(check_exercise_2(via_inner_dense))
    assert "builds a tensor\nthe size of the whole table, [1000, 3] (UnsortedSegmentSum)" in out

    @tf.function
    def scattered(indices, values, shape):
        return tf.scatter_nd(tf.expand_dims(indices, 1), values, shape)

    @tf.function
    def merged_rows(slices):   # two levels deep
        ids, _ = tf.unique(slices.indices)
        return tf.gather(scattered(slices.indices, slices.values, slices.dense_shape), ids), ids

    def via_inner_scatter(slices):
        rows, ids = merged_rows(slices)
        return tf.IndexedSlices(rows, ids, slices.dense_shape)
    assert "[1000, 3] (ScatterNd)" in refused(check_exercise_2(via_inner_scatter))


def test_exercise_2_looks_inside_a_tf_cond(refused):
    """The branches of a tf.cond stay nested functions: their ops count with the shapes known when traced
    (here the table's, read with tf.get_static_value), though only the looked-up rows leave the branch."""
    def via_cond(slices):
        ids, _ = tf.unique(slices.indices)
        shape = [int(n) for n in tf.get_static_value(slices.dense_shape)]

        def rows_of_a_table():
            return tf.gather(tf.scatter_nd(tf.expand_dims(slices.indices, 1), slices.values, shape), ids)
        rows = tf.cond(tf.size(ids) > 0, rows_of_a_table, lambda: tf.zeros([tf.size(ids), shape[1]]))
        return tf.IndexedSlices(rows, ids, slices.dense_shape)
    assert "builds a tensor\nthe size of the whole table, [1000, 3] (ScatterNd)" in refused(check_exercise_2(via_cond))


def test_exercise_2_names_the_dense_table_a_one_hot_product_builds(refused):
    """A one-hot matrix (1000 x 5) times the rows builds the dense table (1000 x 3): the message names the table."""
    def via_one_hot(slices):
        ids, _ = tf.unique(slices.indices)
        table = tf.matmul(tf.one_hot(slices.indices, slices.dense_shape[0], axis=0), slices.values)
        return tf.IndexedSlices(tf.gather(table, ids), ids, slices.dense_shape)
    assert "builds a tensor\nthe size of the whole table, [1000, 3] (MatMul)" in refused(check_exercise_2(via_one_hot))

    def one_hot_only(slices):   # the one-hot matrix alone: a row for every id of the table, not the table
        ids, _ = tf.unique(slices.indices)
        selected = tf.gather(tf.one_hot(slices.indices, slices.dense_shape[0], axis=0), ids)
        return tf.IndexedSlices(tf.matmul(selected, slices.values), ids, slices.dense_shape)
    assert "with a row for every id of the table (1000 rows), [1000, 5] (OneHot)" in refused(check_exercise_2(one_hot_only))


def test_exercise_2_refuses_a_segment_sum_as_large_as_the_largest_id(refused):
    def by_largest_id(slices):
        summed = tf.math.unsorted_segment_sum(slices.values, slices.indices, tf.reduce_max(slices.indices) + 1)
        ids, _ = tf.unique(slices.indices)
        return tf.IndexedSlices(tf.gather(summed, ids), ids, slices.dense_shape)
    out = refused(check_exercise_2(by_largest_id))
    assert "with a row for every id up to the largest one looked up (700), [701, 3] (UnsortedSegmentSum)" in out
    assert "one segment per id looked up" in out


def test_exercise_2_refuses_an_eager_answer_in_numpy(refused):
    """It gives the right slices eagerly, but no gradient transformation inside a graph could run it."""
    def in_numpy(slices):
        ids, position = np.unique(slices.indices.numpy(), return_inverse=True)
        values = np.zeros((len(ids), slices.values.shape[1]), np.float32)
        np.add.at(values, position, slices.values.numpy())
        return tf.IndexedSlices(tf.constant(values), tf.constant(ids), slices.dense_shape)
    out = refused(check_exercise_2(in_numpy))
    assert "cannot run in a graph (a tf.function, Keras' fit)" in out and "Does it call .numpy() or NumPy?" in out


def test_exercise_2_refuses_a_hard_coded_answer(refused):
    """The merged rows of the first example, returned whatever the slices: the second example refuses them."""
    merged = _one_row_per_id(_example_slices())
    out = refused(check_exercise_2(lambda slices: merged))
    assert out.startswith("Not yet: for 5 rows of a 1000 x 3 table, the result's dense shape is [8, 2]")


def test_exercise_2_explains_mistakes(refused):
    assert "indices still repeat ([4, 1, 4, 4, 0, 1])" in refused(check_exercise_2(lambda s: s))  # the starting point
    assert "return a tf.IndexedSlices (got EagerTensor)" in refused(check_exercise_2(tf.convert_to_tensor))
    first_rows = lambda s: tf.IndexedSlices(tf.gather(s.values, [0, 1, 4]), tf.constant([4, 1, 0]), s.dense_shape)  # noqa: E731
    out = refused(check_exercise_2(first_rows))
    assert "for id 1 it holds [ 0.5 -1. ]" in out and "the 2 rows looked up for id 1 add up to [0.5 3. ]" in out
    assert "sum the repeated rows" in out
    whole_table = lambda s: tf.IndexedSlices(tf.convert_to_tensor(s), tf.range(8), s.dense_shape)  # noqa: E731
    assert "rows only for the ids looked up ([0, 1, 4])" in refused(check_exercise_2(whole_table))  # no repeats, but every id
    assert "dense shape is [6, 2]; the table's is [8, 2]" in refused(
        check_exercise_2(lambda s: tf.IndexedSlices(s.values, s.indices, tf.constant([6, 2])))
    )
    assert "AttributeError" in refused(check_exercise_2(lambda s: s.nothing))


def test_the_example_gradient_repeats_ids_and_leaves_table_rows_unused():
    slices = _example_slices()
    indices = slices.indices.numpy().tolist()
    assert len(set(indices)) < len(indices) and int(slices.dense_shape[0]) > len(indices)


@pytest.mark.parametrize("seed", [0, 1, 2024])
def test_held_out_cases_decide_as_the_public_ones(seed):
    """The instructor edition's held-out cases (check_exercise_N(..., seed=...)): other inputs, same verdicts."""
    assert check_exercise_1.verdict(_double_where_log, seed=seed).passed
    assert check_exercise_1.verdict(_custom_safe_log, seed=seed).passed
    assert not check_exercise_1.verdict(lambda x: tf.math.log(tf.maximum(x, 1e-30)), seed=seed).passed
    assert not check_exercise_1.verdict(lambda x: tf.where(x > 0, tf.math.log(x), 0.0), seed=seed).passed
    assert not check_exercise_1.verdict(_forgets_dy, seed=seed).passed
    assert check_exercise_2.verdict(_one_row_per_id, seed=seed).passed
    assert not check_exercise_2.verdict(lambda slices: slices, seed=seed).passed
    held_out = _example_slices(seed)
    assert len(set(held_out.indices.numpy().tolist())) < len(held_out.indices.numpy())
