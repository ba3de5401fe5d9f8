"""The self-checks of notebook 14 (exercises/questions.py) accept the answers and explain mistakes."""
from __future__ import annotations

import numpy as np
import pytest
import tensorflow as tf

from exercises.questions import (ACCUMULATION_CASES, CLIPPING_CASES, _accumulation_case, _clipping_case,
                                 _held_out_clipping, check_exercise_1, check_exercise_2)


def _accumulated(loss_fn, variables, micro_batches):
    total = [tf.zeros_like(v) for v in variables]
    for x, y in micro_batches:
        with tf.GradientTape() as tape:
            loss = loss_fn(x, y)
        total = [t + g for t, g in zip(total, tape.gradient(loss, variables))]
    return [t / len(micro_batches) for t in total]


def _summed_losses(loss_fn, variables, micro_batches):  # the notebook's starting point
    total = 0.0
    for x, y in micro_batches:
        with tf.GradientTape() as tape:
            total = total + loss_fn(x, y) / len(micro_batches)
    return tape.gradient(total, variables)


def test_exercise_1_accepts_accumulated_gradients(accepted):
    assert accepted(check_exercise_1(_accumulated)).startswith("Correct!")

    def one_tape(loss_fn, variables, micro_batches):  # one tape over every step: also one micro-batch per call
        with tf.GradientTape() as tape:
            loss = tf.add_n([loss_fn(x, y) for x, y in micro_batches]) / len(micro_batches)
        return tape.gradient(loss, variables)
    assert check_exercise_1(one_tape).passed is True


def test_exercise_1_explains_the_starting_point(refused):
    out = refused(check_exercise_1(_summed_losses))
    assert "the last micro-batch's gradient divided by 4" in out and "What can you add up" in out
    assert "zeros_like" not in out and "tape.gradient(loss" not in out  # no solution


def test_exercise_1_refuses_the_typical_mistakes(refused):
    def summed(loss_fn, variables, micro_batches):
        return [g * len(micro_batches) for g in _accumulated(loss_fn, variables, micro_batches)]
    assert "4 times the full batch's gradient" in refused(check_exercise_1(summed))

    def summed_not_averaged(loss_fn, variables, micro_batches):  # summed losses without the 1/k: the last gradient
        return [g * len(micro_batches) for g in _summed_losses(loss_fn, variables, micro_batches)]
    assert "the last micro-batch's gradient alone" in refused(check_exercise_1(summed_not_averaged))

    def full_batch(loss_fn, variables, micro_batches):  # right numbers, but the whole batch at once
        x = tf.concat([x for x, _ in micro_batches], 0)
        y = tf.concat([y for _, y in micro_batches], 0)
        with tf.GradientTape() as tape:
            loss = loss_fn(x, y)
        return tape.gradient(loss, variables)
    assert "loss_fn was called on 8 examples at once" in refused(check_exercise_1(full_batch))

    def outside(loss_fn, variables, micro_batches):
        with tf.GradientTape() as tape:
            pass
        loss = loss_fn(*micro_batches[0])
        return tape.gradient(loss, variables)
    assert "a gradient is None" in refused(check_exercise_1(outside))
    assert "raised ZeroDivisionError" in refused(check_exercise_1(lambda *args: 1 / 0))


def test_exercise_1_refuses_a_hard_coded_answer(refused):
    seed, steps, size, features = ACCUMULATION_CASES[0]
    full = _accumulation_case(seed, steps, size, features)[4]
    out = refused(check_exercise_1(lambda loss_fn, variables, micro_batches: full))
    assert "with 3 micro-batches of 3 examples" in out


def _per_example_clipped(losses_fn, w, clip):
    with tf.GradientTape() as tape:
        losses = losses_fn(w)
    per_example = tape.jacobian(losses, w)
    return tf.reduce_mean(tf.clip_by_norm(per_example, clip, axes=[1]), axis=0)


def test_exercise_2_accepts_per_example_clipping(accepted):
    assert accepted(check_exercise_2(_per_example_clipped)).startswith("Correct!")

    def in_a_loop(losses_fn, w, clip):  # one tape per example, a Python loop: slower, also right
        grads = []
        for i in range(int(tf.shape(losses_fn(w))[0])):
            with tf.GradientTape() as tape:
                loss = losses_fn(w)[i]
            g = tape.gradient(loss, w)
            grads.append(g * tf.minimum(tf.constant(1.0, g.dtype), clip / tf.norm(g)))
        return tf.reduce_mean(tf.stack(grads), 0)
    assert check_exercise_2(in_a_loop).passed is True


