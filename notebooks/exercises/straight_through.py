"""Self-checks for notebook 02 (stop_gradient and straight-through estimators)."""
from __future__ import annotations

import numpy as np
import tensorflow as tf

from exercises._harness import NotYet, running, self_check
from exercises._i18n import _

__all__ = ["check_exercise_1", "check_exercise_2", "quantize"]

CASES = ("flows", "none", "missing")


def quantize(t, bits: int = 4):
    """The notebook's k-bit quantizer on [-1, 1] (DoReFa): 2 * q((clip(t, -1, 1) + 1) / 2) - 1.

    q(r) = round(n * r) / n with n = 2**bits - 1, so the 2**bits levels run from -1 to 1 in steps of
    2 / n: -1, -13/15, ..., 13/15, 1 for 4 bits.
    """
    n = 2 ** bits - 1
    r = (tf.clip_by_value(t, -1.0, 1.0) + 1.0) / 2.0
    return 2.0 * (tf.round(r * n) / n) - 1.0


def _image(t):
    return tf.reshape(t, [1, 2, 2, 1])


# (label shown to the learner, function, input). None of them is the notebook's own example.
_OPS = (
    ("tf.tanh", tf.tanh, [0.3, -1.2, 2.0, 0.5]),
    ("tf.sign", tf.sign, [0.3, -1.2, 2.0, 0.5]),
    ("tf.math.ceil", tf.math.ceil, [0.3, -1.2, 2.0, 0.5]),
    ("tf.math.rint", tf.math.rint, [0.3, -1.2, 2.0, 0.5]),
    ("tf.image.resize(..., method='area')",
     lambda t: tf.image.resize(_image(t), [1, 1], method="area"), [0.3, -1.2, 2.0, 0.5]),
    ("tf.abs", tf.abs, [0.3, -1.2, 2.0, 0.5]),
)


class _Op:
    """An op of the second case: called like the function it wraps, shown by its label (a lookup keyed by
    the first case's functions misses it, and its ``KeyError`` names it without a memory address)."""

    def __init__(self, label: str, fn) -> None:
        self.label, self.fn = label, fn

    def __call__(self, t):
        return self.fn(t)

    def __repr__(self) -> str:
        return self.label


def _other_ops():
    """The second case: other ops on other (seeded) inputs, their cases in another order than ``_OPS``'s
    (flows, flows, none, none, missing, flows), so that an answer that looks the case up by op or by the
    order of the calls is refused."""
    values = np.round(np.random.default_rng(21).uniform(-2.0, 2.0, 6), 2).tolist()
    ops = (
        ("tf.unique(x)[0]", lambda t: tf.unique(t)[0]),                                           # missing
        ("tf.math.floor", tf.math.floor),                                                          # none
        ("tf.nn.relu", tf.nn.relu),                                                                # flows
        ("tf.image.adjust_saturation(..., 0.5)",
         lambda t: tf.image.adjust_saturation(tf.reshape(t, [1, 2, 3]), 0.5)),                     # missing
        ("tf.cast(tf.cast(x, tf.int32), tf.float32)", lambda t: tf.cast(tf.cast(t, tf.int32), t.dtype)),  # none
        ("tf.square", tf.square),                                                                  # flows
    )
    return tuple((label, _Op(label, fn), values) for label, fn in ops)


def _held_out_ops(seed: int):
    """The held-out cases (the instructor edition's ``seed``): every op of both public cases, wrapped as in the
    second one, each on inputs drawn from ``seed``, in an order drawn from it."""
    rng = np.random.default_rng(seed)
    pool = [(label, fn, len(values)) for label, fn, values in _OPS]
    pool += [(label, op.fn, len(values)) for label, op, values in _other_ops()]
    return tuple((label, _Op(label, fn), np.round(rng.uniform(-2.0, 2.0, size), 2).tolist())
                 for label, fn, size in (pool[i] for i in rng.permutation(len(pool))))


def _gradient(fn, x):
    """``("flows", gradient)``, ``("none", None)`` or ``("missing", None)``: what tape.gradient does."""
    with tf.GradientTape() as tape:
        tape.watch(x)
        y = fn(x)
    try:
        gradient = tape.gradient(y, x)
    except LookupError:
        return "missing", None
    return ("none", None) if gradient is None else ("flows", gradient)


def _truth(fn, x) -> str:
    return _gradient(fn, x)[0]


