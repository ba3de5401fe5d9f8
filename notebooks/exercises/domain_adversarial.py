"""Self-checks for notebook 12 (domain-adversarial training with a gradient reversal layer)."""
from __future__ import annotations

import keras
import numpy as np
import tensorflow as tf

import gradlab.layers
from exercises._harness import NotYet, running, self_check
from exercises._i18n import _
from papers.dann import reversal_factor

__all__ = ["check_exercise_1", "check_exercise_2"]

EPOCHS, BATCHES = 2, 3          # exercise 1 trains 2 epochs of 3 batches: 6 steps
#: Then 2 epochs of 4 batches: another ramp, so factors copied from a message fail.
OTHER_EPOCHS, OTHER_BATCHES = 2, 4


def _factors_seen(callback_class, epochs: int = EPOCHS, batches: int = BATCHES) -> list[float]:
    """Trains a tiny model ``epochs`` x ``batches`` with the learner's callback; the factor before each step."""
    reversal = gradlab.layers.GradientReversal(0.0)
    model = keras.Sequential([keras.Input((2,)), keras.layers.Dense(2), reversal, keras.layers.Dense(1)])
    model.compile(optimizer=keras.optimizers.SGD(0.01), loss="mse")
    seen: list[float] = []

    class Recorder(keras.callbacks.Callback):      # runs after the learner's callback
        def on_train_batch_begin(self, batch, logs=None):
            seen.append(reversal.factor)

    callback = callback_class(reversal, epochs * batches)
    x, y = np.ones((4 * batches, 2), np.float32), np.zeros((4 * batches, 1), np.float32)
    model.fit(x, y, batch_size=4, epochs=epochs, shuffle=False, verbose=0, callbacks=[callback, Recorder()])
    return seen


def _counts_with(seen, epochs: int, steps: int, batches: int) -> int | None:
    """The number of batches an epoch the factors were computed with, when not ``batches``
    (``epoch * k + batch``, with ``k`` written in), else None."""
    for k in range(1, 3 * batches + 1):
        if (epochs - 1) * k + batches - 1 > steps:  # beyond the end of the ramp
            break
        ramp = [reversal_factor((e * k + b) / steps) for e in range(epochs) for b in range(batches)]
        if k != batches and np.allclose(seen, ramp, atol=1e-6):
            return k
    return None


def _ramp_over(seen, steps: int) -> int | None:
    """The number of steps ``seen`` starts the ramp over, when not ``steps`` (a total written in), else None."""
    for total in range(2, 4 * steps):
        n = min(total, len(seen))
        if total != steps and np.allclose(seen[:n], [reversal_factor(i / total) for i in range(n)], atol=1e-6):
            return total
    return None


def _fitted_gamma(seen, steps: int) -> float | None:
    """The gamma of ``2 / (1 + exp(-gamma p)) - 1``, p = i / steps, that fits ``seen``, if one does, else None.

    Each value gives one, ``2 atanh(factor) / p``; a fit is a gamma for which the whole ramp matches.
    """
    values = np.asarray(seen, np.float64)
    if len(values) < 3 or not np.isclose(values[0], 0.0, atol=1e-6):
        return None
    usable = [i for i in range(1, len(values)) if 1e-4 < values[i] < 1.0 - 1e-4]
    if not usable:
        return None
    gamma = float(np.median([2.0 * np.arctanh(values[i]) * steps / i for i in usable]))
    ramp = [2.0 / (1.0 + np.exp(-gamma * i / steps)) - 1.0 for i in range(len(values))]
    return gamma if gamma > 0 and np.allclose(values, ramp, atol=1e-5) else None


