"""Self-checks for notebook 10 (appendix: the TF1 legacy route)."""
from __future__ import annotations

import numpy as np
import tensorflow as tf

from exercises._harness import NotYet, gradient_rules, running, self_check
from exercises._i18n import _

__all__ = ["check_exercise_1", "check_exercise_2"]


def _traced_overrides(fn, x) -> list[tuple[str, str]]:
    """``(op type, rule name)`` of each op ``fn`` builds whose gradient is replaced, traced in a
    ``tf.function``: an override map sets it on the op it redirects (``"Relu"``, ``"Identity"``...),
    ``tf.custom_gradient`` on the ``IdentityN`` op it wraps its outputs in. None if it cannot be traced."""
    try:
        return [(rule.op_type, rule.name) for rule in gradient_rules(fn, x)]
    except Exception:  # an eager-only answer: it gave the right numbers; there is nothing to refuse it on
        return []


def _check_exercise_1_case(fn, xs, dy) -> str:
    """One case of :func:`check_exercise_1`, on the given inputs; what "Correct!" shows."""

    @tf.function
    def run(x):
        y = tf.convert_to_tensor(fn(x))
        return y, tf.gradients(y, x, grad_ys=dy)[0]

    with running(_("your function"), last=True):
        y, grad = run(xs)
    if y.shape != xs.shape or not np.array_equal(y.numpy(), tf.nn.relu(xs).numpy()):
        raise NotYet(_("the forward value must stay relu(x) = {expected}; you return {y}.").format(
            expected=tf.nn.relu(xs).numpy(), y=y.numpy()))
    grad = np.zeros(xs.shape, np.float32) if grad is None else grad.numpy() + 0.0      # no -0.0 shown
    upstream, positive = dy.numpy(), xs.numpy() > 0
    expected = upstream * np.where(positive, 1.0, 0.1).astype(np.float32)
    overrides = _traced_overrides(fn, xs)
    said = dict(x=xs.numpy(), dy=upstream, got=grad)
    if np.allclose(grad, expected):
        if any(op_type == "Relu" for op_type, _rule in overrides):
            return _("Forward relu(x), gradient {got}: a leaky-ReLU gradient behind an exact ReLU.").format(got=grad)
        how = (_("it comes from a tf.custom_gradient") if any(op_type == "IdentityN" for op_type, _rule in overrides)
               else _("it comes from other ops' own gradients (a stop_gradient trick?)"))
        raise NotYet(_("the gradient is right, but no Relu op in your function has its gradient overridden:\n{how}.\n"
                       "This exercise practises the legacy route: create tf.nn.relu inside\n"
                       "gradlab.gradient_override({{'Relu': fn}}), with fn(op, grad) computing the gradient.").format(
                           how=how))
    if np.allclose(grad, upstream * positive):
        raise NotYet(_("at x = {x} with the upstream gradient {dy},\nx receives {got}, ReLU's own gradient: the "
                       "override is not applied.\nIs the op type spelled 'Relu', and is tf.nn.relu created inside "
                       "the with block?").format(**said))
    if np.allclose(grad, np.where(positive, 1.0, 0.1)):
        hint = _("Your fn ignores grad: multiply the leaky slope by it.")
    elif np.allclose(grad, upstream):
        hint = _("Your fn returns grad unchanged: multiply it by 0.1 where x <= 0.")
    elif np.allclose(grad, upstream * np.where(positive, 0.1, 1.0)):
        hint = _("The slopes are swapped: 1 where x > 0, 0.1 elsewhere.")
    else:
        hint = _("The rule is grad times 1 where x > 0, times 0.1 elsewhere.")
    raise NotYet(_("at x = {x} with the upstream gradient {dy},\nx receives {got}; expected {expected}.").format(
        expected=expected, **said) + f"\n{hint}")


def _held_out(seed: int, scale: float, inside: float) -> tuple[tf.Tensor, tf.Tensor]:
    """The held-out cases (the instructor edition's ``seed``): 6 to 9 inputs in [-scale, scale], both signs,
    and upstream gradients, half of them (at least one) within [-inside, inside], drawn from ``seed``."""
    rng = np.random.default_rng(seed)
    size = int(rng.integers(6, 10))
    x = np.concatenate([[-rng.uniform(0.1, scale), rng.uniform(0.1, scale)], rng.uniform(-scale, scale, size - 2)])
    small = size // 2
    dy = np.concatenate([rng.uniform(-inside, inside, small),
                         rng.choice([-1.0, 1.0], size - small) * rng.uniform(max(2 * inside, 0.5), 4.0, size - small)])
    return tf.constant(rng.permutation(x).round(2), tf.float32), tf.constant(rng.permutation(dy).round(2), tf.float32)


