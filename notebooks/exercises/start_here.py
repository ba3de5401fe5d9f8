"""Self-checks for notebook 00 (start here)."""
from __future__ import annotations

import numbers

import numpy as np
import tensorflow as tf

import gradlab
from exercises._harness import NotYet, running, self_check
from exercises._i18n import _

__all__ = ["check_exercise_1", "check_exercise_2"]

# -0.0 is in the grid on purpose: `x + 0.0` turns it into +0.0, so only a bitwise identity passes.
_X = tf.constant([0.5, -1.0, 2.0, -0.0, 3.0])
_DY = tf.constant([0.1, -0.2, 0.5, -2.0, 0.02])
#: (factor, bound) settings; the first makes "clip, then scale" and "scale, then clip" differ.
_SETTINGS = ((3.0, 1.0), (-2.0, 0.5))


def _bits(values) -> np.ndarray:
    return np.asarray(values, dtype=np.float32).view(np.uint32)


def _held_out(seed: int):
    """Other inputs, drawn from ``seed``: x of another length (a -0.0 among them), dy, two settings.

    As in the public cases, one setting has ``factor * |dy| > bound`` somewhere and ``|dy| < bound``
    elsewhere, so "clip, then scale" and "scale, then clip" differ; the other flips the sign.
    """
    rng = np.random.default_rng(seed)
    size = int(rng.integers(6, 10))
    x = rng.normal(0.0, 2.0, size).astype(np.float32)
    x[rng.integers(size)] = -0.0
    dy = rng.uniform(-1.0, 1.0, size).astype(np.float32)
    dy[:2] = (0.05, -0.9)                    # one |dy| under every bound below, one far over it
    factor, bound = float(rng.uniform(1.5, 4.0)), float(rng.uniform(0.3, 0.8))
    return (tf.constant(x), tf.constant(dy),
            ((round(factor, 2), round(bound, 2)), (-round(factor / 2, 2), round(bound / 2, 2))))


def _forward_and_gradient(scale_and_clip, factor, bound, x=_X, dy=_DY):
    with tf.GradientTape() as tape:
        tape.watch(x)
        y = scale_and_clip(x, factor, bound)
        y = None if y is None else tf.convert_to_tensor(y, dtype=tf.float32)
    gradient = None if y is None else tape.gradient(y, x, output_gradients=dy)
    return y, gradient


@self_check
def check_exercise_1(scale_and_clip, *, seed: int | None = None) -> str:
    """Checks ``scale_and_clip(x, factor, bound)``: forward ``x`` bitwise, gradient ``clip(factor·dy)``.

    The upstream gradient ``dy`` is chosen (not 1), so a ``grad`` that ignores ``dy`` is caught, and
    so is the wrong order ``factor · clip(dy)``. Never raises: a failing answer prints what to fix.
    No structural test of the technique is needed: ``clip(factor * dy)`` is not linear in ``dy``, and
    TensorFlow's own gradients are, so only a custom gradient (the learner's or gradlab's) passes.
    With ``seed`` (the instructor edition's held-out cases) it tries inputs drawn from it instead.
    """
    x, upstream, settings = (_X, _DY, _SETTINGS) if seed is None else _held_out(seed)
    for factor, bound in settings:
        with running(f"scale_and_clip(x, {factor}, {bound})"):
            y, gradient = _forward_and_gradient(scale_and_clip, factor, bound, x, upstream)
        if y is None:
            raise NotYet(_("scale_and_clip returned None. Return op(x), the value of your custom op."))
        if y.shape != x.shape or not np.array_equal(_bits(y), _bits(x)):
            raise NotYet(_("the forward value changed. For x = {x} you return {y};\n"
                           "it must be x, bit for bit (return tf.identity(x) as the value).").format(x=x.numpy(), y=y.numpy()))
        if gradient is None:
            raise NotYet(_("no gradient reaches x (tape.gradient returned None). Return the "
                           "custom op's value, with its grad, and do not cut the path with tf.stop_gradient."))
        got = gradient.numpy()
        dy = upstream.numpy()
        expected = np.clip(np.float32(factor) * dy, -bound, bound)
        if np.allclose(got, expected, rtol=1e-6, atol=0.0):
            continue
        if np.allclose(got, dy):
            hint = _("your grad returns dy unchanged (the starting point): apply the rule to it.")
        elif np.allclose(got, np.float32(factor) * np.clip(dy, -bound, bound)):
            hint = _("you clipped first, then scaled, so the result can leave [-bound, bound]. "
                     "Scale dy first, then clip.")
        elif np.allclose(got, np.clip(np.full_like(dy, factor), -bound, bound)):
            hint = _("your grad ignores dy: the rule must be applied to the upstream gradient dy.")
        elif np.allclose(got, np.float32(factor) * dy):
            hint = _("you scaled dy but did not clip it: the result must stay in [-bound, bound].")
        elif np.allclose(got, np.clip(dy, -bound, bound)):
            hint = _("you clipped dy but did not scale it by factor first.")
        elif np.allclose(got, -expected):
            hint = _("the sign is flipped: scale by factor itself, not by -factor.")
        else:
            hint = _("the backward rule is clip(factor * dy, -bound, bound).")
        raise NotYet(_("with factor={factor}, bound={bound} and upstream dy = {dy},\n"
                       "x receives {got};\nexpected   {expected}.\nHint: {hint}").format(
                         factor=factor, bound=bound, dy=dy, got=got, expected=expected, hint=hint))
    return _("The forward value is x, bit for bit, and x receives clip(factor * dy, -bound, "
             "bound) for every setting tried.")


