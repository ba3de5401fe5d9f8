"""Self-checks for notebook 11 (appendix: reference)."""
from __future__ import annotations

import numpy as np
import tensorflow as tf

from exercises._harness import NotYet, custom_gradient_ops, running, self_check
from exercises._i18n import _

__all__ = ["check_exercise_1", "check_exercise_2"]

#: |x| = 1 is in: the straight-through gradient passes there too (|x| <= 1).
_X = tf.constant([-2.0, -0.5, 0.0, 0.25, 1.0, 1.5])
_DY = tf.constant([3.0, -2.0, 0.5, 4.0, -1.5, 1.0])


def _other_points():
    """The second case: other points (|x| = 1 among them) and upstream gradients, seeded."""
    rng = np.random.default_rng(3)
    x = rng.permutation(np.concatenate([[-1.0, 1.0], np.round(rng.uniform(-2.5, 2.5, 4), 2)]))
    return tf.constant(x, tf.float32), tf.constant(np.round(rng.uniform(-3.0, 3.0, 6), 1), tf.float32)


def _held_out_points(seed: int):
    """Other points (|x| = 1 among them, shuffled) and upstream gradients, drawn from ``seed``."""
    rng = np.random.default_rng(seed)
    size = int(rng.integers(6, 10))
    x = rng.permutation(np.concatenate([[-1.0, 1.0], np.round(rng.uniform(-2.5, 2.5, size - 2), 2)]))
    dy = np.round(rng.choice([-1.0, 1.0], size) * rng.uniform(0.2, 3.0, size), 1)
    return tf.constant(x, tf.float32), tf.constant(dy, tf.float32)


def _run(binarize, compiled: bool, x, dy):
    def value_and_gradient(x, dy):
        with tf.GradientTape() as tape:
            tape.watch(x)
            y = binarize(x)
        return y, tape.gradient(y, x, output_gradients=dy)

    fn = tf.function(value_and_gradient) if compiled else value_and_gradient
    return fn(x, dy)


def _check_exercise_1_case(binarize, x, dy, other: str, first_passed: bool = False) -> np.ndarray:
    """One case of :func:`check_exercise_1`; ``other`` starts the second case's messages, and
    ``first_passed`` says the public first case ran and passed. Returns the expected gradient."""
    expected_y = np.sign(x.numpy())
    mask = (np.abs(x.numpy()) <= 1.0).astype(np.float32)
    expected_grad = dy.numpy() * mask + 0.0                                # no -0.0 shown
    for mode, compiled in ((_("eagerly"), False), (_("inside tf.function"), True)):
        try:
            with running(_("{other}{mode}, binarize").format(other=other, mode=mode)):
                y, grad = _run(binarize, compiled, x, dy)
        except NotYet as not_yet:
            if "keyword" not in str(not_yet.__cause__).lower():
                raise
            raise NotYet(f"{not_yet}\n" + _("Calling a tf.custom_gradient function with a keyword argument raises "
                                            "inside tf.function: pass tensors positionally.")) from None
        got_y = None if y is None else np.asarray(y)
        if got_y is None or got_y.shape != expected_y.shape or not np.array_equal(got_y, expected_y):
            fixed = got_y is not None and got_y.shape == _X.shape and np.array_equal(got_y, np.sign(_X.numpy()))
            raise NotYet(_("{other}{mode}, at x = {x}\nthe value should be sign(x) = {expected}; got {got}.").format(
                other=other, mode=mode, x=x.numpy(), expected=expected_y, got=got_y) + (
                _("\nThat is sign of the first points, [-2, -0.5, 0, 0.25, 1, 1.5], whatever x is: does binarize "
                  "compute from\nthe x it receives?") if fixed and other else ""))
        if grad is None:
            raise NotYet(_("{other}{mode}, no gradient reaches x (tape.gradient returned None).").format(
                other=other, mode=mode))
        grad = np.asarray(grad) + 0.0                                       # no -0.0 shown
        if grad.shape != expected_grad.shape:
            raise NotYet(_("{other}{mode}, x has shape {shape}, but it receives a gradient of shape {got}.").format(
                other=other, mode=mode, shape=tuple(x.shape), got=grad.shape))
        said = _("{other}{mode}, with the upstream gradient dy = {dy},\nx receives {got}; "
                 "expected dy where |x| <= 1, {expected}.").format(other=other, mode=mode, dy=dy.numpy(), got=grad,
                                                                  expected=expected_grad)
        if np.allclose(grad, 0.0):
            raise NotYet(f"{said}\n" + _("Zero everywhere is tf.sign's own gradient: the custom gradient is not "
                                         "used.\nHow is hard_sign called? (notebook 01, section 5)"))
        if np.allclose(grad, mask):
            raise NotYet(f"{said}\n" + _("That is the mask |x| <= 1 alone: does grad multiply by dy?"))
        if np.allclose(grad, dy.numpy() * (np.abs(x.numpy()) < 1.0)):
            raise NotYet(f"{said}\n" + _("At |x| = 1 dy passes too: the condition is |x| <= 1."))
        if not np.allclose(grad, expected_grad) and first_passed:
            raise NotYet(f"{said}\n" + _("The first points passed: does grad compute from the dy and t it receives, "
                                         "or return\nnumbers fixed in advance?"))
        if not np.allclose(grad, expected_grad):
            raise NotYet(f"{said}\n" + _("Does grad multiply by dy, and pass it where |x| <= 1 (and only there)?"))
    return expected_grad


