"""Self-checks for notebook 09 (what each technique costs), and the NumPy quantizer exercise 2 starts from."""
from __future__ import annotations

import re

import numpy as np
import tensorflow as tf

from exercises._harness import NotYet, first_hint, first_line, running, self_check
from exercises._i18n import _

__all__ = ["check_exercise_1", "check_exercise_2", "quantize_numpy"]


def short_reason(err):
    """One line saying why a step cannot run (no machine paths)."""
    match = re.search(r"No registered '(\w+)' OpKernel for (\w+) devices", str(err))
    if match:
        return _("XLA has no kernel for the {op} op: a Python function cannot be compiled").format(op=match.group(1))
    return first_line(err, limit=80)


def _per_round_ratios(log, technique, warm=False) -> list:
    """seconds(technique) / seconds(none) in each round (round 0, the warm-up, only if ``warm``)."""
    by_round = {}
    for record in log:
        if warm or record["round"] >= 1:
            by_round.setdefault(record["round"], {})[record["technique"]] = record["seconds"]
    return [r[technique] / r["none"] for r in by_round.values()]


def _fair_ratio_reference(log, technique):
    return float(np.median(_per_round_ratios(log, technique)))


def _made_up_log(seed, technique="scale"):
    generator = np.random.default_rng(seed)
    log = [{"round": 0, "technique": "none", "seconds": 0.9},            # warm-up: tracing + compiling
           {"round": 0, "technique": technique, "seconds": 0.3}]
    for r in range(1, 8):
        load = 3.0 if r in (2, 5) else 1.0                               # two busy rounds
        base = 0.010 * load * generator.uniform(0.98, 1.02)
        log.append({"round": r, "technique": "none", "seconds": base})
        log.append({"round": r, "technique": technique, "seconds": base * generator.uniform(1.01, 1.05)})
    generator.shuffle(log)
    return log


def _summaries(log, technique) -> list:
    """What the typical mistakes compute, each with its hint (the right answer is not among them)."""
    def seconds(name, warm):
        return [r["seconds"] for r in log if r["technique"] == name and (warm or r["round"] >= 1)]

    warm_up = _("it includes the warm-up (round 0), where tracing and compiling dominate. Leave round 0 out.")
    unpaired = _("it divides a summary of one technique's times by a summary of the other's.\n"
                 "Divide within each round first (same round, same load), then take the median.")
    return [
        (np.mean(seconds(technique, True)) / np.mean(seconds("none", True)), warm_up),
        (np.median(seconds(technique, True)) / np.median(seconds("none", True)), warm_up),
        (float(np.median(_per_round_ratios(log, technique, True))), warm_up),
        (float(np.mean(_per_round_ratios(log, technique, True))), warm_up),
        (np.median(seconds(technique, False)) / np.median(seconds("none", False)), unpaired),
        (np.mean(seconds(technique, False)) / np.mean(seconds("none", False)), unpaired),
        (float(np.mean(_per_round_ratios(log, technique))), _("that is the mean of the per-round ratios: take their "
                                                               "median, which one disturbed round\ncannot move.")),
        (1.0 / _fair_ratio_reference(log, technique), _("that is none / technique: the ratio is upside down.")),
    ]


#: The techniques a held-out log may name.
_TECHNIQUES = ("scale", "clip", "surrogate", "straight_through", "guided", "custom")


