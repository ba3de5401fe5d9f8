"""Self-checks for notebook 12 (domain-adversarial training with a gradient reversal layer)."""
from __future__ import annotations

import keras
import numpy as np
import tensorflow as tf

import gradlab.layers
from exercises._harness import NotYet, running, self_check
from papers.dann import reversal_factor

__all__ = ["check_exercise_1", "check_exercise_2"]

EPOCHS, BATCHES = 2, 3          # exercise 1 trains 2 epochs of 3 batches: 6 steps


def _factors_seen(callback_class) -> list[float]:
    """Trains a tiny model 2 epochs x 3 batches with the learner's callback; the factor before each step."""
    reversal = gradlab.layers.GradientReversal(0.0)
    model = keras.Sequential([keras.Input((2,)), keras.layers.Dense(2), reversal, keras.layers.Dense(1)])
    model.compile(optimizer=keras.optimizers.SGD(0.01), loss="mse")
    seen: list[float] = []

    class Recorder(keras.callbacks.Callback):      # runs after the learner's callback
        def on_train_batch_begin(self, batch, logs=None):
            seen.append(reversal.factor)

    callback = callback_class(reversal, EPOCHS * BATCHES)
    x, y = np.ones((4 * BATCHES, 2), np.float32), np.zeros((4 * BATCHES, 1), np.float32)
    model.fit(x, y, batch_size=4, epochs=EPOCHS, shuffle=False, verbose=0, callbacks=[callback, Recorder()])
    return seen


@self_check
def check_exercise_1(callback_class) -> str:
    """Checks a Keras callback ``RampFactor(reversal, total_steps)`` that sets ``reversal.factor`` to
    the paper's ramp ``reversal_factor(step / total_steps)`` before every step, across epochs."""
    steps = EPOCHS * BATCHES
    expected = [reversal_factor(i / steps) for i in range(steps)]
    with running("training with your callback"):
        seen = _factors_seen(callback_class)
    shown = np.array(seen).round(4)
    if np.allclose(seen, expected, atol=1e-6):
        return (f"Over {EPOCHS} epochs of {BATCHES} batches the factor before each step was\n"
                f"{shown}: the paper's ramp over all {steps} steps.")
    hint = ""
    if np.allclose(seen, seen[0]):
        hint = "\nThe factor never changed: assign reversal.factor in on_train_batch_begin."
    elif np.allclose(seen[BATCHES:], seen[:BATCHES]):
        hint = ("\nIt starts again at the second epoch: fit's `batch` argument counts the batches of\n"
                "the current epoch. Count the steps yourself (a counter in the callback).")
    raise NotYet(f"over {EPOCHS} epochs of {BATCHES} batches ({steps} steps) the factor before each step was\n"
                 f"{shown}; the ramp is\n{np.array(expected).round(4)}.{hint}")


@self_check
def check_exercise_2(domain_logits) -> str:
    """Checks ``domain_logits(features, reversal, domain_head)``: the domain head's logits, with the
    reversal between the features and the head (the head learns, the features get -factor times)."""
    keras.utils.set_random_seed(0)
    features = tf.constant(np.random.default_rng(0).normal(size=(4, 3)), tf.float32)
    domains = tf.constant([[0.0], [0.0], [1.0], [1.0]])
    domain_head = keras.layers.Dense(1)
    reversal = gradlab.layers.GradientReversal(0.5)
    bce = keras.losses.BinaryCrossentropy(from_logits=True)

    def gradients(logits_of):
        with tf.GradientTape() as tape:
            tape.watch(features)
            logits = logits_of(features)
            loss = bce(domains, logits)
        return logits, tape.gradient(loss, [features, *domain_head.trainable_weights])

    plain_logits, (g_plain, *head_plain) = gradients(domain_head)
    with running("domain_logits"):
        logits, (g_features, *head) = gradients(lambda f: domain_logits(f, reversal, domain_head))
        logits = np.asarray(logits)
    if logits.shape != tuple(plain_logits.shape) or not np.allclose(logits, plain_logits.numpy()):
        raise NotYet(f"the value should be the domain head's logits for the features,\n"
                     f"{plain_logits.numpy()[:, 0]}; got {logits.reshape(-1)}. The reversal does not change values.")
    if any(g is None for g in head) or not all(np.allclose(g, h) for g, h in zip(head, head_plain)):
        reversed_head = all(g is not None and np.allclose(g, -0.5 * h) for g, h in zip(head, head_plain))
        raise NotYet("the domain head's own weights do not get their plain gradient"
                     + (": they get it reversed,\nso the head would learn to tell the domains apart worse. Which "
                     "tensor should carry\nthe reversed gradient: the head's output, or the features?" if reversed_head else "."))
    if g_features is None or not np.any(g_features):
        raise NotYet("no gradient reaches the features. That is the source-only observer\n"
                     "(tf.stop_gradient): the encoder would not learn to hide the domain.")
    if not np.allclose(g_features, -0.5 * g_plain.numpy(), atol=1e-7):
        same = np.allclose(g_features, g_plain.numpy())
        raise NotYet(f"the features receive {np.asarray(g_features)[0]} (first row); with factor 0.5 they should\n"
                     f"receive -0.5 times the plain gradient, {-0.5 * g_plain.numpy()[0]}."
                     + ("\nThey get the plain gradient: the encoder would help the domain head." if same else ""))
    return (f"The domain head gets its plain gradient (it learns to tell the domains apart),\n"
            f"and the features get it times -0.5: {np.asarray(g_features)[0]} against {g_plain.numpy()[0]}\n"
            "(first row), so the encoder learns to hide the domain.")
