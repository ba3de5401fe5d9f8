"""Self-checks for notebook 09 (what each technique costs), and the NumPy quantizer exercise 2 starts from."""
from __future__ import annotations

import re

import numpy as np
import tensorflow as tf

from exercises._harness import NotYet, first_line, running, self_check

__all__ = ["check_exercise_1", "check_exercise_2", "quantize_numpy"]


def short_reason(err):
    """One line saying why a step cannot run (no machine paths)."""
    match = re.search(r"No registered '(\w+)' OpKernel for (\w+) devices", str(err))
    if match:
        return f"XLA has no kernel for the {match.group(1)} op: a Python function cannot be compiled"
    return first_line(err, limit=80)


def _fair_ratio_reference(log, technique, baseline="none"):
    by_round = {}
    for record in log:
        if record["round"] >= 1:
            by_round.setdefault(record["round"], {})[record["technique"]] = record["seconds"]
    return float(np.median([r[technique] / r[baseline] for r in by_round.values()]))


def _made_up_log(seed):
    generator = np.random.default_rng(seed)
    log = [{"round": 0, "technique": "none", "seconds": 0.9},            # warm-up: tracing + compiling
           {"round": 0, "technique": "scale", "seconds": 0.3}]
    for r in range(1, 8):
        load = 3.0 if r in (2, 5) else 1.0                               # two busy rounds
        base = 0.010 * load * generator.uniform(0.98, 1.02)
        log.append({"round": r, "technique": "none", "seconds": base})
        log.append({"round": r, "technique": "scale", "seconds": base * generator.uniform(1.01, 1.05)})
    generator.shuffle(log)
    return log


@self_check
def check_exercise_1(fair_ratio) -> str:
    """Checks fair_ratio(log, technique) on two made-up logs against the rules of section 3."""
    for seed in (1, 2):
        log = _made_up_log(seed)
        expected = _fair_ratio_reference(log, "scale")
        with running():
            answer = float(fair_ratio(log, "scale"))
        if abs(answer - expected) <= 1e-9:
            continue
        def seconds(name, warm, log=log):
            return [r["seconds"] for r in log if r["technique"] == name and (warm or r["round"] >= 1)]
        if abs(answer - np.mean(seconds("scale", True)) / np.mean(seconds("none", True))) < 1e-9 or \
                abs(answer - np.median(seconds("scale", True)) / np.median(seconds("none", True))) < 1e-9:
            raise NotYet(f"{answer:.4f} includes the warm-up (round 0), where tracing and compiling\n"
                         "dominate. Leave round 0 out.")
        elif abs(answer - np.median(seconds("scale", False)) / np.median(seconds("none", False))) < 1e-9 or \
                abs(answer - np.mean(seconds("scale", False)) / np.mean(seconds("none", False))) < 1e-9:
            raise NotYet(f"{answer:.4f} divides a summary of one technique's times by a summary of the\n"
                         "other's. Divide within each round first (same round, same load), then take the median.")
        else:
            raise NotYet(f"{answer:.4f} is not the median over rounds 1+ of the per-round ratio "
                         "scale / none.")
    return (f"The median per-round ratio is {expected:.4f}: the warm-up is out, and the two busy\n"
            "rounds, three times slower for both techniques, give ordinary ratios.")


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


@self_check
def check_exercise_2(quantize) -> str:
    """Checks that quantize(x) compiles with XLA, rounds to quarters bitwise and passes dy straight through."""
    x = tf.constant(np.linspace(-2.0, 2.0, 37, dtype=np.float32) + np.float32(0.01))
    dy = tf.constant(np.arange(1, 38, dtype=np.float32))

    def value_and_gradient(t):
        with tf.GradientTape() as tape:
            tape.watch(t)
            y = quantize(t)
        return y, tape.gradient(y, t, output_gradients=dy)

    compiled = tf.function(value_and_gradient, jit_compile=True, autograph=False)
    try:
        y, grad = compiled(x)
    except Exception as exc:  # report, never crash
        raise NotYet(f"XLA cannot compile it ({short_reason(exc)}).\n"
                     "Write the forward pass with TensorFlow ops.") from exc
    expected = np.round(x.numpy() * 4) / 4
    if not np.array_equal(y.numpy(), expected):
        raise NotYet(f"it compiles, but the values differ from np.round(4x)/4 at "
                     f"{int(np.sum(y.numpy() != expected))} of {x.shape[0]} points.")
    if grad is None or not np.array_equal(grad.numpy(), dy.numpy()):
        raise NotYet("the values are right, but the gradient is not passed straight through\n"
                     "(expected dL/dx = dL/dy). tf.round alone has no gradient.")
    return ("It compiles with XLA, rounds to quarters bitwise, and passes the gradient straight\n"
            "through. No Python in the step any more, so XLA can fuse it with its neighbours.")