@self_check
def check_exercise_1(fair_ratio, *, seed: int | None = None) -> str:
    """Checks fair_ratio(log, technique) on two made-up logs against the rules of section 3.

    The second log names its technique "clip", so an answer must use its ``technique`` argument.
    With ``seed`` (the instructor edition's held-out cases) it tries two other logs drawn from it,
    of two techniques drawn from it.
    """
    logs = ((1, "scale"), (2, "clip"))
    if seed is not None:
        logs = tuple(((seed, k), str(name)) for k, name in enumerate(np.random.default_rng(seed).choice(
            _TECHNIQUES, 2, replace=False)))
    for draw, technique in logs:
        log = _made_up_log(draw, technique)
        expected = _fair_ratio_reference(log, technique)
        with running(f'fair_ratio(log, "{technique}")',
                     hint=_('\n(This log\'s technique is "{technique}": does your function use its technique '
                            'argument?)').format(technique=technique) if technique != "scale" else ""):
            answer = fair_ratio(log, technique)
        if answer is None:
            raise NotYet(_('fair_ratio(log, "{technique}") returned None: return the ratio, a number.').format(
                technique=technique))
        try:
            answer = float(answer)
        except (TypeError, ValueError):
            raise NotYet(_('fair_ratio(log, "{technique}") should return one number; it returned '
                           "{type} {answer!r}.").format(technique=technique, type=type(answer).__name__,
                                                        answer=answer)) from None
        if abs(answer - expected) <= 1e-9:
            continue
        hint = first_hint(*((abs(answer - value) < 1e-9, text) for value, text in _summaries(log, technique)),
                          otherwise=_("take the median, over rounds 1 and later, of seconds({technique}) / "
                                      "seconds(none) in the same round.").format(technique=technique))
        raise NotYet(_('fair_ratio(log, "{technique}") is {answer:.4f}; the median over rounds 1+ of the '
                       "per-round ratio\n{technique} / none is {expected:.4f}.\nHint: {hint}").format(
                           technique=technique, answer=answer, expected=expected, hint=hint))
    return _("The median per-round ratio is {expected:.4f}: the warm-up is out, and the two busy\n"
             "rounds, three times slower for both techniques, give ordinary ratios.").format(expected=expected)


def quantize_numpy(x):
    """Rounds to quarters in NumPy, with a straight-through gradient. Cannot be compiled by XLA."""
    @tf.custom_gradient
    def quantize(t):
        y = tf.numpy_function(lambda a: (np.round(a * 4) / 4).astype(a.dtype), [t], t.dtype, stateful=False)
        y.set_shape(t.shape)
        def grad(dy):
            return dy
        return y, grad
    return quantize(x)


#: Points where 4x is a half (0.5, 1.5, -0.5, -2.5): np.round and tf.round round them to even.
_HALVES = np.array([0.125, 0.375, -0.125, -0.625], np.float32)


#: The second case's halves of a quarter (4x = 2.5, -1.5, 4.5, -7.5), among other seeded points.
_OTHER_HALVES = np.array([0.625, -0.375, 1.125, -1.875], np.float32)


def _check_exercise_2_case(compiled, x, dy, other: str) -> None:
    """One case of :func:`check_exercise_2`; ``other`` starts the second case's messages."""
    try:
        y, grad = compiled(x, dy)
    except Exception as exc:  # report, never crash
        raise NotYet(_("{other}XLA cannot compile it:\n{reason}.\n"
                       "Write the forward pass with TensorFlow ops.").format(other=other, reason=short_reason(exc))) from exc
    xs = x.numpy()
    expected = np.round(xs * 4) / 4
    fixed = _("\nThe first points passed: does quantize compute from the x (and the dy) it receives, or "
              "return\nnumbers fixed in advance?")
    if y is None or y.shape != x.shape:
        raise NotYet(_("{other}quantize(x) should have the shape of x, {shape}; it has {got}.").format(
            other=other, shape=tuple(x.shape), got=None if y is None else tuple(y.shape)))
    wrong = np.flatnonzero(y.numpy() != expected)
    if wrong.size:
        i = wrong[0]
        half = _(" (4x is a half: np.round rounds it to even)") if (xs[i] * 4) % 1 == 0.5 else ""
        raise NotYet(_("{other}it compiles, but the values differ from np.round(4x)/4 at {wrong} of "
                       "{total} points:\nat x = {x:g}{half} you return {got:g}, expected {want:g}.").format(
                           other=other, wrong=wrong.size, total=x.shape[0], x=xs[i], half=half, got=y.numpy()[i],
                           want=expected[i]) + (fixed if other else ""))
    if grad is None:
        raise NotYet(_("{other}the values are right, but no gradient reaches x (expected dL/dx = dL/dy):\n"
                       "tf.round alone has no gradient. Pass the gradient straight through.").format(other=other))
    got, want = grad.numpy(), dy.numpy()
    if got.shape != want.shape or not np.array_equal(got, want):
        if got.shape != want.shape:
            raise NotYet(_("{other}x has shape {shape}, but it receives a gradient of shape {got}.").format(
                other=other, shape=tuple(x.shape), got=got.shape))
        if np.allclose(got, 1.0):
            hint = _(" Your gradient is 1 everywhere: does it pass dy on, or ignore it?")
        elif np.allclose(got, 0.0):
            hint = _(" The gradient is zero: tf.round's own. Pass the gradient straight through.")
        else:
            hint = fixed if other else ""
        raise NotYet(_("{other}the values are right, but the gradient is not passed straight through: for "
                       "upstream\ndy = {dy}... x receives {got}... (expected dL/dx = dL/dy).").format(
                           other=other, dy=want[:4], got=got[:4]) + hint)