def _why(truth: str, gradient) -> str:
    if truth == "flows":
        if not np.any(gradient.numpy()):
            return _("tape.gradient returns the tensor {gradient} for it (all zeros: a zero gradient still flows): "
                     "say 'flows'").format(gradient=np.asarray(gradient.numpy()))
        return _("tape.gradient returns the tensor {gradient} for it: say 'flows'").format(
            gradient=np.asarray(gradient.numpy()))
    if truth == "none":
        return _("its op registers a gradient that returns None, so tape.gradient returns None: say 'none'")
    return _("its op registers no gradient at all, so tape.gradient raises LookupError: catch it "
             "and say 'missing'")


@self_check
def check_exercise_1(gradient_case, *, seed: int | None = None) -> str:
    """Checks ``gradient_case(fn, x)``, which must return 'flows', 'none' or 'missing'.

    'flows': ``tape.gradient`` returns a tensor (zeros count); 'none': it returns None (the op's
    registered gradient returns None); 'missing': it raises LookupError (no gradient registered).
    The truth is found by running each op, on ops the notebook does not show; a second case (other ops
    on other inputs, their cases in another order) refuses a lookup by op or by the order of the calls.
    With ``seed`` (the instructor edition's held-out cases) it tries the ops of both cases on inputs
    drawn from it, in an order drawn from it.
    """
    for name, fn, values in _OPS + _other_ops() if seed is None else _held_out_ops(seed):
        x = tf.constant(values, tf.float32)
        truth, gradient = _gradient(fn, x)
        try:
            with running(_("for {name} your function").format(name=name)):
                answer = gradient_case(fn, x)
        except NotYet as not_yet:
            if isinstance(not_yet.__cause__, KeyError) and isinstance(fn, _Op):
                raise NotYet(f"{not_yet}.\n" + _("The first ops passed; this one is another op: does gradient_case "
                                                  "look the case up in a table?\nFind it by running fn on x, whatever "
                                                  "the op.")) from None
            if not isinstance(not_yet.__cause__, LookupError):
                raise
            raise NotYet(f"{not_yet}.\n" + _("Which of section 2's three cases is that, and how can gradient_case "
                                              "report it instead of raising?")) from None
        if not isinstance(answer, str) or answer.strip().lower() not in CASES:
            raise NotYet(_("for {name} your function returned {answer!r}; return one of {cases}.").format(
                name=name, answer=answer, cases=CASES))
        if answer not in CASES:
            raise NotYet(_("for {name} your function returned {answer!r}; return exactly one of {cases} "
                           "(lower case, no spaces).").format(name=name, answer=answer, cases=CASES))
        if answer != truth:
            raise NotYet(_("for {name} at x = {x} you return {answer!r},\nbut {why}.").format(
                name=name, x=np.asarray(values), answer=answer, why=_why(truth, gradient)))
    names = ", ".join(f"{name}: {_truth(fn, tf.constant(values))}" for name, fn, values in _OPS)
    return (f"{names}.")


def _bits(a: np.ndarray) -> np.ndarray:
    return np.asarray(a, np.float32).view(np.uint32)


