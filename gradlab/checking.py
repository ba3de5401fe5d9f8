"""``check_gradient``: does a function's autodiff gradient say what it should?

:func:`check_gradient` runs in steps, one function each: validate the arguments, draw the random
upstream gradient, compute autodiff's vector-Jacobian products, build the reference (finite
differences, from ``_finite_differences``, or your ``reference``), reach the verdict (the
scale-aware comparison of ``_comparison``), word it, and with ``order=2`` check the gradient's own
gradient.
"""
from __future__ import annotations

import dataclasses
import numbers
from typing import Callable, Optional, Tuple

import numpy as np
import tensorflow as tf

from gradlab import _comparison as cmp
from gradlab import _finite_differences as fd
from gradlab import _validation as v

__all__ = ["check_gradient", "GradientCheck"]

# Default tolerances per dtype of x: the autodiff gradient is computed in x's dtype, so it carries
# that dtype's rounding; finite differences are taken in float64 whenever fn accepts it.
_TOLERANCES = {
    tf.float64: (1e-5, 1e-5),
    tf.float32: (2e-2, 2e-2),
    tf.float16: (1e-1, 1e-1),
    tf.bfloat16: (2e-1, 2e-1),
}
# The upstream gradients tried: u, 2u, -u and u/1024 (powers of two: scaling is exact). A rule that
# reads dy changes its answer under at least one of them, a clip included (a small dy passes it
# unclipped); one that ignores dy gives the same answer for all four.
_FACTORS = (1.0, 2.0, -1.0, 1.0 / 1024)


@dataclasses.dataclass(frozen=True)
class GradientCheck:
    """The result of :func:`check_gradient`.

    Attributes:
      ok: True when the autodiff gradient matches the reference for every upstream gradient tried
        (``u``, ``2u``, ``-u``, ``u/1024``) and, against finite differences, is linear in the upstream gradient.
      message: a readable verdict saying which of these failed and what to look at.
      max_error: the largest ``|autodiff - reference|`` over all elements and upstreams (with
        ``fast=True``, over the directional derivatives along directions whose largest element is 1).
      linear_in_upstream: whether the gradient scales with the upstream gradient ``dy``
        (``VJP(2u) = 2 VJP(u)`` and ``VJP(-u) = -VJP(u)``). A true derivative always does; a
        defined rule such as a clip need not, and is then judged against its ``reference`` only.
      ignores_upstream: True when the gradient does not change at all with ``dy`` although it
        should (the classic bug: a ``grad(dy)`` that never multiplies by ``dy``).
      autodiff: the autodiff vector-Jacobian product under the random upstream ``u``.
      reference: what it should be under ``u``: finite differences, or your ``reference``; None
        with ``fast=True`` against finite differences (only directional derivatives are computed).
      order: 1, or 2 when the gradient of the vector-Jacobian product was checked too.
      second_order_error: with ``order=2``, the largest ``|autodiff - finite differences|`` of the
        gradient of ``w^T (u^T J)`` with respect to ``x`` (a second random upstream ``w``); else None.
      evaluated_in: the dtype name finite differences were evaluated in (``"float64"`` whenever
        ``fn`` accepts a float64 input), or None when no finite differences were needed.
      fast: whether finite differences were taken along two directions only (``fast=True``).
    """

    ok: bool
    message: str
    max_error: float
    linear_in_upstream: bool
    autodiff: np.ndarray = dataclasses.field(repr=False)
    reference: Optional[np.ndarray] = dataclasses.field(repr=False)
    ignores_upstream: bool = False
    order: int = 1
    second_order_error: Optional[float] = None
    evaluated_in: Optional[str] = None
    fast: bool = False

    def __bool__(self) -> bool:
        return self.ok

    def __str__(self) -> str:
        return self.message