def test_exercise_2_explains_the_starting_point(refused):
    def clip_the_average(losses_fn, w, clip):
        with tf.GradientTape() as tape:
            loss = tf.reduce_mean(losses_fn(w))
        return tf.clip_by_norm(tape.gradient(loss, w), clip)
    out = refused(check_exercise_2(clip_the_average))
    assert "that is the average gradient, clipped" in out and "which tape method" in out
    assert "jacobian" not in out  # no solution


def test_exercise_2_refuses_the_typical_mistakes(refused):
    def not_clipped(losses_fn, w, clip):
        with tf.GradientTape() as tape:
            loss = tf.reduce_mean(losses_fn(w))
        return tape.gradient(loss, w)
    assert "no gradient was clipped" in refused(check_exercise_2(not_clipped))
    summed = lambda f, w, clip: _per_example_clipped(f, w, clip) * 6.0  # noqa: E731
    assert "the sum of the 6 clipped gradients" in refused(check_exercise_2(summed))

    def by_value(losses_fn, w, clip):
        with tf.GradientTape() as tape:
            losses = losses_fn(w)
        return tf.reduce_mean(tf.clip_by_value(tape.jacobian(losses, w), -clip, clip), axis=0)
    assert "clip each example's gradient by its norm" in refused(check_exercise_2(by_value))
    assert "return one gradient of w's shape [3] (got [6, 3])" in refused(
        check_exercise_2(lambda f, w, clip: tf.zeros((6, 3), tf.float64)))


def test_exercise_2_refuses_a_hard_coded_answer(refused):
    right = _clipping_case(*CLIPPING_CASES[0])[2]["right"]
    out = refused(check_exercise_2(lambda f, w, clip: tf.constant(right)))
    assert "with 5 examples and clip = 0.5" in out


def test_the_clipping_problems_clip_some_examples_and_not_others():
    for case in CLIPPING_CASES:
        norms, clip = _clipping_case(*case)[3], case[3]
        assert (norms > clip).any() and (norms < clip).any() or (norms > clip).all()
        assert not np.allclose(_clipping_case(*case)[2]["right"], _clipping_case(*case)[2]["average clipped"])


def _clip_the_average(losses_fn, w, clip):
    with tf.GradientTape() as tape:
        loss = tf.reduce_mean(losses_fn(w))
    return tf.clip_by_norm(tape.gradient(loss, w), clip)


@pytest.mark.parametrize("seed", [0, 1, 2024])
def test_held_out_cases_decide_as_the_public_ones(seed):
    """The instructor edition's held-out cases (check_exercise_N(..., seed=...)): other problems, same verdicts."""
    assert check_exercise_1.verdict(_accumulated, seed=seed).passed
    assert not check_exercise_1.verdict(_summed_losses, seed=seed).passed
    assert not check_exercise_1.verdict(lambda f, v, batches: [g * len(batches) for g in _accumulated(f, v, batches)],
                                        seed=seed).passed
    assert check_exercise_2.verdict(_per_example_clipped, seed=seed).passed
    for wrong in (_clip_the_average, lambda f, w, clip: _per_example_clipped(f, w, clip) * 2.0,
                  lambda f, w, clip: _per_example_clipped(f, w, 1e9)):
        assert not check_exercise_2.verdict(wrong, seed=seed).passed
    case = _held_out_clipping(seed)[0]
    norms = _clipping_case(*case)[3]
    assert (norms > case[3]).any() and (norms < case[3]).any()


def test_held_out_cases_refuse_answers_fitted_to_the_public_ones():
    """Fitted to the public cases: their right answers, looked up by the number of micro-batches and by the bound."""
    full = {steps: _accumulation_case(*case)[4] for case in ACCUMULATION_CASES for steps in [case[1]]}
    fitted_1 = lambda f, variables, batches: full.get(len(batches), [tf.zeros_like(v) for v in variables])  # noqa: E731
    assert check_exercise_1.verdict(fitted_1).passed
    assert not check_exercise_1.verdict(fitted_1, seed=7).passed
    right = {case[3]: _clipping_case(*case)[2]["right"] for case in CLIPPING_CASES}
    fitted_2 = lambda f, w, clip: tf.constant(right.get(clip, np.zeros(w.shape)))  # noqa: E731
    assert check_exercise_2.verdict(fitted_2).passed
    assert not check_exercise_2.verdict(fitted_2, seed=7).passed
