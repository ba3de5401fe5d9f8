"""Self-checks for notebook 08 (second derivatives and forward mode)."""
from __future__ import annotations

import numbers

import numpy as np
import tensorflow as tf

import gradlab

from exercises._harness import NotYet, first_hint, first_line, running, self_check, shown
from exercises._i18n import _

__all__ = ["check_exercise_1", "check_exercise_2", "check_exercise_3"]


def _second_derivative(fn, x: tf.Tensor) -> float:
    """f''(x) of a scalar fn by two nested tapes (reverse over reverse)."""
    with tf.GradientTape() as outer:
        outer.watch(x)
        with tf.GradientTape() as inner:
            inner.watch(x)
            y = fn(x)
        first = inner.gradient(y, x)
    return float(outer.gradient(first, x))


def _number(name: str, value) -> float:
    if isinstance(value, (bool, np.bool_)) or not isinstance(value, (numbers.Real, np.ndarray, np.generic, tf.Tensor)):
        raise NotYet(_("both answers should be numbers; {name} is {type} {value!r}.").format(
            name=name, type=type(value).__name__, value=value))
    try:
        return float(value)
    except (TypeError, ValueError):
        raise NotYet(_("both answers should be numbers; {name} is {value!r}.").format(name=name, value=value)) from None


@self_check
def check_exercise_1(on_input, on_output) -> str:
    """Checks predictions of d²y/dx² at x = 1.5 for ``scale_gradient(x, 3) ** 2`` and ``scale_gradient(x ** 2, 3)``.

    On the input the factor 3 is applied at both backward passes (3 · 3 · 2 = 18); on the output it
    multiplies the constant starting gradient once (3 · 2 = 6). A "Not yet" says which prediction
    is off and what it amounts to (f'' alone, the first derivative, the factor once or twice), and
    never states either answer.

    No held-out cases (no ``seed``): the answer is a prediction of two numbers for the two expressions
    the exercise states, so there is no other input to try it on; the instructor edition grades it by
    this check alone.
    """
    if on_input is None or on_output is None:
        raise NotYet(_("replace both None with your predictions (numbers)."))
    on_input, on_output = _number("on_input", on_input), _number("on_output", on_output)
    x = tf.constant(1.5)
    truth_in = _second_derivative(lambda s: gradlab.scale_gradient(s, 3.0) ** 2, x)
    truth_out = _second_derivative(lambda s: gradlab.scale_gradient(s ** 2, 3.0), x)
    right_in, right_out = np.isclose(on_input, truth_in), np.isclose(on_output, truth_out)
    if right_in and right_out:
        return _("{on_input:.1f} on the input (3 * 3 * 2: the second differentiation passes the op again)\n"
                 "and {on_output:.1f} on the output (3 * 2: it multiplies the constant starting gradient once).").format(
                     on_input=truth_in, on_output=truth_out)
    if np.isclose(on_input, truth_out) and np.isclose(on_output, truth_in):
        raise NotYet(_("on_input = {on_input:g} and on_output = {on_output:g}: you swapped them. Which placement "
                       "does\nthe second differentiation pass through?").format(on_input=on_input, on_output=on_output))
    first_derivative = 3.0 * 2.0 * 1.5          # the same for both placements: 3 * 2x at x = 1.5
    for name, value, right in (("on_input", on_input, right_in), ("on_output", on_output, right_out)):
        if right:
            continue
        if np.isclose(value, first_derivative):
            raise NotYet(_("({name}): {value:g} is the first derivative, dy/dx at x = 1.5. The exercise asks for "
                           "the second,\nd²y/dx²: differentiate once more.").format(name=name, value=value))
        if np.isclose(value, 2.0):
            raise NotYet(_("({name}): {value:g} is f'' of x^2 with no factor at all, but the op multiplies "
                           "every gradient that\npasses through it by 3. Count how many times the factor 3 is "
                           "applied.").format(name=name, value=value))
    if not right_in:  # the first wrong prediction; "other" is the other placement's value
        name, value, other = "on_input", on_input, truth_out
        amounts_to = _("({name}): {value:g} applies the factor 3 once. The first derivative 3 * 2s depends on x "
                       "through\ns, the op's output. Differentiating it again goes back through the op. What does "
                       "the op do on the way?")
        otherwise = _("({name}): {value:g} is not it. f(x) = x^2 has f'' = 2 at every x. Count how many times the "
                      "factor 3\nis applied on the way back to x, in each of the two backward passes.")
    else:
        name, value, other = "on_output", on_output, truth_in
        amounts_to = _("({name}): {value:g} applies the factor 3 twice. On the output, the op multiplies the "
                       "starting\ngradient dL/dy = 1, which does not depend on x. Does the second differentiation "
                       "pass through the op?")
        otherwise = _("({name}): {value:g} is not it. f(x) = x^2 has f'' = 2 at every x. Count how many times the "
                      "factor 3\nis applied when the op sits on the output.")
    raise NotYet(first_hint((np.isclose(value, other), amounts_to), otherwise=otherwise).format(name=name, value=value))