def check_gradient(
    fn: Callable[[tf.Tensor], tf.Tensor],
    x,
    *,
    reference: Optional[Callable[[tf.Tensor, tf.Tensor], tf.Tensor]] = None,
    delta: Optional[float] = None,
    rtol: Optional[float] = None,
    atol: Optional[float] = None,
    seed: int = 0,
    order: int = 1,
    fast: bool = False,
) -> GradientCheck:
    """Checks the autodiff gradient of ``fn`` at ``x`` against a reference, under a random upstream.

    Draws a random upstream gradient ``u`` of ``fn(x)``'s shape and compares the autodiff
    vector-Jacobian product ``u^T J`` with:

    * the finite-difference gradient of ``L(x) = sum(u * fn(x))`` (central differences),
      when ``reference`` is None: this checks a derivative you claim is *the* derivative;
    * ``reference(x, u)`` otherwise: this checks a gradient you *define*, such as a surrogate or a
      clipped gradient, which finite differences cannot know about.

    Both are checked under four upstream gradients, ``u``, ``2u``, ``-u`` and ``u/1024``. A true
    derivative is linear in the upstream gradient, ``VJP(2u) = 2 VJP(u)`` and ``VJP(-u) = -VJP(u)``,
    so against finite differences a gradient that is not is reported. A defined rule need not be linear (a clip is
    not, by design): it passes when it matches ``reference`` under every upstream. Either way a custom ``grad(dy)`` that
    forgets ``dy`` is caught, even where that bug gives the right answer for ``dy = 1``, and the
    verdict says so: its gradient stays the same when the upstream gradient changes.

    **The verdict is scale-free.** Autodiff ``a`` matches the reference ``e`` when, element by element,
    ``|a - e| <= atol * s + rtol * |e| + noise``, where ``s = max(max|a|, max|e|)`` is the size of
    the gradients as a whole and ``noise`` is the rounding noise of finite differences
    (``4 eps sum|u * fn(x)| / (2 delta)``; 0 against a ``reference``). So ``c * fn`` gets the verdict
    of ``fn`` for any ``c``, a gradient of small magnitude is judged on its own scale, and a
    gradient with the wrong sign, or zero, always fails (it misses by ``s`` itself). When finite
    differences cannot tell the gradient from zero (the noise is as large as the gradient), the
    check says so and fails rather than pass a gradient it could not see: pass a larger
    ``delta``, or a float64-capable ``fn``.

    **Precision.** The autodiff gradient is computed in ``x``'s dtype. Finite differences are
    taken on ``fn`` evaluated in float64 whenever ``fn`` accepts a float64 input (returns float64
    for it), else in float32 if it accepts that, else in ``x``'s dtype (as a Keras layer with a
    fixed dtype policy does); ``result.evaluated_in`` says which. So a float16 or bfloat16
    gradient is checked against the derivative of the same function computed in float64, with
    tolerances that allow for its own rounding. In float16 or bfloat16 themselves the default
    step is ``eps**(1/3) * max(1, |x|)`` (0.1 to 0.2 at ``|x| <= 1``), and every step is the one
    the dtype actually took.

    **Cost.** Full finite differences evaluate ``fn`` twice per element of ``x``: O(n) calls, about
    1,500 for a 768-element image (seconds for a small CNN, in proportion to its forward pass).
    ``fast=True`` evaluates ``fn`` four times whatever ``n`` (as PyTorch's ``gradcheck(fast_mode=True)``):
    it compares the directional derivative along two directions, the autodiff gradient's own
    (where a wrong sign, a zero or a wrong size shows in full) and a random one, with autodiff's
    ``u^T J d``. Fast mode catches those bugs for certain, but an error confined to a few elements
    of a large ``x`` only with some probability: use it to screen, and the full check to confirm.

    Args:
      fn: a function of one floating-point tensor.
      x: the point to check at; avoid kinks such as ``x = 0`` for ``relu``, where finite
        differences are meaningless.
      reference: optional ``reference(x, upstream) -> expected gradient w.r.t. x``.
      delta: finite-difference step (default ``1/1024``, as ``tf.test.compute_gradient``; for a
        ``fn`` evaluated in float16 or bfloat16, ``eps**(1/3) * max(1, |x|)``).
      rtol: tolerance relative to each element (default by ``x``'s dtype: 1e-5 for float64, 2e-2
        for float32, 1e-1 for float16, 2e-1 for bfloat16).
      atol: tolerance relative to the size of the gradients as a whole, ``s`` above (same defaults).
      seed: seed of the random upstream gradient, for reproducible checks.
      order: 1 (the default) checks the gradient. 2 also checks that the gradient's own gradient
        is right: the autodiff gradient of ``w^T (u^T J(x))`` with respect to ``x``, for a second
        random ``w``, against finite differences of the first-order vector-Jacobian product (as
        PyTorch's ``gradgradcheck`` and JAX's ``check_grads(order=2)`` do). This catches a custom
        ``grad`` that is right but not differentiable (built with ``tf.stop_gradient``, NumPy or
        ``tf.py_function``), which silently gives wrong second derivatives.
      fast: compare directional derivatives along two directions instead of the full gradient
        (four calls of ``fn`` instead of ``2 n``; ``result.reference`` is then None). It applies to
        finite differences only: a check against ``reference`` costs no calls of ``fn`` beyond autodiff.

    Returns:
      A :class:`GradientCheck`; ``result.ok`` is the verdict, ``print(result)`` explains it.

    Raises:
      TypeError: if ``fn`` or ``reference`` is not callable, ``x`` or what they return is not
        floating-point, ``seed`` is not an int or ``fast`` not a bool.
      ValueError: if ``delta``, ``rtol`` or ``atol`` is not a finite positive number, ``delta`` is
        so small that ``x + delta`` rounds to ``x``, ``seed`` is negative, or ``order`` is not 1 or 2.

    Example:
      >>> import tensorflow as tf, gradlab
      >>> x = tf.constant([0.3, -1.2, 2.0], tf.float64)
      >>> gradlab.check_gradient(tf.sin, x).ok
      True
      >>> @tf.custom_gradient
      ... def forgets_dy(t):
      ...     return tf.sin(t), lambda dy: tf.cos(t)      # should be dy * tf.cos(t)
      >>> result = gradlab.check_gradient(forgets_dy, x)
      >>> result.ok, result.ignores_upstream
      (False, True)
      >>> clip = lambda t: gradlab.clip_gradient(t, -0.1, 0.1)    # a defined, non-linear rule
      >>> gradlab.check_gradient(clip, x, reference=lambda t, u: tf.clip_by_value(u, -0.1, 0.1)).ok
      True
      >>> @tf.custom_gradient
      ... def cut_sin(t):    # right first derivative, but its own gradient is cut
      ...     return tf.sin(t), lambda dy: dy * tf.stop_gradient(tf.cos(t))
      >>> gradlab.check_gradient(cut_sin, x).ok, gradlab.check_gradient(cut_sin, x, order=2).ok
      (True, False)
      >>> gradlab.check_gradient(tf.sin, x, order=2).ok
      True

      The verdict does not depend on the gradient's size, and half precision is checked against
      float64 finite differences:

      >>> @tf.custom_gradient
      ... def flipped(t):      # the sign of the gradient is wrong
      ...     return tf.sin(t), lambda dy: -dy * tf.cos(t)
      >>> small = tf.random.stateless_normal([64], seed=[0, 1])
      >>> gradlab.check_gradient(lambda t: tf.reduce_mean(flipped(t)), small).ok  # every element ~1/64
      False
      >>> half = gradlab.check_gradient(lambda t: 3 * t, tf.constant([0.5, -1.0, 2.0], tf.bfloat16))
      >>> half.ok, half.evaluated_in
      (True, 'float64')
      >>> gradlab.check_gradient(tf.sin, small, fast=True).ok    # 4 calls of fn instead of 128
      True
    """
    s = _checked_arguments(fn, x, reference, delta, rtol, atol, seed, order, fast)
    x = s.x
    upstream = _random_upstream(fn, x, s.seed)
    vjps = _vjps(fn, x, upstream)
    dtype, why = fd.evaluation_dtype(fn, x) if reference is None or s.order == 2 else (None, "")
    if reference is None:
        comparison = _against_finite_differences(fn, x, upstream, vjps, dtype, s)
    else:
        comparison = _against_reference(reference, x, upstream, vjps)
    verdict = cmp.verdict(comparison, vjps, rtol=s.rtol, atol=s.atol, defined_rule=reference is not None)
    ok, message = verdict.ok, _first_order_message(verdict, comparison, vjps[0], s, why)
    second_error = None
    if s.order == 2:
        ok, message, second_error = _order_two(fn, x, upstream, s, dtype, why, ok, message)
    fast_differences = s.fast and comparison.differences is not None
    return GradientCheck(
        ok=ok, message=message, max_error=verdict.max_error, linear_in_upstream=verdict.linear,
        autodiff=vjps[0], reference=None if fast_differences else comparison.expected[0],
        ignores_upstream=verdict.ignores, order=s.order, second_order_error=second_error,
        evaluated_in=None if dtype is None else dtype.name, fast=s.fast)


