"""The self-checks of notebook 12 (exercises/domain_adversarial.py) accept the answers and explain mistakes."""
from __future__ import annotations

import keras
import numpy as np
import pytest
import tensorflow as tf

import gradlab

from exercises.domain_adversarial import check_exercise_1, check_exercise_2
from papers.dann import reversal_factor


class _Ramp(keras.callbacks.Callback):
    """The answer: a step counter of its own, across epochs."""
    def __init__(self, reversal, total_steps):
        super().__init__()
        self.reversal, self.total_steps, self.step = reversal, total_steps, 0

    def on_train_batch_begin(self, batch, logs=None):
        self.reversal.factor = reversal_factor(self.step / self.total_steps)
        self.step += 1


class _PerEpoch(keras.callbacks.Callback):
    """The starting point: fit's batch index, which restarts every epoch."""
    def __init__(self, reversal, total_steps):
        super().__init__()
        self.reversal, self.total_steps = reversal, total_steps

    def on_train_batch_begin(self, batch, logs=None):
        self.reversal.factor = reversal_factor(batch / self.total_steps)


class _Never(keras.callbacks.Callback):
    def __init__(self, reversal, total_steps):
        super().__init__()


class _AfterTheStep(_Ramp):
    """Sets the factor after each step: every value one step late."""
    def on_train_batch_begin(self, batch, logs=None):
        pass

    def on_train_batch_end(self, batch, logs=None):
        super().on_train_batch_begin(batch, logs)


class _FromOne(_Ramp):
    """Counts the steps from 1: every value one step early."""
    def on_train_batch_begin(self, batch, logs=None):
        self.step += 1
        self.reversal.factor = reversal_factor(self.step / self.total_steps)


class _PerEpochOnly(_Ramp):
    def on_train_batch_begin(self, batch, logs=None):
        pass

    def on_epoch_begin(self, epoch, logs=None):
        self.reversal.factor = reversal_factor(epoch * 3 / self.total_steps)


class _FromTheOptimizer(_Ramp):
    """Another right answer: the optimizer's step counter runs across epochs."""
    def on_train_batch_begin(self, batch, logs=None):
        self.reversal.factor = reversal_factor(int(self.model.optimizer.iterations) / self.total_steps)


def test_exercise_1_accepts_a_step_counter(accepted):
    assert accepted(check_exercise_1(_Ramp)).startswith("Correct!")
    assert check_exercise_1(_FromTheOptimizer).passed is True


def test_exercise_1_names_a_late_an_early_and_a_once_an_epoch_ramp(refused):
    out = refused(check_exercise_1(_AfterTheStep))
    assert "[0.     0.     0.6823 0.9311 0.9866 0.9975]; the ramp is\n[0.     0.6823" in out and "one step late" in out
    assert "one step early" in refused(check_exercise_1(_FromOne))
    assert "only once an epoch" in refused(check_exercise_1(_PerEpochOnly))


def test_exercise_1_explains_the_per_epoch_batch_index_and_a_factor_never_set(refused):
    out = refused(check_exercise_1(_PerEpoch))
    assert "[0.     0.6823 0.9311 0.     0.6823 0.9311]" in out and "counts the batches of\nthe current epoch" in out
    assert "a step number that keeps counting across epochs?" in out
    assert "Count the steps yourself" not in out and "counter" not in out  # no solution
    assert "never changed" in refused(check_exercise_1(_Never))
    assert "ZeroDivisionError" in refused(check_exercise_1(lambda reversal, total_steps: 1 / 0))


class _StopsAfterTwoSteps(_Ramp):
    def on_train_batch_end(self, batch, logs=None):
        self.model.stop_training = self.step == 2


def test_exercise_1_names_a_training_that_saw_fewer_steps(refused):
    # The ramp's first values are right, but fit stopped early: a Not yet that counts the steps, no crash.
    assert "The callback saw 2 steps, not 6" in refused(check_exercise_1(_StopsAfterTwoSteps))


def test_exercise_2_accepts_the_reversal_between_features_and_head(accepted):
    assert accepted(check_exercise_2(lambda f, reversal, head: head(reversal(f)))).startswith("Correct!")