@self_check
def check_exercise_1(binarize, *, seed: int | None = None) -> str:
    """Checks that ``binarize`` has the value sign(x) and sends ``dy`` back where |x| <= 1.

    Tested eagerly and inside ``tf.function`` under an upstream gradient that is not 1, so that a
    ``grad`` that forgets ``dy`` and a call by keyword (which bypasses ``tf.custom_gradient``
    eagerly and raises inside ``tf.function``) are both caught. The exercise fixes the pitfalls of a
    ``tf.custom_gradient``: an answer that reaches the numbers without one (a stop_gradient trick
    around ``tf.clip_by_value``) is refused. A second case, other points and upstream gradients,
    refuses an answer that returns the first case's numbers. With ``seed`` (the instructor edition's
    held-out cases) it tries points and upstream gradients drawn from it instead (as "other points").
    """
    cases = ((_X, _DY, ""), (*_other_points(), _("on other points, "))) if seed is None else (
        (*_held_out_points(seed), _("on other points, ")),)
    for x, dy, other in cases:
        expected_grad = _check_exercise_1_case(binarize, x, dy, other, first_passed=x is not cases[0][0])
        if x is cases[0][0]:
            shown = expected_grad
    with running(_("traced in a tf.function, binarize")):
        rules = custom_gradient_ops(binarize, _X)
    if not rules:
        raise NotYet(_("the numbers are right, but your binarize builds no tf.custom_gradient: its gradient comes "
                       "from\nother ops (a stop_gradient trick?). The exercise is to fix the two pitfalls of "
                       "hard_sign's\ntf.custom_gradient: keep it."))
    return _("sign(x) forward, and dy passes where |x| <= 1 ({shown}), eagerly and in tf.function.").format(shown=shown)


