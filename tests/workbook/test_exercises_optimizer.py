"""The self-checks of notebook 07 (exercises/optimizer.py) accept the answers and explain mistakes."""
from __future__ import annotations

import tensorflow as tf

from exercises.optimizer import check_exercise_1, check_exercise_2


def _global_clip(grads, max_norm):
    global_norm = tf.sqrt(tf.add_n([tf.reduce_sum(tf.square(g)) for g in grads]))
    return [g * tf.minimum(1.0, max_norm / global_norm) for g in grads]


def test_exercise_1_accepts_global_norm_clipping(capsys):
    assert check_exercise_1(_global_clip).passed is True
    assert capsys.readouterr().out.startswith("Correct!")


def test_exercise_1_accepts_the_library_function_too(capsys):
    assert check_exercise_1(lambda grads, max_norm: tf.clip_by_global_norm(grads, max_norm)[0]).passed is True


def test_exercise_1_explains_per_variable_clipping(capsys):
    """The notebook's starting point."""
    assert check_exercise_1(lambda grads, max_norm: [tf.clip_by_norm(g, max_norm) for g in grads]).passed is False
    out = capsys.readouterr().out
    assert out.startswith("Not yet") and "per-variable" in out


def test_exercise_1_catches_a_clip_that_always_scales(capsys):
    """Forgetting min(1, ...) scales up gradients below max_norm."""
    def always(grads, max_norm):
        global_norm = tf.linalg.global_norm(grads)
        return [g * max_norm / global_norm for g in grads]
    assert check_exercise_1(always).passed is False
    out = capsys.readouterr().out
    assert "global norm 1.3" in out and "expected" in out


def test_exercise_1_reports_wrong_shapes_and_raising_answers(capsys):
    assert check_exercise_1(lambda grads, max_norm: grads[:1]).passed is False
    assert "one tensor per gradient" in capsys.readouterr().out
    assert check_exercise_1(lambda grads, max_norm: 1 / 0).passed is False
    assert "ZeroDivisionError" in capsys.readouterr().out


def _hidden_slower(grads, variables):
    return [g * 0.1 if v.path.startswith("hidden/") else g for g, v in zip(grads, variables)]


def test_exercise_2_accepts_a_per_layer_factor(capsys):
    assert check_exercise_2(_hidden_slower).passed is True
    assert capsys.readouterr().out.startswith("Correct!")


def test_exercise_2_explains_the_starting_point_and_a_global_factor(capsys):
    assert check_exercise_2(lambda grads, variables: grads).passed is False
    out = capsys.readouterr().out
    assert out.startswith("Not yet") and "hidden/kernel" in out and "variable.path" in out
    assert check_exercise_2(lambda grads, variables: [0.1 * g for g in grads]).passed is False
    assert "out/kernel should be multiplied by 1.0" in capsys.readouterr().out


def test_exercise_2_catches_a_kernel_only_factor(capsys):
    def kernel_only(grads, variables):
        return [g * 0.1 if v.path == "hidden/kernel" else g for g, v in zip(grads, variables)]
    assert check_exercise_2(kernel_only).passed is False
    assert "hidden/bias" in capsys.readouterr().out


def test_exercise_2_reports_wrong_lengths_shapes_and_raising_answers(capsys):
    assert check_exercise_2(lambda grads, variables: grads[:2]).passed is False
    assert "one gradient per variable" in capsys.readouterr().out
    assert check_exercise_2(lambda grads, variables: [tf.reshape(g, [-1]) for g in grads]).passed is False
    assert "shape" in capsys.readouterr().out
    assert check_exercise_2(lambda grads, variables: variables.missing).passed is False
    assert "AttributeError" in capsys.readouterr().out
