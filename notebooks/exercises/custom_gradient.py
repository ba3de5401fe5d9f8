"""Self-checks for notebook 01 (`tf.custom_gradient` in full)."""
from __future__ import annotations

import numpy as np
import tensorflow as tf

from exercises._harness import NotYet, first_hint, gradient_rules, running, self_check, shown
from exercises._i18n import _

__all__ = ["check_exercise_1", "check_exercise_2"]


def _show(values) -> str:
    return shown(values, 4)


def _require_custom_gradient(fn, *args, what: str) -> None:
    """Refuses an answer whose gradient TensorFlow derives itself: the exercise asks for a ``grad``."""
    with running(_("tracing {what} in a tf.function (to find its @tf.custom_gradient)").format(what=what),
                 hint=_("\nThe check traces your function to see how its gradient is built: use "
                        "TensorFlow ops only, no .numpy().")):
        rules = gradient_rules(fn, *args)
    # A rule of gradlab's (map_gradient around the answer) passes TensorFlow's own gradient on: not yours.
    if not any(rule.op_type == "IdentityN" and not rule.origin.startswith("gradlab") for rule in rules):
        raise NotYet(_("the values and the gradient are right, but TensorFlow derived this gradient\n"
                       "itself from the ops of {what}: the exercise asks you to write it yourself,\n"
                       "with @tf.custom_gradient and a grad(dy).").format(what=what))


def _check_exercise_1_case(fn, x, dy) -> str:
    """One case of :func:`check_exercise_1`, on the given inputs; what "Correct!" shows."""
    with running():
        with tf.GradientTape() as tape:
            tape.watch(x)
            y = tf.convert_to_tensor(fn(x), tf.float32)
        grad = tape.gradient(y, x, output_gradients=dy)
    expected_y = -tf.nn.softplus(-x).numpy()
    if y.shape != x.shape or not np.all(np.isfinite(y.numpy())) or not np.allclose(
            y.numpy(), expected_y, rtol=1e-6, atol=1e-6):
        hint = (_("\nHint: sigmoid(-200) rounds to 0 in float32 and log(0) = -inf: compute the value\n"
                  "with the stable formula of section 2.") if np.isneginf(y.numpy()).any() else "")
        raise NotYet(_("at x = {x} the value is {y},\nbut log(sigmoid(x)) = -softplus(-x) = {expected}.").format(
            x=_show(x), y=_show(y), expected=_show(expected_y)) + hint)
    if grad is None:
        raise NotYet(_("no gradient reaches x (tape.gradient returned None): did grad return None,\n"
                       "or does a tf.stop_gradient cut the path?"))
    if grad.shape != x.shape:
        raise NotYet(_("x has shape {shape}, but grad sends back a gradient of shape {got}.").format(
            shape=x.shape, got=grad.shape))
    got, sig = grad.numpy(), tf.sigmoid(-x).numpy()
    expected = dy.numpy() * sig
    if np.allclose(got, expected, rtol=1e-6, atol=1e-6):
        _require_custom_gradient(fn, x, what="log_sigmoid")
        return _("Values {y}, all finite; gradient {got} = dy * sigmoid(-x).").format(y=_show(y), got=_show(got))
    sent_instead = (  # what a typical wrong rule sends back, and the hint for it
        (sig, _("your grad ignores dy: it sends sigmoid(-x) whatever the upstream gradient is\n"
                "(the bug of section 1). Multiply by dy.")),
        (dy.numpy(), _("your grad returns dy unchanged: multiply it by the local derivative.")),
        (dy.numpy() * tf.sigmoid(x).numpy(),
         _("this is dy * sigmoid(x): the derivative of log(sigmoid(x)) is 1 - sigmoid(x) = sigmoid(-x).")),
    )
    hint = first_hint(*((np.allclose(got, wrong, atol=1e-6), hint) for wrong, hint in sent_instead),
                      (not np.all(np.isfinite(got)),
                       _("the gradient is not finite everywhere: compute it from sigmoid(-x), which stays in [0, 1].")),
                      otherwise=_("the backward rule is dy * sigmoid(-x)."))
    raise NotYet(_("for x = {x} and the upstream dy = {dy}\nyou send back {got};\n"
                   "dy * sigmoid(-x) is {expected}.\nHint: {hint}").format(
                     x=_show(x), dy=_show(dy), got=_show(got), expected=_show(expected), hint=hint))


def _held_out(seed: int, size: tuple[int, int]) -> tuple[np.random.Generator, int]:
    """The generator of the held-out cases (the instructor edition's ``seed``), and a size drawn in ``size``."""
    rng = np.random.default_rng(seed)
    return rng, int(rng.integers(*size))


def _upstream(rng: np.random.Generator, size: int) -> tf.Tensor:
    """An upstream gradient of both signs, no entry near 0 or 1 (so that forgetting dy shows everywhere)."""
    return tf.constant((rng.choice([-1.0, 1.0], size) * rng.uniform(0.25, 4.0, size)).round(2), tf.float32)