# --- check_gradient, step by step ----------------------------------------------------------------


@dataclasses.dataclass(frozen=True)
class _Settings:
    """check_gradient's arguments, validated, with the dtype's default tolerances filled in."""

    x: tf.Tensor
    delta: Optional[float]
    rtol: float
    atol: float
    seed: int
    order: int
    fast: bool


def _checked_arguments(fn, x, reference, delta, rtol, atol, seed, order, fast) -> _Settings:
    """Validates check_gradient's arguments (errors name the argument) and fills in the defaults."""
    v.check_callable(fn, "fn")
    if reference is not None:
        v.check_callable(reference, "reference")
    x = v.as_float_tensor(x, "x")
    for name, value in (("delta", delta), ("rtol", rtol), ("atol", atol)):
        if value is not None:
            v.scalar(value, name, positive=True)
    if isinstance(seed, (bool, np.bool_)) or not isinstance(seed, numbers.Integral):
        raise TypeError(f"seed must be an int; got {v.describe(seed)}.")
    if seed < 0:
        raise ValueError(f"seed must be >= 0; got {seed!r}.")
    if isinstance(order, (bool, np.bool_)) or not isinstance(order, numbers.Integral):
        raise TypeError(f"order must be an int, 1 or 2; got {v.describe(order)}.")
    if order not in (1, 2):
        raise ValueError(f"order must be 1 (the gradient) or 2 (also the gradient's gradient); got {order!r}.")
    if not isinstance(fast, (bool, np.bool_)):
        raise TypeError(f"fast must be True or False; got {v.describe(fast)}.")
    default_rtol, default_atol = _TOLERANCES[x.dtype]
    return _Settings(x=x, delta=None if delta is None else float(delta),
                     rtol=default_rtol if rtol is None else float(rtol),
                     atol=default_atol if atol is None else float(atol),
                     seed=seed, order=order, fast=bool(fast))