def _detached(rule):
    """An identity whose value carries no tangent and whose backward pass sends ``rule(dy)`` (section 8)."""
    @tf.custom_gradient
    def op(t):
        return tf.stop_gradient(t), rule
    return op


def _transposed(fn, x, u, *, upstream=None):
    """The reference: differentiate the VJP with respect to a watched ``w = 1`` (``upstream``: the
    ``output_gradients`` of that second differentiation; ``None`` forgets them)."""
    with tf.GradientTape() as outer:
        with tf.GradientTape() as inner:
            inner.watch(x)
            y = fn(x)
        w = tf.ones_like(y)
        outer.watch(w)
        vjp = inner.gradient(y, x, output_gradients=w)
    transposed = outer.gradient(vjp, w, output_gradients=upstream)
    return None if transposed is None else transposed.numpy()


def _vjp(fn, x, w):
    with tf.GradientTape() as tape:
        tape.watch(x)
        y = fn(x)
    return tape.gradient(y, x, output_gradients=w).numpy()


def _forward_mode(fn, x, u):
    with tf.autodiff.ForwardAccumulator(primals=x, tangents=u) as accumulator:
        y = fn(x)
    return accumulator.jvp(y, unconnected_gradients=tf.UnconnectedGradients.ZERO).numpy()


def _hint(name, fn, x, u, result) -> str:
    """The typical mistake a wrong ``result`` on the case ``name`` matches, or "" if none."""
    def same(other):
        return other is not None and np.allclose(result, other, rtol=1e-5, atol=1e-6)
    if same(u.numpy()) and name == "tf.sin":
        return _("That is u, the tangent unchanged (the starting point).")
    if same(u.numpy()) and name != "detached: clip_by_norm(dy, 1)":
        return _("That is u, the JVP of a plain identity: forward mode (ForwardAccumulator) ignores the\n"
                 "gradient op (section 7). Transpose the VJP by hand.")
    if same(_transposed(fn, x, u, upstream=None)):
        return _("That is J times ones: pass output_gradients=u to the second differentiation (with respect to w).")
    if same(_vjp(fn, x, tf.ones_like(x)) * u.numpy()):
        return _("That is the VJP of ones times u, which is J u only when J is diagonal (an elementwise\n"
                 "function). Differentiate the VJP with respect to the watched w instead.")
    if same(_vjp(fn, x, u)):
        return _("That is the VJP J^T u (reverse mode), not the JVP J u. Transpose it: differentiate with respect to w.")
    if same(_forward_mode(fn, x, u)):
        return _("That is what ForwardAccumulator gives here. Transpose the VJP by hand instead.")
    if name == "detached: clip_by_norm(dy, 1)":
        return _("This rule is not linear in dy, so only the transposed VJP gives this answer: its derivative at\n"
                 "w = 1 (section 8). You found J u another way (a Jacobian, or forward mode?): differentiate\n"
                 "the VJP with respect to the watched w, with output_gradients=u.")
    return ""