def _gamma_or_progress(callback_class, seen, epochs: int, batches: int) -> str:
    """The hint for a ramp of the paper's shape with another gamma, or another total (``p`` wrong).

    A learner's gamma stays the same when the training is longer; a total written into the
    callback, or total_steps off by a few steps, gives another gamma: one more training, one more
    step an epoch, tells them apart.
    """
    steps = epochs * batches
    gamma = _fitted_gamma(seen, steps)
    total = 10.0 * steps / gamma                     # the paper's gamma over this many steps fits too
    other_steps = epochs * (batches + 1)
    try:
        more = _factors_seen(callback_class, epochs, batches + 1)
    except Exception:  # noqa: BLE001  (a total written in may run past p = 1 there: no second fit)
        more = []
    other = _fitted_gamma(more, other_steps) if len(more) == other_steps else None
    if other is not None and np.isclose(other, gamma, rtol=1e-3):
        return _("\nThese values fit the ramp 2/(1 + exp(-γ·p)) - 1 with γ ≈ {gamma:.3g}, also over "
                 "{other_steps} steps; the paper's\nramp has γ = 10. Where does your γ come from?").format(
                     gamma=gamma, other_steps=other_steps)
    other_total = None if other is None else 10.0 * other_steps / other
    written_in = not more or (other_total is not None and np.isclose(total, other_total, atol=1e-3))
    if written_in and np.isclose(total, round(total), atol=1e-3):
        return _("\nThat is the ramp over {total} steps, not over the {steps} of this training: does your "
                 "callback compute\nit from total_steps, the number of steps it is given?").format(
                     total=round(total), steps=steps)
    if (other_total is not None and np.isclose(total, round(total), atol=1e-3)
            and np.isclose(other_total - other_steps, round(total) - steps, atol=1e-3)):
        return _("\nThat is the ramp over {total} steps where total_steps is {steps} (over "
                 "{other_total} where it is {other_steps}):\nyour p divides the step by another number "
                 "than total_steps.").format(total=round(total), steps=steps, other_total=round(other_total),
                                             other_steps=other_steps)
    return _("\nThese values fit the ramp 2/(1 + exp(-γ·p)) - 1 with γ ≈ {gamma:.3g}, but with one more batch an "
             "epoch\nthey do not fit one γ: check both γ (the paper's is 10) and p = step / total_steps.").format(
                 gamma=gamma)


def _check_ramp(callback_class, epochs: int, batches: int) -> list[float]:
    steps = epochs * batches
    expected = [reversal_factor(i / steps) for i in range(steps)]
    with running(_("training with your callback")):
        seen = _factors_seen(callback_class, epochs, batches)
    if len(seen) == steps and np.allclose(seen, expected, atol=1e-6):
        return seen
    shown = np.array(seen).round(4)
    hint = ""
    if len(seen) != steps:
        hint = _("\nThe callback saw {seen} steps, not {steps}: did fit run with your callback?").format(
            seen=len(seen), steps=steps)
    elif np.allclose(seen, seen[0]):
        hint = _("\nThe factor never changed: assign reversal.factor in on_train_batch_begin.")
    elif all(np.allclose(seen[e * batches:(e + 1) * batches], seen[:batches]) for e in range(1, epochs)):
        hint = _("\nIt starts again at the second epoch: fit's `batch` argument counts the batches of\n"
                 "the current epoch. Where can the callback get a step number that keeps counting across epochs?")
    elif np.allclose(seen[1:], expected[:-1]):
        hint = _("\nEach value comes one step late: set the factor before the step (on_train_batch_begin), "
                 "from the\nstep about to run.")
    elif np.allclose(seen, [reversal_factor((i + 1) / steps) for i in range(steps)]):
        hint = _("\nEach value is one step early: the first step runs at p = 0 / total_steps; count from 0.")
    elif all(np.allclose(seen[e * batches:(e + 1) * batches], seen[e * batches]) for e in range(epochs)):
        hint = _("\nIt changes only once an epoch: set it before every step (on_train_batch_begin).")
    elif _counts_with(seen, epochs, steps, batches) is not None:
        hint = _("\nThe step counts {counted} batches an epoch; this training has {batches}: is a number of\n"
                 "batches written into your callback?").format(counted=_counts_with(seen, epochs, steps, batches),
                                                              batches=batches)
    elif _fitted_gamma(seen, steps) is not None:
        hint = _gamma_or_progress(callback_class, seen, epochs, batches)
    elif _ramp_over(seen, steps) is not None:
        hint = _("\nThat is the ramp over {total} steps: does your callback compute it from "
                 "total_steps, the number of\nsteps it is given?").format(total=_ramp_over(seen, steps))
    elif len(seen) > 2 and np.allclose(np.diff(seen), seen[1] - seen[0], atol=1e-6):
        hint = _("\nThe factor grows by the same amount every step: the paper's ramp, reversal_factor(p), is not "
                 "a line.")
    else:
        first = int(np.argmax(~np.isclose(seen, expected, atol=1e-6)))
        hint = _("\nThe first difference is before step {first} (counting from 0).").format(first=first)
    raise NotYet(_("over {epochs} epochs of {batches} batches ({steps} steps) the factor before each step was\n"
                   "{seen}; the ramp is\n{ramp}.").format(epochs=epochs, batches=batches, steps=steps, seen=shown,
                                                         ramp=np.array(expected).round(4)) + hint)


