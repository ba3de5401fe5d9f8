"""Self-checks for notebook 04 (surrogate gradients for a step function)."""
from __future__ import annotations

import numpy as np
import tensorflow as tf

import gradlab

from exercises._harness import NotYet, first_hint, gradient_rules, running, self_check, shown
from exercises._i18n import _

__all__ = ["check_exercise_1", "check_exercise_2"]


def heaviside(x):
    """The step H(x): 1.0 where x > 0, else 0.0 (in x's dtype)."""
    return tf.cast(x > 0, x.dtype)


def triangle_reference(x, upstream):
    """What a triangle surrogate should send back: upstream * max(0, 1 - |x|)."""
    return upstream * tf.maximum(tf.constant(0.0, x.dtype), 1.0 - tf.abs(x))


def _show(values, precision: int = 3) -> str:
    return shown(values, precision, width=100)


def _where(wrong: np.ndarray, limit: int = 4) -> np.ndarray:
    """Up to ``limit`` of the positions where ``wrong`` holds, spread over them: the examples a message shows."""
    positions = np.flatnonzero(wrong)
    if positions.size <= limit:
        return positions
    return positions[np.unique(np.linspace(0, positions.size - 1, limit).round().astype(int))]


def _check_forward(x, y, label: str) -> None:
    step = heaviside(x).numpy()
    if y.shape != x.shape or not np.array_equal(y.numpy(), step):
        if y.shape != x.shape:
            raise NotYet(_("the forward value must be the step, of x's shape {shape}; got shape {got}.").format(
                shape=x.shape, got=y.shape))
        at = _where(y.numpy() != step)
        rounded = (_("\nThey differ by a rounding error, as b + tf.stop_gradient(f - b) does: return the step "
                     "itself\nas the value.") if np.abs(y.numpy() - step).max() < 1e-5 else "")
        raise NotYet(_("the forward value must be exactly the step {label}.\n"
                       "At x = {x} you return {y},\nthe step is {step}.").format(
            label=label, x=_show(x.numpy()[at]), y=_show(y.numpy()[at], 9), step=_show(step[at])) + rounded)


def _require_custom_gradient(fn, x) -> None:
    with running(_("tracing your function in a tf.function (to find its @tf.custom_gradient)"),
                 hint=_("\nThe check traces your function to see how its gradient is built: use "
                        "TensorFlow ops only, no .numpy().")):
        rules = gradient_rules(fn, x)
    if not any(rule.op_type == "IdentityN" for rule in rules):
        raise NotYet(_("the value and the gradient are right, but TensorFlow derived this gradient itself\n"
                       "from the ops of your function (a tf.stop_gradient trick?): the exercise asks for a\n"
                       "@tf.custom_gradient whose grad(dy) sends the surrogate."))


def _held_out(seed: int, size: tuple[int, int], scale: float) -> tuple[np.ndarray, np.ndarray]:
    """The held-out cases (the instructor edition's ``seed``): points in [-scale, scale], one of them inside
    (-1, 1) and one outside, in a drawn order, and an upstream gradient of both signs, all drawn from ``seed``."""
    rng = np.random.default_rng(seed)
    count = int(rng.integers(*size))
    points = np.concatenate([[rng.uniform(-0.9, 0.9), rng.choice([-1.0, 1.0]) * rng.uniform(1.1, scale)],
                             rng.uniform(-scale, scale, count - 2)])
    upstream = rng.choice([-1.0, 1.0], count) * rng.uniform(0.5, 4.0, count)
    return rng.permutation(points).round(2), upstream.round(1)