def _random_upstream(fn, x: tf.Tensor, seed: int) -> tf.Tensor:
    """The random upstream gradient ``u``: standard normal, of ``fn(x)``'s shape and dtype."""
    y = v.as_float_tensor(fn(x), "fn(x)")
    rng = np.random.default_rng(seed)
    return tf.constant(rng.standard_normal(y.shape.as_list()), dtype=y.dtype)


def _vjps(fn, x: tf.Tensor, upstream: tf.Tensor) -> list:
    """The autodiff gradient (float64 NumPy) under each upstream ``k * u`` of ``_FACTORS``."""
    return [_vjp(fn, x, upstream * k).numpy().astype(np.float64) for k in _FACTORS]


def _vjp(fn, x: tf.Tensor, upstream: tf.Tensor) -> tf.Tensor:
    """``upstream^T J_fn(x)`` by autodiff (the upstream is cast to ``fn(x)``'s dtype)."""
    with tf.GradientTape() as tape:
        tape.watch(x)
        y = tf.convert_to_tensor(fn(x))
    grad = tape.gradient(y, x, output_gradients=tf.cast(upstream, y.dtype))
    return tf.zeros_like(x) if grad is None else tf.convert_to_tensor(grad)


def _against_finite_differences(fn, x: tf.Tensor, upstream: tf.Tensor, vjps: list, dtype: tf.DType,
                                s: _Settings) -> cmp.Comparison:
    """The comparison with central differences of ``L(x) = sum(u * fn(x))`` evaluated in ``dtype``."""
    u64 = tf.cast(upstream, tf.float64)

    def terms(t):
        return u64 * tf.cast(fn(t), tf.float64)

    autodiff = vjps[0]
    directions = fd.directions(autodiff, s.seed) if s.fast and autodiff.size else None
    differences = fd.finite_differences(terms, x, dtype, s.delta, directions)
    # A true derivative is linear in the upstream: the differences under k u are k times these.
    expected = [k * differences.values for k in _FACTORS]
    compared = [differences.project(a) for a in vjps]
    return cmp.Comparison(
        compared=compared, expected=expected, floors=[abs(k) * differences.floor for k in _FACTORS],
        scales=[differences.scale(a, e) for a, e in zip(vjps, expected)],
        errors=[differences.in_gradient_units(np.abs(c - e)) for c, e in zip(compared, expected)],
        against="finite differences" + ("" if dtype == x.dtype else f" in {dtype.name}"),
        differences=differences)


