"""The self-checks of notebook 07 (exercises/optimizer.py) accept the answers and explain mistakes."""
from __future__ import annotations

import pytest
import tensorflow as tf

from exercises.optimizer import check_exercise_1, check_exercise_2


def _global_clip(grads, max_norm):
    global_norm = tf.sqrt(tf.add_n([tf.reduce_sum(tf.square(g)) for g in grads]))
    return [g * tf.minimum(1.0, max_norm / global_norm) for g in grads]


def _scaled_by(norm_of):
    """Every gradient times min(1, max_norm / norm_of(grads)): right or wrong with the norm given."""
    def clip(grads, max_norm):
        return [g * tf.minimum(1.0, max_norm / norm_of(grads)) for g in grads]
    return clip


def test_exercise_1_accepts_global_norm_clipping(accepted):
    assert accepted(check_exercise_1(_global_clip)).startswith("Correct!")
    assert check_exercise_1(_scaled_by(lambda gs: tf.norm(tf.concat([tf.reshape(g, [-1]) for g in gs], 0)))).passed
    assert check_exercise_1.verdict(lambda grads, max_norm: [                        # eagerly, in NumPy
        g.numpy() * min(1.0, max_norm / sum(float(tf.reduce_sum(h * h)) for h in grads) ** 0.5) for g in grads]).passed


def test_exercise_1_refuses_the_library_functions_the_exercise_rules_out(refused):
    """The exercise says: without tf.clip_by_global_norm or tf.linalg.global_norm."""
    out = refused(check_exercise_1(lambda grads, max_norm: tf.clip_by_global_norm(grads, max_norm)[0]))
    assert "the numbers are right, but your function calls tf.clip_by_global_norm.\n" in out  # only the call made
    assert "calls tf.linalg.global_norm." in refused(check_exercise_1(_scaled_by(tf.linalg.global_norm)))


def test_exercise_1_explains_per_variable_clipping(refused):
    """The notebook's starting point."""
    out = refused(check_exercise_1(lambda grads, max_norm: [tf.clip_by_norm(g, max_norm) for g in grads]))
    assert out.startswith("Not yet") and "per-variable" in out
    assert "you return\n[[3.0, 4.0], [[0.0, 6.5]]], expected [[1.5, 2.0], [[0.0, 6.0]]]" in out
    assert "(norms 5.0, 12.0)" in out and "= 13.0" in out


def test_exercise_1_catches_a_clip_that_always_scales(refused):
    """Forgetting min(1, ...) scales up gradients below max_norm."""
    def always(grads, max_norm):
        global_norm = tf.sqrt(tf.add_n([tf.reduce_sum(tf.square(g)) for g in grads]))
        return [g * max_norm / global_norm for g in grads]
    out = refused(check_exercise_1(always))
    assert "global norm 1.3" in out and "expected [[0.3, 0.4], [[0.0, 1.2]]]" in out
    assert "multiplied every tensor by 1.5385" in out and "forget the min(1, ...)" in out


def test_exercise_1_names_a_missing_square_root_a_sum_of_norms_and_no_clip(refused):
    out = refused(check_exercise_1(_scaled_by(lambda gs: tf.add_n([tf.reduce_sum(g * g) for g in gs]))))
    assert "by 0.0385" in out and "min(1, 6.5 / 13.0) = 0.5000" in out and "sum of squares, 169.00" in out
    out = refused(check_exercise_1(_scaled_by(lambda gs: tf.add_n([tf.norm(g) for g in gs]))))
    assert "by 0.3824" in out and "added the tensors' norms (17.0)" in out
    out = refused(check_exercise_1(lambda grads, max_norm: grads))
    assert "by 1.0000" in out and "13.0 is above max_norm" in out
    inverted = lambda grads, max_norm: [g * tf.linalg.global_norm(grads) / max_norm for g in grads]  # noqa: E731
    out = refused(check_exercise_1(inverted))
    assert "by 2.0000" in out and "upside down" in out