@self_check
def check_exercise_1(fn, *, seed: int | None = None) -> str:
    """Checks a stable ``log(sigmoid(x))`` written with ``tf.custom_gradient``: finite values, and
    the gradient ``dy * sigmoid(-x)`` for an upstream ``dy`` that is not 1.

    Autodiff of ``-softplus(-x)`` (``tf.math.log_sigmoid``) gives the same numbers, so the traced
    graph must hold a custom gradient of the learner's own (not only one of gradlab's ops).

    A second case with other inputs refuses an answer that hard-codes the first case's numbers.
    With ``seed`` (the instructor edition's held-out cases) it tries inputs drawn from it instead:
    one x below -100 and one above 100 (where the naive formula overflows), others in [-6, 6].
    """
    if seed is not None:
        rng, size = _held_out(seed, (5, 9))
        x = np.concatenate([[-rng.uniform(100.0, 250.0), rng.uniform(100.0, 250.0)], rng.uniform(-6.0, 6.0, size - 2)])
        return _check_exercise_1_case(fn, tf.constant(rng.permutation(x).round(2), tf.float32), _upstream(rng, size))
    shown = _check_exercise_1_case(fn,
                                   tf.constant([-200.0, -5.0, 0.0, 5.0, 200.0]), tf.constant([2.0, -1.0, 0.5, 3.0, -2.0]))
    _check_exercise_1_case(fn,
                           tf.constant([-150.0, -2.5, 0.5, 1.5, 120.0, -0.25]), tf.constant([-1.5, 0.75, 2.0, -3.0, 1.0, 4.0]))
    return shown


def _check_exercise_2_case(fn, x, w, dy) -> str:
    """One case of :func:`check_exercise_2`, on the given inputs; what "Correct!" shows."""
    try:
        with running():
            with tf.GradientTape() as tape:
                tape.watch([x, w])
                y = tf.convert_to_tensor(fn(x, w))
            gx, gw = tape.gradient(y, [x, w], output_gradients=dy)
    except NotYet as not_yet:
        if "gradients, but returned" not in str(not_yet):
            raise
        raise NotYet(f"{not_yet}\n" + _("Hint: product has two inputs, so grad returns two gradients, one per\n"
                                         "input, in the order of the inputs (bug 2).")) from None
    if y.shape != x.shape or not np.array_equal(y.numpy(), (x * w).numpy()):
        raise NotYet(_("the forward value must be x * w = {expected}; you return {y}.").format(
            expected=_show(x * w), y=_show(y)))
    values = {"x": x.numpy(), "w": w.numpy(), "dy": dy.numpy()}
    for name, got, want, other in (("x", gx, dy * w, "w"), ("w", gw, dy * x, "x")):
        if got is None:
            raise NotYet(_("no gradient reaches {name} (grad returned None for it).").format(name=name))
        if got.shape != x.shape:
            raise NotYet(_("{name} has shape {shape}, but grad sends it a gradient of shape {got}.").format(
                name=name, shape=x.shape, got=got.shape))
        got, want = got.numpy(), want.numpy()
        if np.allclose(got, want):
            continue
        if np.allclose(got, values[other]):
            hint = _("you send {other} itself, whatever dy is: grad forgets the upstream gradient\n"
                     "(bug 1). Multiply by dy.").format(other=other)
        elif np.allclose(got, values["dy"] * values[name]):
            hint = _("this is dy * {name}: the gradients are swapped. Differentiating x * w by {name} "
                     "leaves {other}.").format(name=name, other=other)
        elif np.allclose(got, values["dy"]):
            hint = _("you send dy unchanged: multiply it by the local derivative of x * w by {name}.").format(name=name)
        else:
            hint = _("by the chain rule, the gradient w.r.t. {name} is dy times d(x * w)/d{name}.").format(name=name)
        raise NotYet(_("with x = {x}, w = {w} and the upstream dy = {dy},\n"
                       "the gradient w.r.t. {name} is {got}; the chain rule gives {want}.\nHint: {hint}").format(
                         x=_show(x), w=_show(w), dy=_show(dy), name=name, got=_show(got), want=_show(want), hint=hint))
    _require_custom_gradient(fn, x, w, what="product")
    return _("d/dx = {gx} = dy * w and d/dw = {gw} = dy * x.").format(gx=_show(gx), gw=_show(gw))


@self_check
def check_exercise_2(fn, *, seed: int | None = None) -> str:
    """Checks a custom-gradient product ``x * w``: d/dx = dy * w and d/dw = dy * x, for a ``dy`` that is not 1.

    Plain ``x * w`` gives the same numbers by autodiff, so the traced graph must hold a custom
    gradient of the learner's own.

    A second case with other inputs refuses an answer that hard-codes the first case's numbers.
    With ``seed`` (the instructor edition's held-out cases) it tries x, w and dy drawn from it instead.
    """
    if seed is not None:
        rng, size = _held_out(seed, (3, 8))
        x, w = (tf.constant(rng.uniform(-4.0, 4.0, size).round(2), tf.float32) for _ in range(2))
        return _check_exercise_2_case(fn, x, w, _upstream(rng, size))
    shown = _check_exercise_2_case(fn,
                                   tf.constant([1.0, -2.0, 3.0]), tf.constant([0.5, 4.0, -1.0]), tf.constant([2.0, -1.0, 10.0]))
    _check_exercise_2_case(fn,
                           tf.constant([-0.5, 2.5, 1.5, 4.0]), tf.constant([3.0, -1.5, 2.0, 0.25]),
                           tf.constant([-4.0, 1.5, 0.5, 2.0]))
    return shown