@self_check
def check_exercise_1(callback_class, *, seed: int | None = None) -> str:
    """Checks a Keras callback ``RampFactor(reversal, total_steps)`` that sets ``reversal.factor`` to
    the paper's ramp ``reversal_factor(step / total_steps)`` before every step, across epochs
    (2 epochs of 3 batches, then 2 of 4). With ``seed`` (the instructor edition's held-out cases) it
    trains 2 or 3 epochs of 2 to 6 batches drawn from it instead (not 6 or 8 steps, the public ones)."""
    if seed is not None:
        rng = np.random.default_rng(seed)
        shapes = [(e, b) for e in (2, 3) for b in range(2, 7) if e * b not in (6, 8)]
        epochs, batches = shapes[int(rng.integers(len(shapes)))]
        _check_ramp(callback_class, epochs, batches)
        return _("Over {epochs} epochs of {batches} batches the factor followed the paper's ramp before each "
                 "step.").format(epochs=epochs, batches=batches)
    seen = _check_ramp(callback_class, EPOCHS, BATCHES)
    _check_ramp(callback_class, OTHER_EPOCHS, OTHER_BATCHES)
    return _("Over {epochs} epochs of {batches} batches the factor before each step was\n"
             "{seen}: the paper's ramp over all {steps} steps (and over {other} steps too).").format(
                 epochs=EPOCHS, batches=BATCHES, seen=np.array(seen).round(4), steps=EPOCHS * BATCHES,
                 other=OTHER_EPOCHS * OTHER_BATCHES)


def _first(values) -> str:
    return str(np.round(np.asarray(values, np.float64).reshape(-1)[:3], 4) + 0.0)


def _check_traced(domain_logits, reversal, domain_head, gradients, factors, seed: int) -> None:
    """In a ``tf.function`` traced once, on other features (drawn from ``seed``): a change of
    ``reversal.factor`` between two calls (``factors``) must change the features' gradient, without
    tracing again (as in a training step)."""
    features = tf.constant(np.random.default_rng(seed).normal(size=(4, 3)), tf.float32)
    _logits, (plain, *_head) = gradients(domain_head, features)
    step = tf.function(lambda f: gradients(lambda t: domain_logits(t, reversal, domain_head), f)[1][0])
    for factor in factors:
        reversal.factor = factor
        with running(_("inside a tf.function, with reversal.factor {factor}, domain_logits").format(factor=factor)):
            got = step(features)
        if got is None or not np.allclose(got, -factor * plain.numpy(), atol=1e-7):
            frozen = got is not None and np.allclose(got, -factors[0] * plain.numpy(), atol=1e-7)
            raise NotYet(_("inside a tf.function, after reversal.factor changed to {factor}, the features receive\n"
                           "{got} (first entries);\nexpected -{factor} times the plain gradient, {expected}.").format(
                               factor=factor, got=_first(got) if got is not None else None,
                               expected=_first(-factor * plain.numpy())) + (
                             _("\nThe factor was read once, as a Python number, while tracing (notebook 11, §3.1):\n"
                               "call the layer, reversal(features), which reads its factor at every call, rather "
                               "than\npassing reversal.factor.") if frozen else ""))
    if step.experimental_get_tracing_count() > 1:
        raise NotYet(_("the gradient follows reversal.factor, but your function was traced "
                       "{traces} times inside one tf.function: the layer's "
                       "factor is a variable,\nread at every call without tracing again.").format(
                           traces=step.experimental_get_tracing_count()))