def test_exercise_2_explains_each_misplaced_or_missing_reversal(refused):
    out = refused(check_exercise_2(lambda f, reversal, head: reversal(head(f))))  # the starting point
    assert "kernel receives [ 0.0318  0.1056 -0.142 ]" in out and "plain gradient is [-0.0635 -0.2112  0.2841]" in out
    assert "it gets it reversed" in out
    out = refused(check_exercise_2(lambda f, reversal, head: head(f)))
    assert "the features receive [ 0.00619748 -0.07544687  0.13391402]" in out
    assert "the encoder would help the domain head" in out
    assert "source-only observer" in refused(check_exercise_2(lambda f, reversal, head: head(tf.stop_gradient(f))))
    assert "should be the domain head's logits" in refused(check_exercise_2(lambda f, reversal, head: 2.0 * head(reversal(f))))
    out = refused(check_exercise_2(lambda f, reversal, head: head(reversal(reversal(f)))))
    assert "they should receive -0.5 times" in out and "They get 0.25 times" in out
    assert "AttributeError" in refused(check_exercise_2(lambda f, reversal, head: head.missing))


def test_exercise_2_refuses_a_reversal_of_its_own_with_a_fixed_factor(refused):
    """Right with factor 0.5; the check then sets the layer's factor to 1.5, as the ramp would."""
    out = refused(check_exercise_2(lambda f, reversal, head: head(gradlab.reverse_gradient(f, 0.5))))
    assert "with reversal.factor set to 1.5" in out and "-1.5 times the plain gradient" in out
    assert "call the reversal layer passed in, reversal(features)," in out


class _HardCoded(keras.callbacks.Callback):
    """The six factors of the 6-step ramp, copied: the 8-step training refuses them."""
    def __init__(self, reversal, total_steps):
        super().__init__()
        self.reversal, self.step = reversal, 0

    def on_train_batch_begin(self, batch, logs=None):
        self.reversal.factor = reversal_factor(min(self.step, 5) / 6)
        self.step += 1


def test_exercise_1_refuses_a_hard_coded_ramp(refused):
    out = refused(check_exercise_1(_HardCoded))
    assert "over 2 epochs of 4 batches (8 steps)" in out and "from total_steps" in out


def test_exercise_2_refuses_the_layers_factor_read_as_a_python_number(refused):
    """Issue 39: reverse_gradient(f, reversal.factor) is right eagerly, but a tf.function freezes the float."""
    out = refused(check_exercise_2(lambda f, reversal, head: head(gradlab.reverse_gradient(f, reversal.factor))))
    assert "inside a tf.function, after reversal.factor changed to 1.5" in out
    assert "read once, as a Python number, while tracing (notebook 11, §3.1)" in out
    assert "call the layer, reversal(features), which reads its factor at every call" in out


def _public_features_gradient() -> tf.Tensor:
    """The gradient the public case's first features receive from a seeded head (to write into an answer)."""
    features = tf.constant(np.random.default_rng(0).normal(size=(4, 3)), tf.float32)
    keras.utils.set_random_seed(0)
    head = keras.layers.Dense(1)
    with tf.GradientTape() as tape:
        tape.watch(features)
        loss = keras.losses.BinaryCrossentropy(from_logits=True)(tf.constant([[0.0], [0.0], [1.0], [1.0]]), head(features))
    return tape.gradient(loss, features)


def test_exercise_2_refuses_a_hard_coded_gradient(refused):
    """The features' gradient of the first features, sent whatever the features: the traced probe refuses it."""
    plain = _public_features_gradient()

    def hard_coded(f, reversal, head):
        @tf.custom_gradient
        def reverse(t):
            return tf.identity(t), lambda dy: -reversal.factor * plain
        return head(reverse(f))
    out = refused(check_exercise_2(hard_coded))
    assert out.startswith("Not yet: inside a tf.function, after reversal.factor changed to 0.5")


@pytest.mark.parametrize("seed", [0, 1, 7, 2024])
def test_held_out_cases_decide_as_the_public_ones(seed, accepted, refused):
    """The instructor edition's held-out cases (check_exercise_N(..., seed=...)): other inputs, same verdicts."""
    accepted(check_exercise_1(_Ramp, seed=seed))
    accepted(check_exercise_2(lambda f, reversal, head: head(reversal(f)), seed=seed))
    assert "It starts again at the second epoch" in refused(check_exercise_1(_PerEpoch, seed=seed))
    assert "it gets it reversed" in refused(check_exercise_2(lambda f, reversal, head: reversal(head(f)), seed=seed))
    assert "call the layer, reversal(features)" in refused(
        check_exercise_2(lambda f, reversal, head: head(gradlab.reverse_gradient(f, reversal.factor)), seed=seed))


