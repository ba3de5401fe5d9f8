"""Self-checks for notebook 08 (second derivatives and forward mode)."""
from __future__ import annotations

import numpy as np
import tensorflow as tf

import gradlab

from exercises._harness import NotYet, first_line, running, self_check

__all__ = ["check_exercise_1", "check_exercise_2"]


def _second_derivative(fn, x: tf.Tensor) -> float:
    """f''(x) of a scalar fn by two nested tapes (reverse over reverse)."""
    with tf.GradientTape() as outer:
        outer.watch(x)
        with tf.GradientTape() as inner:
            inner.watch(x)
            y = fn(x)
        first = inner.gradient(y, x)
    return float(outer.gradient(first, x))


@self_check
def check_exercise_1(on_input, on_output) -> str:
    """Checks predictions of d²y/dx² at x = 1.5 for ``scale_gradient(x, 3) ** 2`` and ``scale_gradient(x ** 2, 3)``.

    On the input the factor 3 is applied at both backward passes (3 · 3 · 2 = 18); on the output it
    multiplies the constant starting gradient once (3 · 2 = 6).
    """
    if on_input is None or on_output is None:
        raise NotYet("replace both None with your predictions (numbers).")
    try:
        on_input, on_output = float(on_input), float(on_output)
    except (TypeError, ValueError):
        raise NotYet("both answers should be numbers.") from None
    x = tf.constant(1.5)
    truth_in = _second_derivative(lambda s: gradlab.scale_gradient(s, 3.0) ** 2, x)
    truth_out = _second_derivative(lambda s: gradlab.scale_gradient(s ** 2, 3.0), x)
    if np.isclose(on_input, truth_in) and np.isclose(on_output, truth_out):
        return (f"{truth_in:.1f} on the input (3 * 3 * 2: the second differentiation passes the op again)\n"
                f"and {truth_out:.1f} on the output (3 * 2: it multiplies the constant starting gradient once).")
    if np.isclose(on_input, truth_out) and np.isclose(on_output, truth_in):
        raise NotYet("you swapped them. Which placement does the second differentiation pass through?")
    elif np.isclose(on_input, truth_out):
        raise NotYet("(on the input): the first derivative 3 * 2s depends on x through s, the op's output.\n"
                     "Differentiating it again goes back through the op. What does the op do on the way?")
    else:
        raise NotYet("f(x) = x^2 has f'' = 2. Count how many times the factor 3 is applied in each case.")


def _detached(rule):
    """An identity whose value carries no tangent and whose backward pass sends ``rule(dy)``."""
    @tf.custom_gradient
    def op(t):
        return tf.stop_gradient(t), rule
    return op


@self_check
def check_exercise_2(jvp_by_transposing) -> str:
    """Checks ``jvp_by_transposing(fn, x, u)`` against the transpose of reverse mode on three functions.

    The right answer differentiates the VJP ``J^T w`` with respect to a watched ``w`` (with
    ``output_gradients=u``), which gives ``J u`` for every rule linear in ``dy``.
    """
    x = tf.constant([0.3, -0.6, 1.2])
    u = tf.constant([1.0, 2.0, 3.0])
    cases = {
        "tf.sin": (tf.sin, np.cos(x.numpy()) * u.numpy()),
        "scale_gradient(x, 5)": (lambda t: gradlab.scale_gradient(t, 5.0), 5.0 * u.numpy()),
        "surrogate_step(x)": (gradlab.surrogate_step, np.maximum(0.0, 1.0 - np.abs(x.numpy())) * u.numpy()),
    }
    for name, (fn, expected) in cases.items():
        with running(f"on {name} your function"):
            result = jvp_by_transposing(fn, x, u)
            result = None if result is None else np.asarray(result, np.float64)
        if result is None:
            raise NotYet(f"on {name} your function returned None. Did the outer tape watch w?")
        if result.shape != expected.shape or not np.allclose(result, expected, rtol=1e-5, atol=1e-6):
            raise NotYet(f"on {name} you get {result}, the transpose of reverse mode is {expected}.")
    source_rule = _detached(lambda dy: tf.maximum(0.0, 1.0 - tf.abs(x)))    # answer 6: ignores dy
    try:
        transposed = jvp_by_transposing(source_rule, x, u)
    except Exception as error:  # the answer passed the real cases; this one is only shown
        transposed = first_line(error)
    return ("Transposing the VJP by hand gives a JVP that respects every linear rule, including\n"
            "scale_gradient, which tf.autodiff.ForwardAccumulator ignores (section 7).\n"
            f"The source's non_differentiable rule (ignores dy), transposed: {transposed}")