def test_exercise_1_reports_wrong_shapes_none_and_raising_answers(refused):
    assert "one tensor per gradient" in refused(check_exercise_1(lambda grads, max_norm: grads[:1]))
    assert "returned None" in refused(check_exercise_1(lambda grads, max_norm: None))
    assert "ZeroDivisionError" in refused(check_exercise_1(lambda grads, max_norm: 1 / 0))


def _hidden_slower(grads, variables):
    return [g * 0.1 if v.path.startswith("hidden/") else g for g, v in zip(grads, variables)]


def test_exercise_2_accepts_a_per_layer_factor(accepted):
    assert accepted(check_exercise_2(_hidden_slower)).startswith("Correct!")
    assert check_exercise_2(lambda grads, variables: [
        g * 0.1 if v.path.split("/")[0] == "hidden" else g for g, v in zip(grads, variables)]).passed is True


def test_exercise_2_refuses_an_answer_by_position_or_by_shape(refused):
    """Both pass on the notebook's model alone; the second model reorders the variables and equalises shapes."""
    out = refused(check_exercise_2(lambda grads, variables: [g * 0.1 if i < 2 else g for i, g in enumerate(grads)]))
    assert "another order (out/ first)" in out and "multiplied by 0.10" in out and "by position or by shape" in out
    by_shape = lambda grads, variables: [g * 0.1 if tuple(g.shape) in ((3, 4), (4,)) else g for g in grads]  # noqa: E731
    assert "by position or by shape" in refused(check_exercise_2(by_shape))


def test_exercise_2_explains_the_starting_point_and_a_global_factor(refused):
    out = refused(check_exercise_2(lambda grads, variables: grads))
    assert out.startswith("Not yet") and "hidden/kernel should be multiplied by 0.1" in out
    assert "multiplied by 1.00" in out and "Which attribute of a variable" in out
    assert "variable.path" not in out  # no solution
    out = refused(check_exercise_2(lambda grads, variables: [0.1 * g for g in grads]))
    assert "out/kernel should be multiplied by 1.0" in out and "Only the hidden layer" in out


def test_exercise_2_catches_a_kernel_only_factor(refused):
    def kernel_only(grads, variables):
        return [g * 0.1 if v.path == "hidden/kernel" else g for g, v in zip(grads, variables)]
    out = refused(check_exercise_2(kernel_only))
    assert "hidden/bias should be multiplied by 0.1" in out and "The bias is part of the hidden layer" in out


def test_exercise_2_reports_wrong_lengths_shapes_none_and_raising_answers(refused):
    assert "one gradient per variable (4); you returned 2" in refused(check_exercise_2(lambda grads, variables: grads[:2]))
    assert "has shape (3, 4); you returned shape (12,)" in refused(
        check_exercise_2(lambda grads, variables: [tf.reshape(g, [-1]) for g in grads])
    )
    assert "returned None" in refused(check_exercise_2(lambda grads, variables: None))
    assert "AttributeError" in refused(check_exercise_2(lambda grads, variables: variables.missing))


def test_exercise_1_refuses_a_hard_coded_max_norm(refused):
    """Issue 39: the second case uses another max_norm, so 6.5 written into the answer fails there, named."""
    out = refused(check_exercise_1(lambda grads, max_norm: _global_clip(grads, 6.5)))
    assert "for gradients [[6.0, 8.0], [[0.0, 24.0]]] (global norm 26.0) and max_norm 2.6 you return" in out
    assert "by 0.2500; the factor is min(1, 2.6 / 26.0) = 0.1000:\nthat is the factor for max_norm 6.5, not this case's " \
           "2.6. Is 6.5 written into your\nfunction?" in out


@pytest.mark.parametrize("seed", [0, 1, 7, 2024])
def test_held_out_cases_decide_as_the_public_ones(seed, accepted, refused):
    """The instructor edition's held-out cases (check_exercise_N(..., seed=...)): other inputs, same verdicts."""
    accepted(check_exercise_1(_global_clip, seed=seed))
    accepted(check_exercise_2(_hidden_slower, seed=seed))
    assert "per-variable" in refused(check_exercise_1(lambda grads, max_norm: [tf.clip_by_norm(g, max_norm) for g in grads],
                                                      seed=seed))
    assert "tf.clip_by_global_norm" in refused(
        check_exercise_1(lambda grads, max_norm: tf.clip_by_global_norm(grads, max_norm)[0], seed=seed))
    assert "Which attribute of a variable" in refused(check_exercise_2(lambda grads, variables: grads, seed=seed))