@self_check
def check_exercise_2(domain_logits, *, seed: int | None = None) -> str:
    """Checks ``domain_logits(features, reversal, domain_head)``: the domain head's logits, with the
    reversal between the features and the head (the head learns, the features get -factor times).

    It runs with the layer's factor at 0.5, then at 1.5: a reversal written by hand with a fixed
    factor, instead of the ``reversal`` layer passed in (whose factor the ramp changes), is refused.
    Then inside one ``tf.function``, on other features, the factor changes between two calls: a
    reversal that reads ``reversal.factor`` (a Python float, frozen at trace time) is refused. With
    ``seed`` (the instructor edition's held-out cases) the features, the head's weights and the two
    factors are drawn from it instead.
    """
    rng = np.random.default_rng(seed)
    factors = (0.5, 1.5) if seed is None else (float(rng.integers(1, 4)) / 4, float(rng.integers(5, 9)) / 4)
    keras.utils.set_random_seed(0 if seed is None else seed)
    features = tf.constant(np.random.default_rng(0 if seed is None else seed).normal(size=(4, 3)), tf.float32)
    domains = tf.constant([[0.0], [0.0], [1.0], [1.0]])
    domain_head = keras.layers.Dense(1)
    reversal = gradlab.layers.GradientReversal(factors[0])
    bce = keras.losses.BinaryCrossentropy(from_logits=True)

    def gradients(logits_of, features=features):
        with tf.GradientTape() as tape:
            tape.watch(features)
            logits = logits_of(features)
            loss = bce(domains, logits)
        return logits, tape.gradient(loss, [features, *domain_head.trainable_weights])

    plain_logits, (g_plain, *head_plain) = gradients(domain_head)
    for factor in factors:
        reversal.factor = factor
        setting = "" if factor == factors[0] else _("with reversal.factor set to {factor}, ").format(factor=factor)
        with running(f"{setting}domain_logits"):
            logits, (g_features, *head) = gradients(lambda f: domain_logits(f, reversal, domain_head))
            logits = np.asarray(logits)
        if logits.shape != tuple(plain_logits.shape) or not np.allclose(logits, plain_logits.numpy()):
            raise NotYet(_("{setting}the value should be the domain head's logits for the features,\n"
                           "{expected}; got {got}. The reversal does not change values.").format(
                               setting=setting, expected=plain_logits.numpy()[:, 0], got=logits.reshape(-1)))
        if any(g is None for g in head) or not all(np.allclose(g, h) for g, h in zip(head, head_plain)):
            said = dict(setting=setting, got="None" if head[0] is None else _first(head[0]),
                        plain=_first(head_plain[0]))
            reversed_head = all(g is not None and np.allclose(g, -factor * h) for g, h in zip(head, head_plain))
            raise NotYet((_("{setting}the domain head's kernel receives {got} (first entries);\nits plain gradient is "
                            "{plain}:\nit gets it reversed, so the head would learn to tell the domains apart worse. "
                            "Which tensor\nshould carry the reversed gradient: the head's output, or the features?")
                          if reversed_head else
                          _("{setting}the domain head's kernel receives {got} (first entries);\nits plain gradient is "
                            "{plain}.\nThe head's own weights must get their plain gradient.")).format(**said))
        if g_features is None or not np.any(g_features):
            raise NotYet(_("{setting}no gradient reaches the features. That is the source-only observer\n"
                           "(tf.stop_gradient): the encoder would not learn to hide the domain.").format(setting=setting))
        if not np.allclose(g_features, -factor * g_plain.numpy(), atol=1e-7):
            ratio = float(np.sum(np.asarray(g_features) * g_plain.numpy()) / np.sum(g_plain.numpy() ** 2))
            if np.allclose(g_features, g_plain.numpy()):
                hint = _("\nThey get the plain gradient: the encoder would help the domain head.")
            elif setting and np.allclose(g_features, -factors[0] * g_plain.numpy(), atol=1e-7):
                hint = _("\nThey get -{first} times, as with factor {first}: call the reversal layer passed "
                         "in, reversal(features),\nwhose factor the ramp changes during training, not a reversal of "
                         "your own.").format(first=factors[0])
            elif factor != 0.5 and np.allclose(g_features, -0.5 * g_plain.numpy(), atol=1e-7):
                hint = _("\nThey get -0.5 times, the first public case's factor: is 0.5 written into your code? Call "
                         "the reversal\nlayer passed in, reversal(features), whose factor the ramp changes.")
            else:
                hint = _("\nThey get {ratio:.2f} times the plain gradient.").format(ratio=ratio)
            raise NotYet(_("{setting}the features receive {got} (first row);\nthey should "
                           "receive -{factor} times the plain gradient, {expected}.").format(
                               setting=setting, got=np.asarray(g_features)[0], factor=factor,
                               expected=-factor * g_plain.numpy()[0]) + hint)
    _check_traced(domain_logits, reversal, domain_head, gradients, factors, 1 if seed is None else seed + 1)
    return _("The domain head gets its plain gradient (it learns to tell the domains apart),\n"
             "and the features get it times -factor ({first}, then {second}): {got} against\n"
             "{plain} (first row), so the encoder learns to hide the domain.").format(
                 first=factors[0], second=factors[1], got=np.asarray(g_features)[0], plain=g_plain.numpy()[0])