def _check_exercise_2_case(ste, seed: int | tuple[int, int], other: str) -> None:
    """One case of :func:`check_exercise_2`: 100,000 inputs and upstream gradients drawn with ``seed``.

    ``other`` is "" for the first case; the second case's messages start with it, and after the
    first case passed, a wrong number there means numbers fixed in advance: its hint says so.
    """
    rng = np.random.default_rng(seed)
    signs = rng.choice(np.array([-1.0, 1.0]), 100_000)
    x = tf.constant((signs * 10.0 ** rng.uniform(-3.0, 9.0, 100_000)).astype(np.float32))
    dy = tf.constant(rng.uniform(0.5, 2.0, 100_000).astype(np.float32))
    fixed = _("\nThe first 100,000 inputs passed: does your answer compute from the x and dy it receives,\n"
              "or return numbers fixed in advance?")
    with running():
        with tf.GradientTape() as tape:
            tape.watch(x)
            y = ste(x)
            y = None if y is None else tf.convert_to_tensor(y, tf.float32)
        gradient = None if y is None else tape.gradient(y, x, output_gradients=dy)
    if y is None or y.shape != x.shape:
        raise NotYet(other + _("return a tensor of x's shape {shape}; got {got}.").format(
            shape=x.shape, got=None if y is None else y.shape))
    exact, value = quantize(x).numpy(), y.numpy()
    differ = _bits(value) != _bits(exact)
    if differ.any():
        zeros = int(np.sum(differ & (value == 0) & (exact == 0)))
        numbers = int(differ.sum()) - zeros
        parts = [_("{numbers:,d} different numbers (by up to {by:.3g})").format(
            numbers=numbers, by=np.abs(value - exact).max())] if numbers else []
        parts += [_("{zeros:,d} zeros of the wrong sign (-0.0 versus +0.0)").format(zeros=zeros)] if zeros else []
        i = int(np.argmax(differ & ~((value == 0) & (exact == 0)))) if numbers else int(np.argmax(differ))
        hint = fixed if other else _("\nThe trick b + tf.stop_gradient(f - b) rounds (see the Deep dive). Which "
                                     "technique of\nsection 5 returns f(x) bitwise, with any b?")
        raise NotYet(other + _("{count:,d} of 100,000 bit patterns differ from quantize(x): {parts};\n"
                               "for instance at x = {x} you return {got}, quantize(x) is {exact}.").format(
            count=int(differ.sum()), parts=_(" and ").join(parts), x=_number(x.numpy()[i]), got=_number(value[i]),
            exact=_number(exact[i])) + hint)
    if gradient is None:
        raise NotYet(other + _("the value is exact, but no gradient reaches x (None). Which term carries it?"))
    gradient = gradient.numpy()
    inside = np.abs(x.numpy()) <= 1.0
    expected = np.where(inside, dy.numpy(), 0.0).astype(np.float32)
    if gradient.shape == expected.shape and np.array_equal(gradient, expected):
        return
    if gradient.shape != expected.shape:
        raise NotYet(other + _("x has shape {shape}, but it receives a gradient of shape {got}.").format(
            shape=x.shape, got=gradient.shape))
    wrong = gradient != expected
    i = int(np.argmax(wrong))
    example = _("at x = {x} with dy = {dy}, x receives {got}; expected {expected}").format(
        x=_number(x.numpy()[i]), dy=_number(dy.numpy()[i]), got=_number(gradient[i]), expected=_number(expected[i]))
    wrong_at = _("the gradient is wrong at {count:,d} of 100,000 inputs, for instance\n{example}.").format(
        count=int(wrong.sum()), example=example)
    if other:
        raise NotYet(other + wrong_at + fixed)
    elif np.array_equal(gradient, dy.numpy()):
        raise NotYet(_("the gradient is dy everywhere, the identity's (as with tf.grad_pass_through):\n{example}.\n"
                       "The saturating STE sends 0 where |x| > 1: use the hard tanh as the backward "
                       "function.").format(example=example))
    elif np.array_equal(gradient, inside.astype(np.float32)):
        raise NotYet(_("the gradient is 1 where |x| <= 1, whatever dy is:\n{example}.\n"
                       "Does your grad multiply by dy? (notebook 01)").format(example=example))
    elif not gradient.any():
        raise NotYet(_("the gradient is all zeros: {example}.\n"
                       "It must come from the backward function, the hard tanh.").format(example=example))
    else:
        raise NotYet(wrong_at + _("\nExpected: dy where |x| <= 1 and 0 outside, the hard tanh's gradient times dy."))


@self_check
def check_exercise_2(ste, *, seed: int | None = None) -> str:
    """Checks ``ste(x)``: value bitwise ``quantize(x)``, gradient ``dy`` where |x| <= 1 and 0 outside.

    Run on 100,000 seeded inputs whose magnitudes spread evenly over 10**-3 to 10**9 on a log
    scale, with an upstream gradient ``dy`` that is not 1, so that a value off by one ulp, a zero of
    the wrong sign or a 1 lost in ``x + (quantize(x) - x)`` for |x| > 2**24, the identity's gradient,
    and a ``grad`` that forgets ``dy`` are all caught. A second case, 100,000 other inputs and
    upstream gradients, refuses an answer that returns the first case's numbers. With ``seed`` (the
    instructor edition's held-out cases) it tries 100,000 inputs and upstream gradients drawn from it instead.
    """
    if seed is not None:
        _check_exercise_2_case(ste, (2, seed), "")
        return _("On 100,000 inputs every value is bitwise quantize(x), and dy passes only where |x| <= 1.")
    _check_exercise_2_case(ste, 2, "")
    _check_exercise_2_case(ste, 3, _("on 100,000 other inputs, "))
    return _("On two sets of 100,000 inputs every value is bitwise quantize(x), and dy passes only where\n"
             "|x| <= 1.")


def _number(value) -> str:
    """A float32 as it is (up to 9 significant digits: enough to tell two float32 apart)."""
    return f"{float(value):.9g}"