def test_held_out_cases_refuse_answers_fitted_to_the_public_ones(refused):
    """max_norm 6.5 written in passes the first public case; positions or shapes written in pass the first model."""
    assert "and max_norm" in refused(check_exercise_1(lambda grads, max_norm: _global_clip(grads, 6.5), seed=1))
    assert "Is 2.6 written into" in refused(check_exercise_1(lambda grads, max_norm: _global_clip(grads, 2.6), seed=1))
    by_position = lambda grads, variables: [g * f for g, f in zip(grads, (0.1, 0.1, 1.0, 1.0))]  # noqa: E731
    assert not check_exercise_2.verdict(by_position, seed=1).passed
    by_shape = lambda grads, variables: [g * 0.1 if tuple(g.shape) in ((3, 4), (4,)) else g for g in grads]  # noqa: E731
    assert not check_exercise_2.verdict(by_shape, seed=1).passed


def test_exercise_2_refuses_hard_coded_factors_by_position(refused):
    """The factors 0.1, 0.1, 1, 1 of the first model's variable order, whatever the variables: refused."""
    out = refused(check_exercise_2(lambda grads, variables: [g * f for g, f in zip(grads, (0.1, 0.1, 1.0, 1.0))]))
    assert "with the variables in another order (out/ first)" in out


def test_exercise_1_held_out_names_a_max_norm_written_in_above_the_global_norm(refused):
    """Issue F12: with seed 3 the global norm (3.5) is below 6.5, so 6.5 written in leaves the gradients
    alone; the hint names 6.5, and an answer that never clips is not told so."""
    out = refused(check_exercise_1(lambda grads, max_norm: _global_clip(grads, 6.5), seed=3))
    assert "is above max_norm, so the gradients must shrink" in out
    assert "clips to max_norm 6.5" in out and "is 6.5 written into your function?" in out
    out = refused(check_exercise_1(lambda grads, max_norm: grads, seed=3))
    assert "is above max_norm, so the gradients must shrink" in out and "written into" not in out


def test_exercise_2_names_a_wrong_factor_on_the_right_variables(refused):
    slowed = lambda grads, variables: [g * (0.01 if v.path.startswith("hidden/") else 1.0)  # noqa: E731
                                       for g, v in zip(grads, variables)]
    out = refused(check_exercise_2(slowed))
    assert "multiplied by 0.01" in out and "the exercise asks for 0.1" in out
    assert "Tell the layers apart" not in out


@pytest.mark.parametrize("factor", [0.1, 0.5])
def test_exercise_2_names_the_variables_scaled_that_should_not_be_when_every_gradient_is(factor, refused):
    """Issue 39: every gradient scaled is not 'the right variables, by the wrong factor'."""
    out = refused(check_exercise_2(lambda grads, variables: [factor * g for g in grads]))
    assert "right variables" not in out
    assert "Your transform changed every gradient: those of out/kernel and out/bias should stay\nas they are." in out


def test_exercise_2_names_the_wrong_set_of_variables(refused):
    out_only = lambda grads, variables: [g * (0.1 if v.path.startswith("out/") else 1.0)  # noqa: E731
                                         for g, v in zip(grads, variables)]
    out = refused(check_exercise_2(out_only))
    assert "hidden/kernel should be multiplied by 0.1" in out and "right variables" not in out
    assert "changed the gradients of out/kernel and out/bias, which should stay as they\nare." in out
    with_out_bias = lambda grads, variables: [g * (0.5 if v.path != "out/kernel" else 1.0)  # noqa: E731
                                              for g, v in zip(grads, variables)]
    out = refused(check_exercise_2(with_out_bias))
    assert "changed the gradients of out/bias, which" in out and "right variables" not in out