@self_check
def check_exercise_1(fn, *, seed: int | None = None) -> str:
    """Checks fn(x) inside a tf.function: the value of relu(x), and the gradient of leaky ReLU(0.1).

    ``tf.gradients`` runs with an upstream gradient other than ones, so a gradient function that
    ignores ``grad`` is caught. The exercise practises the override map: a ``Relu`` op in the traced
    graph must carry an overridden gradient, so a ``tf.custom_gradient`` or a stop_gradient trick
    that reaches the same numbers is refused.

    A second case with other inputs refuses an answer that hard-codes the first case's numbers.
    With ``seed`` (the instructor edition's held-out cases) it tries inputs and upstream gradients
    drawn from it instead.
    """
    if seed is not None:
        return _check_exercise_1_case(fn, *_held_out(seed, 3.0, 1.0))
    shown = _check_exercise_1_case(fn,
                                   tf.constant([-2.0, -0.5, 0.5, 2.0]), tf.constant([2.0, -3.0, 0.5, 4.0]))
    _check_exercise_1_case(fn,
                           tf.constant([-1.5, 0.25, -0.75, 3.0, 1.0]), tf.constant([-1.0, 2.5, 4.0, -0.5, 1.5]))
    return shown


def _check_exercise_2_case(fn, x, dy) -> str:
    """One case of :func:`check_exercise_2`, on the given inputs; what "Correct!" shows."""
    with running():
        with tf.GradientTape() as tape:
            tape.watch(x)
            y = tf.convert_to_tensor(fn(x))
        grad = tape.gradient(y, x, output_gradients=dy)
    if y.shape != x.shape or not np.array_equal(y.numpy(), x.numpy()):
        raise NotYet(_("the forward value must be x = {x} exactly; you return {y}.").format(x=x.numpy(), y=y.numpy())
                     + (_("\nClip the gradient, not the value.")
                        if np.allclose(y.numpy(), np.clip(x.numpy(), -0.1, 0.1)) else ""))
    if grad is None:
        raise NotYet(_("no gradient reaches x. Did the forward pass go through NumPy?"))
    if grad.shape != x.shape:
        raise NotYet(_("x has shape {shape}, but your grad sends back a gradient of shape {got}.").format(
            shape=x.shape, got=grad.shape))
    expected, got, upstream = np.clip(dy.numpy(), -0.1, 0.1), grad.numpy(), dy.numpy()
    if np.array_equal(got, upstream):
        raise NotYet(_("for the upstream gradient {dy} you send back {got},\nthe upstream gradient, unclipped: in "
                       "eager mode the override map is silently ignored (section 4).\nWhat replaces the map in TF 2? "
                       "Section 6 lists a replacement for each legacy recipe.").format(dy=upstream, got=got))
    if not np.allclose(got, expected):
        if np.allclose(got, np.clip(np.ones_like(upstream), -0.1, 0.1)):
            hint = _("\nYour grad ignores dy: clip the upstream gradient itself.")
        elif np.allclose(got, 0.1 * upstream):
            hint = _("\nThat scales dy by 0.1: clip it to [-0.1, 0.1] instead.")
        else:
            hint = ""
        raise NotYet(_("for the upstream gradient {dy} you send back {got};\nclip_by_value(dy, -0.1, 0.1) is "
                       "{expected}.").format(dy=upstream, got=got, expected=expected) + hint)
    mapped = sorted({op_type for op_type, _rule in _traced_overrides(fn, x) if op_type != "IdentityN"})
    if mapped:
        raise NotYet(_("the gradient is clipped here, but your function still overrides the gradient of "
                       "{ops} with a map:\nonly a tape outside the tf.function that builds the op "
                       "honours it; a tape inside one\n(Keras' fit) ignores it (section 4). Port it: "
                       "tf.custom_gradient or gradlab need no map.").format(ops=", ".join(mapped)))
    return _("Eager, forward unchanged, upstream {dy} clipped to {got}.").format(dy=upstream, got=got)


@self_check
def check_exercise_2(fn, *, seed: int | None = None) -> str:
    """Checks that fn(x) is an identity whose gradient is clip_by_value(dy, -0.1, 0.1), eagerly.

    The exercise ports the legacy map to TF 2, so an answer that still overrides an op's gradient
    with a map (wrapped in a ``tf.function``, where a tape outside it honours the map) is refused,
    by the overrides in its traced graph.

    A second case with other inputs refuses an answer that hard-codes the first case's numbers.
    With ``seed`` (the instructor edition's held-out cases) it tries inputs and upstream gradients
    drawn from it instead, half of them inside the clip's bounds.
    """
    if seed is not None:
        return _check_exercise_2_case(fn, *_held_out(seed, 4.0, 0.09))
    shown = _check_exercise_2_case(fn,
                                   tf.constant([3.0, -1.0, 0.5, 2.0]), tf.constant([1.0, -0.05, -4.0, 0.07]))
    _check_exercise_2_case(fn,
                           tf.constant([-2.0, 0.25, 1.5, -0.5, 4.0]), tf.constant([-0.3, 0.02, 2.5, -0.09, -1.0]))
    return shown