def _against_reference(reference, x: tf.Tensor, upstream: tf.Tensor, vjps: list) -> cmp.Comparison:
    """The comparison with ``reference(x, k * u)``, a gradient you define (exact: no noise floor)."""
    expected = [_reference(reference, x, upstream * k, vjps[0].shape) for k in _FACTORS]
    return cmp.Comparison(compared=vjps, expected=expected, floors=[0.0] * 4, scales=[None] * 4,
                          errors=[np.abs(a - e) for a, e in zip(vjps, expected)], against="the reference gradient")


def _reference(reference, x: tf.Tensor, upstream: tf.Tensor, shape: tuple) -> np.ndarray:
    """``reference(x, upstream)`` as float64 NumPy, with a clear error for a wrong shape."""
    expected = v.as_float_tensor(reference(x, upstream), "reference(x, upstream)")
    expected = np.asarray(expected, np.float64)
    if expected.shape != shape:
        raise ValueError(
            f"reference returned shape {expected.shape}, but the gradient w.r.t. x has shape "
            f"{shape}."
        )
    return expected


def _first_order_message(verdict: cmp.Verdict, comparison: cmp.Comparison, autodiff: np.ndarray, s: _Settings,
                         why: str) -> str:
    """The readable first-order verdict: what matched, or which failure it is and what to look at."""
    against, max_error, expected = comparison.against, verdict.max_error, comparison.expected
    if verdict.unresolved:
        return f"FAILED: inconclusive: {cmp.resolution_note(comparison.differences, why)}."
    if verdict.ok:
        rule = ("scales with the upstream gradient" if verdict.linear else
                "follows the reference for every upstream gradient tried (the rule is not linear "
                "in dy, as the reference defines it)")
        mode = "fast mode, 2 directions; " if s.fast and comparison.differences is not None else ""
        return f"ok: the autodiff gradient matches {against} ({mode}max abs error {max_error:.2g}) and {rule}."
    if not autodiff.any() and not cmp.close(np.zeros_like(expected[0]), expected[0], rtol=s.rtol, atol=s.atol,
                                            floor=comparison.floors[0]):
        return (f"FAILED: the autodiff gradient is zero everywhere, but {against} is not (up to "
                f"{max_error:.2g}): a custom grad that returns zeros, or no path from x to fn(x)?")
    if verdict.ignores:
        return (
            "FAILED: the gradient does not change when the upstream gradient dy changes: a custom "
            "grad(dy) returns a local derivative without multiplying it by dy (return dy * ...)"
            f"; it differs from {against} by up to {max_error:.2g}."
        )
    message = (
        f"FAILED: the autodiff gradient differs from {against} (max abs error {max_error:.2g}, "
        f"rtol={s.rtol:g}, atol={s.atol:g})"
    )
    if comparison.differences is not None and not verdict.linear:
        message += (
            "; it is not linear in the upstream gradient either, so it is not a derivative. "
            "If you define such a rule on purpose (a clip), check it with reference=lambda x, u: ..."
        )
    return message + "."