def _held_out_points(seed: int) -> tuple[np.ndarray, np.ndarray]:
    """The held-out cases (the instructor edition's ``seed``): 34 to 40 points, four of them halves of a quarter
    (two that round down to even, where ``floor(4x + 0.5)`` rounds up), and an upstream gradient, drawn from ``seed``."""
    rng = np.random.default_rng(seed)
    halves = (np.concatenate([rng.choice(np.arange(-10, 10, 2), 2, replace=False),
                              rng.choice(np.arange(-9, 10, 2), 2, replace=False)]) + 0.5) / 4
    points = rng.permutation(np.concatenate([rng.uniform(-2.5, 2.5, int(rng.integers(30, 37))), halves]))
    return points.astype(np.float32), np.round(rng.uniform(-3.0, 3.0, points.size), 1).astype(np.float32)


@self_check
def check_exercise_2(quantize, *, seed: int | None = None) -> str:
    """Checks that quantize(x) compiles with XLA, rounds to quarters bitwise and passes dy straight through.

    XLA compiling the step is the evidence that no Python runs in it. The points include halves of
    a quarter, which round to even (``tf.round``; ``floor(4x + 0.5)`` rounds them up). A second
    case, other (seeded) points and upstream gradients, refuses an answer that returns the first
    case's numbers. With ``seed`` (the instructor edition's held-out cases) it tries points (halves of
    a quarter among them) and upstream gradients drawn from it instead.
    """
    def value_and_gradient(t, dy):
        with tf.GradientTape() as tape:
            tape.watch(t)
            y = quantize(t)
        return y, tape.gradient(y, t, output_gradients=dy)

    compiled = tf.function(value_and_gradient, jit_compile=True, autograph=False)
    if seed is not None:
        points, upstream = _held_out_points(seed)
        _check_exercise_2_case(compiled, tf.constant(points), tf.constant(upstream), "")
        return _("It compiles with XLA, rounds to quarters bitwise, and passes the gradient straight\n"
                 "through. No Python in the step any more, so XLA can fuse it with its neighbours.")
    x = tf.constant(np.concatenate([np.linspace(-2.0, 2.0, 37, dtype=np.float32) + np.float32(0.01), _HALVES]))
    _check_exercise_2_case(compiled, x, tf.constant(np.arange(1, x.shape[0] + 1, dtype=np.float32)), "")
    rng = np.random.default_rng(4)                                         # copied numbers fail here
    points = rng.permutation(np.concatenate([rng.uniform(-2.5, 2.5, 37).astype(np.float32), _OTHER_HALVES]))
    _check_exercise_2_case(compiled, tf.constant(points),
                           tf.constant(np.round(rng.uniform(-3.0, 3.0, points.size), 1).astype(np.float32)),
                           _("on other points, "))
    return _("It compiles with XLA, rounds to quarters bitwise, and passes the gradient straight\n"
             "through. No Python in the step any more, so XLA can fuse it with its neighbours.")
