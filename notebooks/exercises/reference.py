"""Self-checks for notebook 11 (appendix: reference)."""
from __future__ import annotations

import numpy as np
import tensorflow as tf

from exercises._harness import NotYet, custom_gradient_ops, running, self_check

__all__ = ["check_exercise_1", "check_exercise_2"]

#: |x| = 1 is in: the straight-through gradient passes there too (|x| <= 1).
_X = tf.constant([-2.0, -0.5, 0.0, 0.25, 1.0, 1.5])
_DY = tf.constant([3.0, -2.0, 0.5, 4.0, -1.5, 1.0])


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
    eagerly and raises inside ``tf.function``) are both caught. The exercise fixes the pitfalls of a
    ``tf.custom_gradient``: an answer that reaches the numbers without one (a stop_gradient trick
    around ``tf.clip_by_value``) is refused.
    """
    expected_y = np.sign(_X.numpy())
    mask = (np.abs(_X.numpy()) <= 1.0).astype(np.float32)
    expected_grad = _DY.numpy() * mask
    for mode, compiled in (("eagerly", False), ("inside tf.function", True)):
        try:
            with running(f"{mode}, binarize"):
                y, grad = _run(binarize, compiled)
        except NotYet as not_yet:
            if "keyword" not in str(not_yet.__cause__).lower():
                raise
            raise NotYet(f"{not_yet}\nCalling a tf.custom_gradient function with a keyword argument raises "
                         "inside tf.function: pass tensors positionally.") from None
        got_y = None if y is None else np.asarray(y)
        if got_y is None or got_y.shape != expected_y.shape or not np.array_equal(got_y, expected_y):
            raise NotYet(f"{mode}, at x = {_X.numpy()}\nthe value should be sign(x) = {expected_y}; got {got_y}.")
        if grad is None:
            raise NotYet(f"{mode}, no gradient reaches x (tape.gradient returned None).")
        grad = np.asarray(grad) + 0.0                                       # no -0.0 shown
        said = (f"{mode}, with the upstream gradient dy = {_DY.numpy()},\nx receives {grad}; "
                f"expected dy where |x| <= 1, {expected_grad}.")
        if np.allclose(grad, 0.0):
            raise NotYet(f"{said}\nZero everywhere is tf.sign's own gradient: the custom gradient is not used.\n"
                         "How is hard_sign called? (notebook 01, section 5)")
        if np.allclose(grad, mask):
            raise NotYet(f"{said}\nThat is the mask |x| <= 1 alone: does grad multiply by dy?")
        if np.allclose(grad, _DY.numpy() * (np.abs(_X.numpy()) < 1.0)):
            raise NotYet(f"{said}\nAt |x| = 1 dy passes too: the condition is |x| <= 1.")
        if not np.allclose(grad, expected_grad):
            raise NotYet(f"{said}\nDoes grad multiply by dy, and pass it where |x| <= 1 (and only there)?")
    with running("traced in a tf.function, binarize"):
        rules = custom_gradient_ops(binarize, _X)
    if not rules:
        raise NotYet("the numbers are right, but your binarize builds no tf.custom_gradient: its gradient comes "
                     "from\nother ops (a stop_gradient trick?). The exercise is to fix the two pitfalls of "
                     "hard_sign's\ntf.custom_gradient: keep it.")
    return (f"sign(x) forward, and dy passes where |x| <= 1 ({expected_grad}), eagerly and in tf.function.")


@self_check
def check_exercise_2(make_step) -> str:
    """Checks that ``make_step(5.0)`` returns ``(step, set_factor)`` whose factor stays live.

    ``step(t)`` must return the gradient of ``scale_gradient(t, factor)``; after ``set_factor(0.5)``
    the next call must use 0.5, without tracing ``step`` again. ``step`` must stay a
    ``tf.function``: without it, a Python number is read at every call and the point is missed.
    """
    with running("make_step(5.0)"):
        made = make_step(5.0)
    if not isinstance(made, (tuple, list)) or len(made) != 2:
        raise NotYet(f"make_step(5.0) should return the pair (step, set_factor); it returned "
                     f"{type(made).__name__} {made!r:.60}.")
    step, set_factor = made
    if not callable(getattr(step, "experimental_get_tracing_count", None)):
        raise NotYet("step is not a tf.function any more: run eagerly, it reads the Python number at "
                     "every call,\nbut the exercise is about a compiled step. Keep @tf.function on step, and "
                     "make the factor\nsomething it reads at each call (§3.1).")
    x = tf.constant(2.0)
    with running("step(tf.constant(2.0)) with factor 5"):
        before = step(x)
    if before is None:
        raise NotYet("step(tf.constant(2.0)) returned None: return tape.gradient(y, t).")
    with running("set_factor(0.5), then step(tf.constant(2.0))"):
        before = float(before)
        set_factor(0.5)
        after = step(x)
        after = None if after is None else float(after)
    if before != 5.0:
        raise NotYet(f"with factor 5 the gradient of scale_gradient(t, 5) at t = 2 should be 5.0; got {before}.")
    if after == 5.0:
        raise NotYet("after set_factor(0.5) the gradient is still 5.0: the tf.function read the Python "
                     "number\nonce, while tracing. What does a tf.function read anew at every call? (§3.1)")
    if after != 0.5:
        raise NotYet(f"after set_factor(0.5) the gradient should be 0.5; got {after}.")
    traces = step.experimental_get_tracing_count()
    if traces > 1:
        raise NotYet(f"the gradient follows the factor, but step was traced {traces} times: "
                     "a variable avoids retracing.")
    return ("The factor is read in each forward pass: 5.0, then 0.5, with one trace.")
