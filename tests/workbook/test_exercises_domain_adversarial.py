"""The self-checks of notebook 12 (exercises/domain_adversarial.py) accept the answers and explain mistakes."""
from __future__ import annotations

import keras
import tensorflow as tf

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


def test_exercise_1_accepts_a_step_counter(capsys):
    assert check_exercise_1(_Ramp).passed is True
    assert capsys.readouterr().out.startswith("Correct!")


def test_exercise_1_explains_the_per_epoch_batch_index_and_a_factor_never_set(capsys):
    assert check_exercise_1(_PerEpoch).passed is False
    assert "counts the batches of\nthe current epoch" in capsys.readouterr().out
    assert check_exercise_1(_Never).passed is False
    assert "never changed" in capsys.readouterr().out
    assert check_exercise_1(lambda reversal, total_steps: 1 / 0).passed is False
    assert "ZeroDivisionError" in capsys.readouterr().out


def test_exercise_2_accepts_the_reversal_between_features_and_head(capsys):
    assert check_exercise_2(lambda f, reversal, head: head(reversal(f))).passed is True
    assert capsys.readouterr().out.startswith("Correct!")


def test_exercise_2_explains_each_misplaced_or_missing_reversal(capsys):
    assert check_exercise_2(lambda f, reversal, head: reversal(head(f))).passed is False     # the starting point
    assert "they get it reversed" in capsys.readouterr().out
    assert check_exercise_2(lambda f, reversal, head: head(f)).passed is False
    assert "the encoder would help the domain head" in capsys.readouterr().out
    assert check_exercise_2(lambda f, reversal, head: head(tf.stop_gradient(f))).passed is False
    assert "source-only observer" in capsys.readouterr().out
    assert check_exercise_2(lambda f, reversal, head: 2.0 * head(reversal(f))).passed is False
    assert "should be the domain head's logits" in capsys.readouterr().out
    assert check_exercise_2(lambda f, reversal, head: head(reversal(reversal(f)))).passed is False
    assert "should\nreceive -0.5 times" in capsys.readouterr().out
    assert check_exercise_2(lambda f, reversal, head: head.missing).passed is False
    assert "AttributeError" in capsys.readouterr().out