def _check_exercise_2_case(jvp_by_transposing, x, u, first: dict) -> dict:
    """One case of :func:`check_exercise_2`, at ``x`` with the tangent ``u``; returns the expected JVPs by name.

    ``first`` holds the first case's expected JVPs (empty for the first case itself): an answer that
    returns them on the second case is told so.
    """
    w_hat = np.ones(3) / np.sqrt(3.0)
    cases = {
        "tf.sin": (tf.sin, np.cos(x.numpy()) * u.numpy()),
        "scale_gradient(x, 5)": (lambda t: gradlab.scale_gradient(t, 5.0), 5.0 * u.numpy()),
        "surrogate_step(x)": (gradlab.surrogate_step, np.maximum(0.0, 1.0 - np.abs(x.numpy())) * u.numpy()),
        "tf.cumsum(scale_gradient(x, 5))": (lambda t: tf.cumsum(gradlab.scale_gradient(t, 5.0)),
                                            5.0 * np.cumsum(u.numpy())),
        "detached: clip_by_norm(dy, 1)": (_detached(lambda dy: tf.clip_by_norm(dy, 1.0)),
                                         (u.numpy() - w_hat * (w_hat @ u.numpy())) / np.sqrt(3.0)),
    }
    for name, (fn, expected) in cases.items():
        with running(_("on {name} your function").format(name=name)):
            result = jvp_by_transposing(fn, x, u)
            result = None if result is None else np.asarray(result, np.float64)
        if result is None:
            raise NotYet(_("on {name} your function returned None. Did the outer tape watch w, and does\n"
                           "the VJP depend on w (output_gradients=w in the inner gradient)?").format(name=name))
        if result.shape != expected.shape:
            raise NotYet(_("on {name}, with x and u of shape {shape}, your function returns shape "
                           "{got}:\nthe JVP has the shape of y.").format(name=name, shape=tuple(x.shape), got=result.shape))
        if not np.allclose(result, expected, rtol=1e-5, atol=1e-6):
            hint = _hint(name, fn, x, u, result)
            if not hint and name in first and np.allclose(result, first[name], rtol=1e-5, atol=1e-6):
                hint = _("That is the JVP at the first x and u, which passed: compute it from the fn, x and u "
                         "you are given.")
            raise NotYet(_("on {name}, at x = {x} with u = {u},\nyou get {got}; the transpose of reverse mode is "
                           "{expected}.").format(name=name, x=x.numpy(), u=u.numpy(), got=np.round(result, 4) + 0.0,
                                                 expected=np.round(expected, 4) + 0.0)
                         + (f"\n{hint}" if hint else ""))
    return {name: expected for name, (fn, expected) in cases.items()}


@self_check
def check_exercise_2(jvp_by_transposing, *, seed: int | None = None) -> str:
    """Checks ``jvp_by_transposing(fn, x, u)`` against the transpose of reverse mode on five functions.

    The right answer differentiates the VJP ``J^T w`` with respect to a watched ``w = 1`` (with
    ``output_gradients=u``), which gives ``J u`` for every rule linear in ``dy``. A cumulative sum
    (a Jacobian that is not diagonal) refuses "the gradient times u" and the VJP ``J^T u``; a
    rule that is not linear in ``dy`` (section 8's ``clip_by_norm``), whose transpose is its
    derivative at ``w = 1``, refuses answers that reach ``J u`` without transposing (a Jacobian).
    A second case, at another x with another u, refuses an answer that returns the first case's numbers.
    With ``seed`` (the instructor edition's held-out cases) it tries one x and u drawn from it instead.
    """
    x = tf.constant([0.3, -0.6, 1.2])
    u = tf.constant([1.0, 2.0, 3.0])
    if seed is None:
        first = _check_exercise_2_case(jvp_by_transposing, x, u, {})
        rng = np.random.default_rng(15)                                    # copied numbers fail here
    else:
        first, rng = {}, np.random.default_rng(seed)
    _check_exercise_2_case(jvp_by_transposing, tf.constant(np.round(rng.uniform(-1.5, 1.5, 3), 2), tf.float32),
                           tf.constant(np.round(rng.uniform(-3.0, 3.0, 3), 1), tf.float32), first)
    source_rule = _detached(lambda dy: tf.maximum(0.0, 1.0 - tf.abs(x)))    # answer 6: ignores dy
    try:
        transposed = jvp_by_transposing(source_rule, x, u)
    except Exception as error:  # the answer passed the real cases; this one is only shown
        transposed = first_line(error)
    return _("Transposing the VJP by hand gives a JVP that respects every linear rule, including\n"
             "scale_gradient, which tf.autodiff.ForwardAccumulator ignores (section 7).\n"
             "The source's non_differentiable rule (ignores dy), transposed: {transposed}").format(transposed=transposed)


