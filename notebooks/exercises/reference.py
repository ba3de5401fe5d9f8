"""Self-checks for notebook 11 (appendix: reference)."""
from __future__ import annotations

import numpy as np
import tensorflow as tf

from exercises._harness import NotYet, running, self_check

__all__ = ["check_exercise_1", "check_exercise_2"]

_X = tf.constant([-2.0, -0.5, 0.0, 0.25, 1.5])
_DY = tf.constant([3.0, -2.0, 0.5, 4.0, 1.0])


def _run(binarize, compiled: bool):
    def value_and_gradient(x, dy):
        with tf.GradientTape() as tape:
            tape.watch(x)
            y = binarize(x)
        return y, tape.gradient(y, x, output_gradients=dy)

    fn = tf.function(value_and_gradient) if compiled else value_and_gradient
    return fn(_X, _DY)


@self_check
def check_exercise_1(binarize) -> str:
    """Checks that ``binarize`` has the value sign(x) and sends ``dy`` back where |x| <= 1.

    Tested eagerly and inside ``tf.function`` under an upstream gradient that is not 1, so that a
    ``grad`` that forgets ``dy`` and a call by keyword (which bypasses ``tf.custom_gradient``
    eagerly and raises inside ``tf.function``) are both caught.
    """
    expected_y = np.sign(_X.numpy())
    expected_grad = _DY.numpy() * (np.abs(_X.numpy()) <= 1.0)
    for mode, compiled in (("eagerly", False), ("inside tf.function", True)):
        try:
            with running(f"{mode}, binarize"):
                y, grad = _run(binarize, compiled)
        except NotYet as not_yet:
            if "keyword" not in str(not_yet.__cause__).lower():
                raise
            raise NotYet(f"{not_yet} Calling a tf.custom_gradient function with a keyword argument raises "
                         "inside tf.function: pass tensors positionally.") from None
        if y is None or not np.array_equal(np.asarray(y), expected_y):
            raise NotYet(f"{mode}, the value should be sign(x) = {expected_y}; got {None if y is None else np.asarray(y)}.")
        if grad is None:
            raise NotYet(f"{mode}, no gradient reaches x (tape.gradient returned None).")
        grad = np.asarray(grad)
        if np.array_equal(grad, np.ones_like(grad) * (grad != 0)) or np.allclose(grad, 0.0):
            raise NotYet(f"{mode}, the gradient is {grad}, but should be dy where |x| <= 1, that is "
                         f"{expected_grad}. The upstream gradient must flow through: is the custom gradient used, "
                         "and does grad multiply by dy?")
        if not np.allclose(grad, expected_grad):
            raise NotYet(f"{mode}, the gradient is {grad}; expected dy where |x| <= 1: {expected_grad}. "
                         "Does grad multiply by dy?")
    return (f"sign(x) forward, and dy passes where |x| <= 1 ({expected_grad}), eagerly and in tf.function.")


@self_check
def check_exercise_2(make_step) -> str:
    """Checks that ``make_step(5.0)`` returns ``(step, set_factor)`` whose factor stays live.

    ``step(t)`` must return the gradient of ``scale_gradient(t, factor)``; after ``set_factor(0.5)``
    the next call must use 0.5, without tracing ``step`` again.
    """
    with running("make_step"):
        step, set_factor = make_step(5.0)
        x = tf.constant(2.0)
        before = float(step(x))
        set_factor(0.5)
        after = float(step(x))
    if before != 5.0:
        raise NotYet(f"with factor 5 the gradient should be 5.0; got {before}.")
    if after == 5.0:
        raise NotYet("after set_factor(0.5) the gradient is still 5.0. The tf.function read the Python "
                     "number once, while tracing. Keep the factor in a tf.Variable and assign to it.")
    if after != 0.5:
        raise NotYet(f"after set_factor(0.5) the gradient should be 0.5; got {after}.")
    traces = getattr(step, "experimental_get_tracing_count", lambda: 1)()
    if traces > 1:
        raise NotYet(f"the gradient follows the factor, but step was traced {traces} times: "
                     "a variable avoids retracing.")
    return ("The factor is read in each forward pass: 5.0, then 0.5, with one trace.")
