"""Self-checks for notebook 14 (short answers: gradient accumulation, per-example clipping)."""
from __future__ import annotations

import numpy as np
import tensorflow as tf

from exercises._harness import NotYet, first_hint, running, self_check, shown
from exercises._i18n import _

__all__ = ["check_exercise_1", "check_exercise_2"]


def _linear_problem(seed: int, examples: int, features: int):
    """Inputs, targets and starting weights of a linear least-squares problem, float64 for exact comparisons."""
    rng = np.random.default_rng(seed)
    x = rng.normal(size=(examples, features))
    y = rng.normal(size=examples)
    w = rng.normal(size=features)
    return x, y, w


#: Two problems, so that an answer hard-coding one problem's numbers fails the other:
#: (seed, micro-batches, micro-batch size, features).
ACCUMULATION_CASES = ((1, 4, 2, 3), (2, 3, 3, 4))


def _accumulation_case(seed, steps, size, features):
    x, y, w0 = _linear_problem(seed, steps * size, features)
    w, b = tf.Variable(w0), tf.Variable(0.5, dtype=tf.float64)
    sizes = []

    def loss_fn(xb, yb):
        sizes.append(int(tf.shape(xb)[0]))
        return tf.reduce_mean((tf.linalg.matvec(tf.convert_to_tensor(xb), w) + b - yb) ** 2)

    micro_batches = [(tf.constant(x[i * size:(i + 1) * size]), tf.constant(y[i * size:(i + 1) * size]))
                     for i in range(steps)]

    def gradient(xs, ys):  # the mean squared error's gradient by hand, for weights w and bias b
        r = xs @ w0 + 0.5 - ys
        return [2.0 * xs.T @ r / len(ys), 2.0 * r.mean()]

    return loss_fn, [w, b], micro_batches, sizes, gradient(x, y), gradient(x[-size:], y[-size:])


def _close(got, want) -> bool:
    return all(g is not None and np.shape(g) == np.shape(v) and np.allclose(g, v, rtol=1e-9, atol=1e-12)
               for g, v in zip(got, want))


def _held_out_accumulation(seed: int) -> tuple[tuple[int, int, int, int], ...]:
    """The held-out case (the instructor edition's ``seed``): a problem, 2 to 5 micro-batches of 2 to 4
    examples and 2 to 5 features, drawn from ``seed``."""
    rng = np.random.default_rng(seed)
    return ((int(rng.integers(2**31)), int(rng.integers(2, 6)), int(rng.integers(2, 5)), int(rng.integers(2, 6))),)


@self_check
def check_exercise_1(accumulated_gradients, *, seed: int | None = None) -> str:
    """Checks ``accumulated_gradients(loss_fn, variables, micro_batches)``: the full batch's gradient.

    The full batch's loss is the mean over its micro-batches (all the same size), so the answer must
    be the mean of the micro-batch gradients, computed one micro-batch at a time: ``loss_fn`` records
    the size of every batch it is called on, and an answer that concatenates the micro-batches is
    refused (it is the memory that accumulation saves). Two problems of different sizes refuse a
    hard-coded answer. With ``seed`` (the instructor edition's held-out cases) it tries a problem
    of a size drawn from it instead.
    """
    cases = ACCUMULATION_CASES if seed is None else _held_out_accumulation(seed)
    for problem, steps, size, features in cases:
        loss_fn, variables, micro_batches, sizes, full, last = _accumulation_case(problem, steps, size, features)
        with running("accumulated_gradients(loss_fn, variables, micro_batches)"):
            got = accumulated_gradients(loss_fn, variables, micro_batches)
            got = [None if g is None else tf.convert_to_tensor(g).numpy() for g in got]
        where = _("with {steps} micro-batches of {size} examples").format(steps=steps, size=size)
        if len(got) != len(variables):
            raise NotYet(_("{where}, you return {got} gradients for {variables} variables.").format(
                where=where, got=len(got), variables=len(variables)))
        if any(g is None for g in got):
            raise NotYet(_("{where}, a gradient is None: did the tape record the loss it differentiates?").format(
                where=where))
        if max(sizes, default=0) > size:
            raise NotYet(_("{where}, loss_fn was called on {largest} examples at once: the exercise asks for one "
                           "micro-batch\nat a time (at most {size} examples per call), which is what saves "
                           "memory.").format(where=where, largest=max(sizes), size=size))
        if _close(got, full):
            continue
        hint = first_hint(
            (_close(got, [g / steps for g in last]),
             _("that is the last micro-batch's gradient divided by {steps}: each fresh tape saw only its own step.\n"
               "What can you add up across the steps instead of the losses?").format(steps=steps)),
            (_close(got, last),
             _("that is the last micro-batch's gradient alone: each fresh tape saw only its own step.\n"
               "What can you add up across the steps instead of the losses?")),
            (_close(got, [g * steps for g in full]),
             _("that is {steps} times the full batch's gradient: the full batch's loss is the mean, not the "
               "sum.").format(steps=steps)),
            otherwise=_("expected the gradient of the mean loss over all the micro-batches."))
        raise NotYet(_("{where}, the bias gets {got:.6g} where the full batch gives {full:.6g};").format(
            where=where, got=float(got[1]), full=full[1]) + f"\n{hint}")
    return _("the accumulated gradient equals the full batch's, for both problems, one micro-batch per call.")


