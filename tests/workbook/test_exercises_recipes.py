"""The self-checks of notebook 13 (exercises/recipes.py) accept the answers and explain mistakes."""
from __future__ import annotations

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


def test_exercise_1_accepts_the_double_where_and_a_custom_gradient(capsys):
    assert check_exercise_1(_double_where_log).passed is True
    assert capsys.readouterr().out.startswith("Correct!")
    assert check_exercise_1(_custom_safe_log).passed is True


def test_exercise_1_explains_mistakes(capsys):
    assert check_exercise_1(lambda x: tf.where(x > 0, tf.math.log(x), 0.0)).passed is False        # the starting point
    assert "NaN or infinite at x = 0 (eagerly)" in capsys.readouterr().out
    assert check_exercise_1(lambda x: tf.math.log(tf.maximum(x, 1e-30))).passed is False
    assert "values are not log(x)" in capsys.readouterr().out
    assert check_exercise_1(lambda x: tf.stop_gradient(_double_where_log(x))).passed is False
    assert "no gradient reaches x" in capsys.readouterr().out
    wrong_slope = lambda x: 2.0 * _double_where_log(x) - tf.stop_gradient(_double_where_log(x))  # noqa: E731
    assert check_exercise_1(wrong_slope).passed is False
    assert "not dy / x" in capsys.readouterr().out
    assert check_exercise_1(lambda x: 1 / 0).passed is False
    assert "ZeroDivisionError" in capsys.readouterr().out


@tf.custom_gradient
def _forgets_dy(x):
    positive = x > 0
    safe = tf.where(positive, x, 1.0)
    return tf.where(positive, tf.math.log(safe), 0.0), lambda dy: tf.where(positive, 1.0 / safe, 0.0)


def test_exercise_1_refuses_a_custom_gradient_that_forgets_dy(capsys):
    assert check_exercise_1(_forgets_dy).passed is False
    assert "does your grad multiply by dy?" in capsys.readouterr().out


def _one_row_per_id(slices):
    ids, position = tf.unique(slices.indices)
    return tf.IndexedSlices(tf.math.unsorted_segment_sum(slices.values, position, tf.size(ids)), ids, slices.dense_shape)


def test_exercise_2_accepts_merged_rows(capsys):
    assert check_exercise_2(_one_row_per_id).passed is True
    out = capsys.readouterr().out
    assert out.startswith("Correct!") and "ids [0, 1, 4]" in out


def test_exercise_2_explains_mistakes(capsys):
    assert check_exercise_2(lambda s: s).passed is False                                           # the starting point
    assert "indices still repeat" in capsys.readouterr().out
    assert check_exercise_2(tf.convert_to_tensor).passed is False
    assert "return a tf.IndexedSlices" in capsys.readouterr().out
    first_rows = lambda s: tf.IndexedSlices(tf.gather(s.values, [0, 1, 4]), tf.constant([4, 1, 0]), s.dense_shape)  # noqa: E731
    assert check_exercise_2(first_rows).passed is False
    assert "sum the repeated rows" in capsys.readouterr().out
    whole_table = lambda s: tf.IndexedSlices(tf.convert_to_tensor(s), tf.range(6), s.dense_shape)  # noqa: E731
    assert check_exercise_2(whole_table).passed is False                                          # no repeats, but every id
    assert "rows only for the ids looked up ([0, 1, 4])" in capsys.readouterr().out
    assert check_exercise_2(lambda s: s.nothing).passed is False
    assert "AttributeError" in capsys.readouterr().out


def test_the_example_gradient_repeats_ids():
    indices = _example_slices().indices.numpy().tolist()
    assert len(set(indices)) < len(indices)