def _order_two(fn, x: tf.Tensor, upstream: tf.Tensor, s: _Settings, dtype: tf.DType, why: str, ok: bool,
               message: str) -> Tuple[bool, str, Optional[float]]:
    """The verdict with ``order=2``: ``(ok, message, second-order error)``, the first-order
    ``message`` extended, or replaced by the order-2 failure (checked only if ``ok``)."""
    if not ok:
        return False, message + " (Order 2 not checked: the gradient itself must pass first.)", None
    second_ok, error, problem = _second_order(fn, x, upstream, s, dtype, why)
    if second_ok:
        return True, message[:-1] + (f"; order 2: its own gradient matches finite differences too "
                                      f"(max abs error {error:.2g})."), error
    if problem and problem != "cut":
        return False, f"FAILED at order 2 (inconclusive): the gradient itself is right, but {problem}.", error
    what = ("autodiff sees no second derivative at all: the backward pass is cut"
            if problem == "cut" else f"the gradient of the gradient differs from finite differences "
            f"(max abs error {error:.2g}, rtol={s.rtol:g}, atol={s.atol:g})")
    return False, (
        f"FAILED at order 2: the gradient itself is right, but {what}. A custom grad built "
        "with tf.stop_gradient, NumPy or tf.py_function is not differentiable: build it from "
        "differentiable TensorFlow ops, or define its gradient with a nested tf.custom_gradient."
    ), error


def _second_order(fn, x: tf.Tensor, upstream: tf.Tensor, s: _Settings, dtype: tf.DType, why: str):
    """Autodiff against finite differences for the gradient of ``w^T VJP(x, u)`` w.r.t. ``x``.

    Returns ``(ok, max_error, problem)``; ``problem`` is "cut" when autodiff sees no second
    derivative at all (every element zero) where finite differences see one, a resolution note
    when finite differences cannot resolve it, else "".
    """
    w = np.random.default_rng(s.seed + 1).standard_normal(x.shape.as_list())

    def weighted_vjp(t):
        return tf.constant(w, tf.float64) * tf.cast(_vjp(fn, t, upstream), tf.float64)

    with tf.GradientTape() as tape:
        tape.watch(x)
        total = tf.reduce_sum(tf.cast(w, x.dtype) * _vjp(fn, x, upstream))
    autodiff = tape.gradient(total, x)
    # An IndexedSlices second derivative (fn reads x through tf.gather) is summed into a dense tensor.
    autodiff = (np.zeros(x.shape.as_list()) if autodiff is None
                else tf.convert_to_tensor(autodiff).numpy().astype(np.float64))
    directions = fd.directions(autodiff, s.seed + 10) if s.fast and autodiff.size else None
    differences = fd.finite_differences(weighted_vjp, x, dtype, s.delta, directions)
    projected = differences.project(autodiff)
    error = differences.in_gradient_units(np.abs(projected - differences.values))
    max_error = float(error.max()) if error.size else 0.0
    ok = cmp.close(projected, differences.values, rtol=s.rtol, atol=s.atol, floor=differences.floor,
                   scale=differences.scale(autodiff, differences.values))
    problem = ""
    if not ok and not autodiff.any() and bool((np.abs(differences.values) > differences.floor).any()):
        problem = "cut"
    elif ok and cmp.unresolved(differences, autodiff, s.rtol, s.atol):
        ok, problem = False, cmp.resolution_note(differences, why)
    return ok, max_error, problem