# --- exercise 3: diagnose three broken functions -----------------------------------------------------

#: The public case: inputs with 0, small and tiny positive numbers (1e-37 is a normal float32: an epsilon
#: or a clamp of x moves log's value there), negatives and a tie of the rounding (x * 4 = 2.5), and an
#: upstream gradient that is not 1.
_X3 = (-2.0, -0.5, 0.0, 1e-6, 1e-37, 0.3, 0.625, 1.7)
_DY3 = (0.5, -1.0, 2.0, 1.5, -0.5, -0.25, 0.75, 1.25)


def _broken_quantized(x):
    return tf.round(x * 4.0) / 4.0


def _broken_smooth_abs(x):
    return tf.constant(np.sqrt(x.numpy() ** 2 + 1.0))


def _broken_log_or_zero(x):
    return tf.where(x > 0.0, tf.math.log(x), 0.0)


def _held_out_3(seed: int):
    """Other inputs and upstream gradients drawn from ``seed``, again with 0, a small and a tiny positive number."""
    rng = np.random.default_rng(seed)
    size = int(rng.integers(6, 10))
    x = np.round(rng.uniform(-3.0, 3.0, size), 3)
    x[:3] = (0.0, 10.0 ** -rng.uniform(5.0, 7.0), 10.0 ** -rng.uniform(30.0, 37.0))
    rng.shuffle(x)
    dy = np.round(rng.uniform(0.25, 2.0, size) * rng.choice([-1.0, 1.0], size), 2)
    return tuple(x.tolist()), tuple(dy.tolist())


def _value_and_gradient(fn, name: str, x: tf.Tensor, dy: tf.Tensor):
    with running(f"{name}(x)"):
        with tf.GradientTape() as tape:
            tape.watch(x)
            y = fn(x)
            y = None if y is None else tf.convert_to_tensor(y, tf.float32)
    if y is None or y.shape != x.shape:
        raise NotYet(_("{name}(x) must return a tensor of x's shape {shape}; got {got}.").format(
            name=name, shape=x.shape, got=None if y is None else y.shape))
    with running(_("the gradient of {name}(x)").format(name=name)):
        gradient = tape.gradient(y, x, output_gradients=dy)
    return y.numpy(), None if gradient is None else tf.convert_to_tensor(gradient).numpy()


def _ask(name: str, x: np.ndarray) -> str:
    values = [float(f"{v:.7g}") + 0.0 for v in x]
    return _("What does gradlab.explain_gradient({name}, x) say, with x = tf.constant({values})?").format(
        name=name, values=values)


def _check_one(name: str, fn, want_value: np.ndarray, want_gradient: np.ndarray, x: np.ndarray, dy: np.ndarray,
               mistakes, moved: str | None = None) -> None:
    """One function of exercise 3: its value where it is defined, a gradient that is there, finite and right.

    ``moved`` is said when the value changed at a positive x below 1e-3 (what an epsilon or a clamp does);
    by default, and at other x, "keep the forward value".
    """
    keep = _("Keep the forward value; change only what the backward pass gets.")
    value, gradient = _value_and_gradient(fn, name, tf.constant(x, tf.float32), tf.constant(dy, tf.float32))
    changed = ~np.isclose(value, want_value, rtol=1e-5, atol=1e-7)
    if changed.any():
        i = int(np.argmax(changed))
        small = 0.0 < x[i] < 1e-3
        raise NotYet(_("{name} changed its value: at x = {x:.7g} it returns {got:.7g}, the original "
                       "{want:.7g}.").format(name=name, x=x[i], got=value[i], want=want_value[i]) + "\n"
                     + ((moved or keep) if small else keep))
    if gradient is None:
        raise NotYet(_("no gradient reaches x through {name} (tape.gradient returns None). {ask}").format(
            name=name, ask=_ask(name, x)))
    if not np.all(np.isfinite(gradient)):
        i = int(np.argmax(~np.isfinite(gradient)))
        raise NotYet(_("{name}'s gradient holds {got} at x = {x:.7g} (where the original's value is "
                       "{want:.7g}). {ask}").format(name=name, got=gradient[i], x=x[i], want=want_value[i],
                                                    ask=_ask(name, x)))
    if np.allclose(gradient, want_gradient, rtol=1e-5, atol=1e-6):
        return
    wrong = ~np.isclose(gradient, want_gradient, rtol=1e-5, atol=1e-6)
    i = int(np.argmax(wrong))
    hint = first_hint(*[(shows(gradient, x, dy), text) for shows, text in mistakes],
                      otherwise=_("Compare with the gradient asked for in the exercise."))
    raise NotYet(_("{name}: with upstream dy = {dy},\nx receives {got};\nexpected   {expected} (first difference "
                   "at x = {x:.7g}: {got_i:.7g}, not {want_i:.7g}).").format(
                       name=name, dy=shown(dy), got=shown(gradient), expected=shown(want_gradient), x=x[i],
                       got_i=gradient[i], want_i=want_gradient[i]) + f"\n{hint}")