def _check_exercise_2_case(make_step, initial: float, at: float, new: float, other: str) -> None:
    """One case of :func:`check_exercise_2`: ``make_step(initial)``, ``step`` at ``t = at``, then
    ``set_factor(new)``; ``other`` starts the second case's messages."""
    with running(f"{other}make_step({initial!r})"):
        made = make_step(initial)
    if not isinstance(made, (tuple, list)) or len(made) != 2:
        raise NotYet(_("{other}make_step({initial!r}) should return the pair (step, set_factor); it returned "
                       "{type} {made!r:.60}.").format(other=other, initial=initial, type=type(made).__name__, made=made))
    step, set_factor = made
    if not callable(getattr(step, "experimental_get_tracing_count", None)):
        raise NotYet(_("step is not a tf.function any more: run eagerly, it reads the Python number at "
                       "every call,\nbut the exercise is about a compiled step. Keep @tf.function on step, and "
                       "make the factor\nsomething it reads at each call (§3.1)."))
    x = tf.constant(at)
    with running(_("{other}step(tf.constant({at!r})) with factor {initial:g}").format(other=other, at=at, initial=initial)):
        before = step(x)
    if before is None:
        raise NotYet(_("{other}step(tf.constant({at!r})) returned None: return tape.gradient(y, t).").format(
            other=other, at=at))
    with running(_("{other}set_factor({new!r}), then step(tf.constant({at!r}))").format(other=other, new=new, at=at)):
        before = float(before)
        set_factor(new)
        after = step(x)
        after = None if after is None else float(after)
    if before != initial:
        raise NotYet(_("{other}with factor {initial:g} the gradient of scale_gradient(t, {initial:g}) at t = {at:g} "
                       "should be {initial!r}; got {got}.").format(other=other, initial=initial, at=at, got=before) + (
                         _("\nThat is the first case's factor, make_step({public!r}): is {got:g} written into your "
                           "code? make_step\nmust start from the factor it is given.").format(public=_PUBLIC[0], got=before)
                         if other and before == _PUBLIC[0] else ""))
    if after == initial:
        raise NotYet(_("{other}after set_factor({new!r}) the gradient is still {initial!r}: the tf.function read the "
                       "Python number\nonce, while tracing. What does a tf.function read anew at every call? "
                       "(§3.1)").format(other=other, new=new, initial=initial))
    if after != new:
        raise NotYet(_("{other}after set_factor({new!r}) the gradient should be {new!r}; got {got}.").format(
            other=other, new=new, got=after) + (
            _("\nThat is the first case's new factor, set_factor({public!r}): is {got:g} written into your "
              "code?\nset_factor must use the value it is given.").format(public=_PUBLIC[2], got=after)
            if other and after == _PUBLIC[2] else ""))
    traces = step.experimental_get_tracing_count()
    if traces > 1:
        raise NotYet(_("{other}the gradient follows the factor, but step was traced {traces} times: "
                       "a variable avoids retracing.").format(other=other, traces=traces))


#: Exercise 2's first case: make_step(5.0), step at t = 2.0, then set_factor(0.5).
_PUBLIC = (5.0, 2.0, 0.5)


def _held_out_factors(seed: int) -> tuple[float, float, float]:
    """An initial factor, a point t and a new factor drawn from ``seed``: quarters (exact in float32),
    the factors nonzero and different from each other and from the first case's."""
    rng = np.random.default_rng(seed)
    choices = [q / 4 for q in range(-24, 25) if q and q / 4 not in (_PUBLIC[0], _PUBLIC[2])]
    initial, new = (float(f) for f in rng.choice(choices, 2, replace=False))
    return initial, float(rng.choice([-1.0, 1.0]) * rng.integers(1, 13) / 4), new


@self_check
def check_exercise_2(make_step, *, seed: int | None = None) -> str:
    """Checks that ``make_step(5.0)`` returns ``(step, set_factor)`` whose factor stays live.

    ``step(t)`` must return the gradient of ``scale_gradient(t, factor)``; after ``set_factor(0.5)``
    the next call must use 0.5, without tracing ``step`` again. ``step`` must stay a
    ``tf.function``: without it, a Python number is read at every call and the point is missed.
    A second case, ``make_step(1.5)`` then ``set_factor(-0.25)``, refuses an answer that writes the
    first case's factors into the code, and names them. With ``seed`` (the instructor edition's
    held-out cases) it tries factors and a point drawn from it instead (as "other numbers").
    """
    if seed is not None:
        initial, at, new = _held_out_factors(seed)
        _check_exercise_2_case(make_step, initial, at, new, _("with other numbers, "))
        return _("The factor is read in each forward pass: {initial:g}, then {new:g}, with one trace.").format(
            initial=initial, new=new)
    _check_exercise_2_case(make_step, *_PUBLIC, "")
    _check_exercise_2_case(make_step, 1.5, -3.0, -0.25, _("with other numbers, "))
    return _("The factor is read in each forward pass: 5.0, then 0.5, with one trace.")