#: (seed, examples, features, clip): two problems with different bounds, for the same reason.
CLIPPING_CASES = ((3, 6, 3, 1.0), (4, 5, 4, 0.5))


def _clipping_case(seed, examples, features, clip):
    x, y, w0 = _linear_problem(seed, examples, features)
    w = tf.Variable(w0)
    per_example = 2.0 * (x @ w0 - y)[:, None] * x                       # d/dw of (x_i . w - y_i)^2
    norms = np.linalg.norm(per_example, axis=1)
    clipped = per_example * np.minimum(1.0, clip / norms)[:, None]
    mean = per_example.mean(axis=0)
    return (lambda w: (tf.linalg.matvec(tf.constant(x), w) - y) ** 2), w, {
        "right": clipped.mean(axis=0), "average clipped": mean * min(1.0, clip / np.linalg.norm(mean)),
        "not clipped": mean, "summed": clipped.sum(axis=0),
        "clipped by value": np.clip(per_example, -clip, clip).mean(axis=0)}, norms


def _held_out_clipping(seed: int) -> tuple[tuple[int, int, int, float], ...]:
    """The held-out case (the instructor edition's ``seed``): a problem of 4 to 8 examples and 2 to 5 features,
    drawn from ``seed``, with the median of its per-example norms as the bound, so some are clipped and some not."""
    rng = np.random.default_rng(seed)
    problem, examples, features = int(rng.integers(2**31)), int(rng.integers(4, 9)), int(rng.integers(2, 6))
    norms = _clipping_case(problem, examples, features, 1.0)[3]
    return ((problem, examples, features, float(f"{np.median(norms):.3g}")),)


@self_check
def check_exercise_2(clipped_mean_gradient, *, seed: int | None = None) -> str:
    """Checks ``clipped_mean_gradient(losses_fn, w, clip)``: per-example gradients clipped to norm ``clip``, averaged.

    DP-SGD's rule: each example's gradient is clipped before the average; clipping the average, not
    clipping, summing, or clipping each entry are told apart. Two problems with different bounds
    refuse a hard-coded answer. With ``seed`` (the instructor edition's held-out cases) it tries a
    problem and a bound drawn from it instead.
    """
    cases = CLIPPING_CASES if seed is None else _held_out_clipping(seed)
    for problem, examples, features, clip in cases:
        losses_fn, w, want, norms = _clipping_case(problem, examples, features, clip)
        with running(f"clipped_mean_gradient(losses_fn, w, {clip})"):
            got = clipped_mean_gradient(losses_fn, w, clip)
            got = None if got is None else tf.convert_to_tensor(got).numpy()
        where = _("with {examples} examples and clip = {clip}").format(examples=examples, clip=clip)
        if got is None or got.shape != want["right"].shape:
            raise NotYet(_("{where}, return one gradient of w's shape {shape} (got {got}).").format(
                where=where, shape=list(want["right"].shape), got=None if got is None else list(got.shape)))
        if np.allclose(got, want["right"], rtol=1e-9, atol=1e-12):
            continue
        said = _("{where}, you return {got};").format(where=where, got=shown(got))
        hint = first_hint(
            (np.allclose(got, want["average clipped"]),
             _("that is the average gradient, clipped. DP-SGD clips each example's gradient before averaging:\n"
               "which tape method gives you one gradient per example?")),
            (np.allclose(got, want["not clipped"]), _("that is the plain average: no gradient was clipped.")),
            (np.allclose(got, want["summed"]),
             _("that is the sum of the {examples} clipped gradients: average them.").format(examples=examples)),
            (np.allclose(got, want["clipped by value"]),
             _("each entry was clipped (tf.clip_by_value): clip each example's gradient by its norm.")),
            otherwise=_("expected {expected}.").format(expected=shown(want["right"])))
        raise NotYet(f"{said}\n{hint}")
    return _("each example's gradient clipped to its bound, then averaged (before clipping, the norms went "
             "up to {largest:.1f} in the last problem).").format(largest=norms.max())