@self_check
def check_exercise_3(quantized, smooth_abs, log_or_zero, *, seed: int | None = None) -> str:
    """Checks the three repaired functions: each keeps its value, and its gradient is there, finite and right.

    ``quantized`` still rounds to quarters and passes the upstream gradient straight through (the
    identity's gradient: a straight-through estimator); ``smooth_abs`` is sqrt(x**2 + 1) with its
    gradient x / sqrt(x**2 + 1); ``log_or_zero`` is log(x) for x > 0 and 0 elsewhere, with the
    gradient 1 / x for x > 0 and 0 elsewhere, never nan. The inputs hold 0 (where the naive
    tf.where gives nan), small and tiny positive numbers down to 1e-37 (an epsilon added to x, or a
    clamp of x, moves its value there) and a tie of the rounding; the upstream gradient is not 1, so a
    rule that ignores it is caught. With ``seed`` (the instructor edition's held-out cases) it tries inputs drawn from it.
    """
    xs, dys = (_X3, _DY3) if seed is None else _held_out_3(seed)
    x, dy = np.asarray(xs, np.float32), np.asarray(dys, np.float32)
    positive = x > 0
    safe = np.where(positive, x, 1.0)
    _check_one("quantized", quantized, np.round(x * 4.0) / 4.0, dy, x, dy, [
        (lambda g, x, dy: np.allclose(g, np.where(np.abs(x) <= 1.0, dy, 0.0)),
         _("x receives 0 where |x| > 1: that is the saturating estimator (the hard tanh); this one passes dy "
           "everywhere.")),
        (lambda g, x, dy: np.allclose(g, 4.0 * dy), _("x receives 4 dy: the backward function should have slope 1.")),
        (lambda g, x, dy: np.allclose(g, dy / 4.0),
         _("x receives dy/4: a division after the estimator scales its gradient too.")),
        (lambda g, x, dy: np.allclose(g, np.ones_like(dy)), _("x receives 1 whatever dy is: multiply by dy.")),
        (lambda g, x, dy: not g.any(), _("x receives zeros: the gradient must come from a backward function of x.")),
    ])
    _check_one("smooth_abs", smooth_abs, np.sqrt(x.astype(np.float64) ** 2 + 1.0), dy * x / np.sqrt(x ** 2 + 1.0),
               x, dy, [
        (lambda g, x, dy: np.allclose(g, x / np.sqrt(x ** 2 + 1.0)), _("x receives the derivative whatever dy is: "
         "multiply by dy.")),
        (lambda g, x, dy: np.allclose(g, dy), _("x receives dy unchanged: that is the identity's gradient, not "
         "sqrt(x**2 + 1)'s.")),
        (lambda g, x, dy: np.allclose(g, dy * 2.0 * x), _("x receives 2x dy: that is the derivative of x**2 + 1 only; "
         "the square root's own derivative is missing.")),
    ])
    _check_one("log_or_zero", log_or_zero, np.where(positive, np.log(safe), 0.0), np.where(positive, dy / safe, 0.0),
               x, dy, [
        (lambda g, x, dy: np.allclose(g, np.where(x > 0, 1.0 / np.where(x > 0, x, 1.0), 0.0)),
         _("x receives the derivative whatever dy is: multiply by dy.")),
    ], moved=_("At so small an x, an epsilon added to x or a clamp of x moves log's value: "
               "which inputs does the log need protecting from?"))
    return _("quantized keeps its quarters and passes dy straight through, smooth_abs has\n"
             "the gradient of sqrt(x**2 + 1), and log_or_zero sends back no nan, also at x = 0.")