@self_check
def check_exercise_2(your_answer) -> str:
    """Checks a prediction of dL/dx at x = 0 for ``L = gradlab.clip_gradient(2 sin x, -1, 1)``."""
    if your_answer is None:
        raise NotYet(_("set your_answer to a number first."))
    if isinstance(your_answer, (bool, np.bool_)) or not isinstance(your_answer, (numbers.Real, np.ndarray, tf.Tensor)):
        raise NotYet(_("your_answer should be a number, e.g. 0.5; got {type} {value}.").format(
            type=type(your_answer).__name__, value=repr(your_answer)))
    try:
        answer = float(your_answer)
    except (TypeError, ValueError):
        raise NotYet(_("your_answer should be one number; got {value}.").format(value=repr(your_answer))) from None
    x = tf.constant(0.0)
    with tf.GradientTape() as tape:
        tape.watch(x)
        L = gradlab.clip_gradient(2.0 * tf.sin(x), -1.0, 1.0)
    truth = float(tape.gradient(L, x))
    if np.isclose(answer, truth):
        return _("dL/dx = {truth}. The clip is the last op, so the first gradient it sees "
                 "is the starting dL/dL = 1.0,\nalready inside [-1, 1]: it passes unchanged, and "
                 "2 sin(x) then multiplies it by 2 cos(0) = 2.").format(truth=f"{truth:.1f}")
    if np.isclose(answer, 1.0):
        raise NotYet(_("1.0 is the answer when the clip sits on x, before sin (the plot of section 7). "
                       "Here it sits after sin.\nWhich upstream gradient reaches it first in the backward pass?"))
    if np.isclose(answer, 0.0):
        raise NotYet(_("0.0 would mean the clip stops the gradient, but clip_gradient bounds a gradient "
                       "to [-1, 1];\nit does not cut it. What reaches the clip, and what does 2 sin(x) "
                       "do to it?"))
    if answer < 0:
        raise NotYet(_("{answer} has the wrong sign: the clip keeps the sign of the gradient it "
                       "bounds, and sin x increases at x = 0.\nFollow the backward pass from L: what "
                       "reaches the clip, and what does 2 sin(x) do to it?").format(answer=answer))
    raise NotYet(_("{answer} is not it. Follow the backward pass from L: what reaches the clip, "
                   "and what does 2 sin(x) do to it?").format(answer=answer))