@self_check
def check_exercise_1(step_fn, *, seed: int | None = None) -> str:
    """Checks ``step_fn``: forward exactly H(x); backward ``dy / (1 + (pi x)^2)`` for a random upstream
    ``dy``, from a custom gradient (a ``tf.stop_gradient`` trick reaches the same numbers without one).

    With ``seed`` (the instructor edition's held-out cases) it tries points and upstream gradients
    drawn from it instead."""
    other_points = np.random.default_rng(8)
    cases = ((np.linspace(-2.5, 2.5, 41), np.random.default_rng(7).standard_normal(41)),
             (other_points.uniform(-3.0, 3.0, 29), other_points.standard_normal(29)))  # copied numbers fail here
    if seed is not None:
        cases = (_held_out(seed, (25, 45), 3.0),)
    for case, (points, upstream) in enumerate(cases):
        other = _("on other points, ") if case else ""
        x, dy = tf.constant(points.astype(np.float32)), tf.constant(upstream.astype(np.float32))
        with running():
            with tf.GradientTape() as tape:
                tape.watch(x)
                y = tf.convert_to_tensor(step_fn(x))
            sent = tape.gradient(y, x, output_gradients=dy)
        _check_forward(x, y, "tf.cast(x > 0, x.dtype)")
        if sent is None:
            raise NotYet(other + _("no gradient reaches x, just like the plain step. Wrap the step in "
                                   "tf.custom_gradient."))
        if sent.shape != x.shape:
            raise NotYet(other + _("x has shape {shape}, but your grad sends a gradient of shape {got}.").format(
                shape=x.shape, got=sent.shape))
        got, xs, dys = sent.numpy(), x.numpy(), dy.numpy()
        bump = 1.0 / (1.0 + (np.pi * xs) ** 2)
        expected = dys * bump
        if np.allclose(got, expected, rtol=1e-5, atol=1e-6):
            continue
        if np.allclose(got, bump, rtol=1e-5, atol=1e-6):
            hint = _("your backward pass returns the surrogate itself: it ignores dy (the bug of notebook 01,\n"
                     "section 1). Multiply by dy.")
        elif not got.any():
            hint = _("your grad sends back zeros (the starting point): send dy times the surrogate.")
        elif np.allclose(got, np.pi * expected, rtol=1e-5, atol=1e-6):
            hint = _("you send pi times too much: the surrogate is the derivative of arctan(pi x) / pi,\n"
                     "and the 1/pi cancels the pi.")
        elif np.allclose(got, dys, rtol=1e-5, atol=1e-6):
            hint = _("your grad returns dy unchanged (a straight-through identity): multiply dy by the surrogate.")
        else:
            hint = _("the backward pass must send dy / (1 + (pi x)^2).")
        at = _where(~np.isclose(got, expected, rtol=1e-5, atol=1e-6))
        raise NotYet(other + _("under a random upstream dy, x does not receive dy / (1 + (pi x)^2). For instance\n"
                               "at x        {x}\nwith dy     {dy}\nx receives  {got};\nexpected    {expected}.\n"
                               "Hint: {hint}").format(
            x=_show(xs[at]), dy=_show(dys[at]), got=_show(got[at]), expected=_show(expected[at]), hint=hint))
    _require_custom_gradient(step_fn, x)
    return _("Forward exactly the step; backward dy / (1 + (pi x)^2), the arctan surrogate.")


@self_check
def check_exercise_2(fixed_fn, *, seed: int | None = None) -> str:
    """Checks the repaired ``non_differentiable`` with ``gradlab.check_gradient`` against the triangle
    reference; the repair keeps the custom gradient (a ``tf.stop_gradient`` trick is refused).

    With ``seed`` (the instructor edition's held-out cases) it tries points and upstream gradients
    drawn from it instead, some inside the triangle and some outside."""
    cases = (([-1.5, -0.6, -0.1, 0.2, 0.7, 1.4], [2.0, -1.0, 3.0, 0.5, -2.0, 4.0]),
             ([-0.9, -0.3, 0.05, 0.45, 1.1, 2.0], [-1.5, 2.5, 1.0, -3.0, 0.5, 2.0]))   # copied numbers fail here
    if seed is not None:
        cases = tuple((points.astype(np.float32), upstream.astype(np.float32))
                      for points, upstream in (_held_out(seed, (6, 10), 2.0),))
    for case, (at_x, upstream) in enumerate(cases):
        other = _("on other points, ") if case else ""
        points, dy = tf.constant(at_x), tf.constant(upstream)
        with running():
            value = tf.convert_to_tensor(fixed_fn(points))
            result = gradlab.check_gradient(fixed_fn, points, reference=triangle_reference)
            with tf.GradientTape() as tape:
                tape.watch(points)
                y = tf.convert_to_tensor(fixed_fn(points))
            sent = tape.gradient(y, points, output_gradients=dy)
        _check_forward(points, value, _("tf.cast(x > 0, x.dtype), as the source has it"))
        expected = triangle_reference(points, dy).numpy()
        triangle = triangle_reference(points, tf.ones_like(dy)).numpy()
        if sent is None:
            raise NotYet(other + _("no gradient reaches x (tape.gradient returned None): keep the "
                                   "@tf.custom_gradient and its grad."))
        table = _("\nat x                    {x}\nwith dy                 {dy}\n"
                  "x receives              {got};\ndy * max(0, 1 - |x|) is {expected}.").format(
            x=_show(points), dy=_show(dy), got=_show(sent), expected=_show(expected))
        if not result.linear_in_upstream:
            hint = first_hint(
                (result.ignores_upstream,
                 _("grad sends the same whatever dy is: what does it leave out? (notebook 01, section 1)")),
                (np.allclose(sent.numpy(), dy.numpy() + triangle, atol=1e-6),
                 _("grad adds the surrogate to dy: the chain rule multiplies dy by the local derivative.")),
                otherwise=_("the gradient changes with dy, but not in proportion: the chain rule multiplies dy by\n"
                            "the local derivative (notebook 01, section 1)."))
            raise NotYet(other + _("the gradient still does not scale with the upstream gradient dy:{table}\n"
                                   "Hint: {hint}").format(table=table, hint=hint))
        if not result.ok:
            raise NotYet(other + _("the gradient scales with dy but is not dy * max(0, 1 - |x|):{table}\n"
                                   "Hint: the source's triangle max(0, 1 - |x|) is the surrogate: grad sends dy "
                                   "times it.").format(table=table))
    _require_custom_gradient(fixed_fn, points)
    return _("check_gradient agrees (max error {error:.1e}) and the gradient is linear in dy.").format(
        error=result.max_error)