def test_held_out_cases_refuse_answers_fitted_to_the_public_ones(refused):
    """The public ramp's factors, or the public features' gradient, written into the answer: a seed refuses them."""
    assert "the ramp is" in refused(check_exercise_1(_HardCoded, seed=3))
    plain = _public_features_gradient()

    def hard_coded(f, reversal, head):
        @tf.custom_gradient
        def reverse(t):
            return tf.identity(t), lambda dy: -0.5 * plain
        return head(reverse(f))
    assert check_exercise_2.verdict(hard_coded).passed is False    # the public case's second factor refuses it too
    assert "the features receive" in refused(check_exercise_2(hard_coded, seed=3))


class _BatchesWritten(_Ramp):
    """The step as epoch * 3 + batch: 3, the public training's batches an epoch, written in."""
    def on_epoch_begin(self, epoch, logs=None):
        self.epoch = epoch

    def on_train_batch_begin(self, batch, logs=None):
        self.reversal.factor = reversal_factor((self.epoch * 3 + batch) / self.total_steps)


class _Linear(_Ramp):
    """A straight line from 0 to 1 instead of the paper's ramp."""
    def on_train_batch_begin(self, batch, logs=None):
        self.reversal.factor = self.step / self.total_steps
        self.step += 1


@pytest.mark.parametrize("seed", [None, 3])
def test_exercise_1_names_batches_written_in_and_a_linear_ramp(seed, refused):
    """Issue F11: neither gets "compute the ramp from total_steps"; each gets its own hint."""
    out = refused(check_exercise_1(_BatchesWritten, seed=seed))
    assert "The step counts 3 batches an epoch" in out and "from total_steps" not in out
    out = refused(check_exercise_1(_Linear, seed=seed))
    assert "grows by the same amount every step" in out and "from total_steps" not in out


def test_exercise_2_held_out_names_a_factor_of_0_5_written_in(refused):
    out = refused(check_exercise_2(lambda f, reversal, head: head(gradlab.reverse_gradient(f, 0.5)), seed=3))
    assert "They get -0.5 times, the first public case's factor: is 0.5 written into your code?" in out


def _ramp_with(gamma=10.0, total=None, extra=0):
    """A step counter whose ramp has another gamma, a total written in, or total_steps + extra."""
    class Ramp(_Ramp):
        def on_train_batch_begin(self, batch, logs=None):
            steps = (total or self.total_steps) + extra
            self.reversal.factor = float(2.0 / (1.0 + np.exp(-gamma * self.step / steps)) - 1.0)
            self.step += 1
    return Ramp


@pytest.mark.parametrize("gamma", [5.0, 7.0, 20.0])
def test_exercise_1_names_a_wrong_gamma_not_total_steps(gamma, refused):
    """Issue 39: γ = 5 over 6 steps is also the paper's ramp over 12; one more batch an epoch tells them apart."""
    out = refused(check_exercise_1(_ramp_with(gamma=gamma)))
    assert f"with γ ≈ {gamma:.3g}, also over 8 steps" in out and "the paper's\nramp has γ = 10" in out
    assert "total_steps" not in out and "exp(-10" not in out  # no code given


def test_exercise_1_names_a_total_written_in(refused):
    out = refused(check_exercise_1(_ramp_with(total=12)))
    assert "the ramp over 12 steps, not over the 6 of this training" in out and "total_steps, the number of" in out
    assert "γ" not in out
    assert "the ramp over 20 steps, not over the 6" in refused(check_exercise_1(_ramp_with(total=20)))


@pytest.mark.parametrize("extra, total", [(1, 7), (-1, 5)])
def test_exercise_1_names_a_total_off_by_one(extra, total, refused):
    out = refused(check_exercise_1(_ramp_with(extra=extra)))
    assert f"the ramp over {total} steps where total_steps is 6 (over {total + 2} where it is 8)" in out
    assert "divides the step by another number than total_steps" in out and "γ" not in out


def test_exercise_1_names_neither_when_gamma_and_total_are_both_off(refused):
    out = refused(check_exercise_1(_ramp_with(gamma=7.0, extra=1)))
    assert "do not fit one γ: check both γ" in out


def test_exercise_1_a_ramp_of_another_shape_gets_the_first_difference(refused):
    class Logistic(_Ramp):
        def on_train_batch_begin(self, batch, logs=None):
            self.reversal.factor = float(1.0 / (1.0 + np.exp(-10.0 * self.step / self.total_steps)))
            self.step += 1
    out = refused(check_exercise_1(Logistic))
    assert "The first difference is before step 0" in out and "γ" not in out and "total_steps" not in out
