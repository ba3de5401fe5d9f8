"""``check_gradient``: does a function's autodiff gradient say what it should?"""
from __future__ import annotations

import dataclasses
import numbers
from typing import Callable, Optional

import numpy as np
import tensorflow as tf

from gradlab import _validation as v

__all__ = ["check_gradient", "GradientCheck"]

# Default tolerances per dtype: central finite differences carry O(delta**2) truncation error and
# O(eps / delta) rounding error, so low precision needs loose bounds (and float64 is recommended).
_TOLERANCES = {
    tf.float64: (1e-5, 1e-5),
    tf.float32: (2e-2, 2e-2),
    tf.float16: (1e-1, 1e-1),
    tf.bfloat16: (2e-1, 2e-1),
}


@dataclasses.dataclass(frozen=True)
class GradientCheck:
    """The result of :func:`check_gradient`.

    Attributes:
      ok: True when the autodiff gradient matches the reference for every upstream gradient tried
        (``u``, ``2u``, ``-u``, ``u/1024``) and, against finite differences, is linear in the upstream gradient.
      message: a readable verdict saying which of these failed and what to look at.
      max_error: the largest ``|autodiff - reference|`` over all elements and upstreams.
      linear_in_upstream: whether the gradient scales with the upstream gradient ``dy``
        (``VJP(2u) = 2 VJP(u)``). A true derivative always does; a defined rule such as a clip
        need not, and is then judged against its ``reference`` only.
      ignores_upstream: True when the gradient does not change at all with ``dy`` although it
        should (the classic bug: a ``grad(dy)`` that never multiplies by ``dy``).
      autodiff: the autodiff vector-Jacobian product under the random upstream ``u``.
      reference: what it should be under ``u``: finite differences, or your ``reference``.
      order: 1, or 2 when the gradient of the vector-Jacobian product was checked too.
      second_order_error: with ``order=2``, the largest ``|autodiff - finite differences|`` of the
        gradient of ``w^T (u^T J)`` with respect to ``x`` (a second random upstream ``w``); else None.
    """

    ok: bool
    message: str
    max_error: float
    linear_in_upstream: bool
    autodiff: np.ndarray = dataclasses.field(repr=False)
    reference: np.ndarray = dataclasses.field(repr=False)
    ignores_upstream: bool = False
    order: int = 1
    second_order_error: Optional[float] = None

    def __bool__(self) -> bool:
        return self.ok

    def __str__(self) -> str:
        return self.message


def _vjp(fn, x: tf.Tensor, upstream: tf.Tensor) -> tf.Tensor:
    with tf.GradientTape() as tape:
        tape.watch(x)
        y = tf.convert_to_tensor(fn(x))
    grad = tape.gradient(y, x, output_gradients=upstream)
    return tf.zeros_like(x) if grad is None else tf.convert_to_tensor(grad)


def _second_order(fn, x: tf.Tensor, upstream: tf.Tensor, seed: int, delta, rtol: float, atol: float):
    """Autodiff against finite differences for the gradient of ``w^T VJP(x, u)`` w.r.t. ``x``.

    Returns ``(ok, max_error, cut)``; ``cut`` is True when autodiff sees no second derivative at all
    (every element zero) where finite differences see one.
    """
    w = tf.constant(np.random.default_rng(seed + 1).standard_normal(x.shape.as_list()), dtype=x.dtype)

    def weighted_vjp(t):
        return tf.reduce_sum(tf.cast(w, t.dtype) * _vjp(fn, t, tf.cast(upstream, _fn_dtype(fn, t))))

    with tf.GradientTape() as tape:
        tape.watch(x)
        total = weighted_vjp(x)
    autodiff = tape.gradient(total, x)
    autodiff = np.zeros(x.shape.as_list()) if autodiff is None else autodiff.numpy().astype(np.float64)
    kwargs = {} if delta is None else {"delta": float(delta)}
    _, numerical = tf.test.compute_gradient(weighted_vjp, [x], **kwargs)
    numerical = np.asarray(numerical[0], np.float64).reshape(x.shape.as_list())
    error = float(np.abs(autodiff - numerical).max()) if autodiff.size else 0.0
    ok = bool(np.allclose(autodiff, numerical, rtol=rtol, atol=atol))
    cut = not ok and not autodiff.any() and bool(numerical.any())
    return ok, error, cut


def _fn_dtype(fn, t: tf.Tensor) -> tf.DType:
    """The dtype of ``fn``'s output for input ``t`` (its upstream gradient must match it)."""
    return tf.convert_to_tensor(fn(t)).dtype


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
) -> GradientCheck:
    """Checks the autodiff gradient of ``fn`` at ``x`` against a reference, under a random upstream.

    Draws a random upstream gradient ``u`` of ``fn(x)``'s shape and compares the autodiff
    vector-Jacobian product ``u^T J`` with:

    * the finite-difference gradient of ``L(x) = sum(u * fn(x))`` (``tf.test.compute_gradient``),
      when ``reference`` is None: this checks a derivative you claim is *the* derivative;
    * ``reference(x, u)`` otherwise: this checks a gradient you *define*, such as a surrogate or a
      clipped gradient, which finite differences cannot know about.

    Both are checked under four upstream gradients, ``u``, ``2u``, ``-u`` and ``u/1024``. A true
    derivative is linear in the upstream gradient, ``VJP(2u) = 2 VJP(u)``, so against finite
    differences a gradient that is not is reported. A defined rule need not be linear (a clip is
    not, by design): it passes when it matches ``reference`` under every upstream. Either way a custom ``grad(dy)`` that
    forgets ``dy`` is caught, even where that bug gives the right answer for ``dy = 1``, and the
    verdict says so: its gradient stays the same when the upstream gradient changes.

    Args:
      fn: a function of one floating-point tensor.
      x: the point to check at (float64 recommended for finite differences); avoid kinks such as
        ``x = 0`` for ``relu``, where finite differences are meaningless.
      reference: optional ``reference(x, upstream) -> expected gradient w.r.t. x``.
      delta: finite-difference step (TensorFlow's default when None).
      rtol: relative tolerance (default by dtype: 1e-5 for float64, 2e-2 for float32).
      atol: absolute tolerance (same defaults).
      seed: seed of the random upstream gradient, for reproducible checks.
      order: 1 (the default) checks the gradient. 2 also checks that the gradient's own gradient
        is right: the autodiff gradient of ``w^T (u^T J(x))`` with respect to ``x``, for a second
        random ``w``, against finite differences of the first-order vector-Jacobian product (as
        PyTorch's ``gradgradcheck`` and JAX's ``check_grads(order=2)`` do). This catches a custom
        ``grad`` that is right but not differentiable (built with ``tf.stop_gradient``, NumPy or
        ``tf.py_function``), which silently gives wrong second derivatives.

    Returns:
      A :class:`GradientCheck`; ``result.ok`` is the verdict, ``print(result)`` explains it.

    Raises:
      TypeError: if ``fn`` or ``reference`` is not callable, ``x`` or what they return is not
        floating-point, or ``seed`` is not an int.
      ValueError: if ``delta``, ``rtol`` or ``atol`` is not a finite positive number, ``seed``
        is negative, or ``order`` is not 1 or 2.

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
    """
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
    default_rtol, default_atol = _TOLERANCES[x.dtype]
    rtol = default_rtol if rtol is None else float(rtol)
    atol = default_atol if atol is None else float(atol)

    y = v.as_float_tensor(fn(x), "fn(x)")
    rng = np.random.default_rng(seed)
    upstream = tf.constant(rng.standard_normal(y.shape.as_list()), dtype=y.dtype)

    # The upstream gradients tried: u, 2u, -u and u/1024 (powers of two: scaling is exact). A rule
    # that reads dy changes its answer under at least one of them, a clip included (a small dy
    # passes it unclipped); one that ignores dy gives the same answer for all four.
    factors = (1.0, 2.0, -1.0, 1.0 / 1024)
    vjps = [_vjp(fn, x, upstream * k).numpy().astype(np.float64) for k in factors]
    autodiff = vjps[0]
    linear = bool(np.allclose(vjps[1], 2 * autodiff, rtol=rtol, atol=atol))

    if reference is None:
        def weighted_sum(t):
            return tf.reduce_sum(tf.cast(upstream, t.dtype) * tf.cast(fn(t), t.dtype))

        kwargs = {} if delta is None else {"delta": float(delta)}
        _, numerical = tf.test.compute_gradient(weighted_sum, [x], **kwargs)
        numerical = np.asarray(numerical[0], np.float64).reshape(x.shape.as_list())
        expected = [k * numerical for k in factors]  # a true derivative is linear in the upstream
        against = "finite differences"
    else:
        expected = [_reference(reference, x, upstream * k, autodiff.shape) for k in factors]
        against = "the reference gradient"

    def close(a, b):
        return bool(np.allclose(a, b, rtol=rtol, atol=atol))

    errors = [np.abs(a - e) for a, e in zip(vjps, expected)]
    max_error = float(max(e.max() for e in errors)) if autodiff.size else 0.0
    matches = all(close(a, e) for a, e in zip(vjps, expected))
    # "Ignores dy": the autodiff gradient stayed put while the expected one moved.
    ignores = (all(close(a, autodiff) for a in vjps[1:])
               and not all(close(e, expected[0]) for e in expected[1:]))
    ok = matches and (linear or reference is not None)

    if ok:
        rule = ("scales with the upstream gradient" if linear else
                "follows the reference for every upstream gradient tried (the rule is not linear "
                "in dy, as the reference defines it)")
        message = f"ok: the autodiff gradient matches {against} (max abs error {max_error:.2g}) and {rule}."
    elif ignores:
        message = (
            "FAILED: the gradient does not change when the upstream gradient dy changes: a custom "
            "grad(dy) returns a local derivative without multiplying it by dy (return dy * ...)"
            f"; it differs from {against} by up to {max_error:.2g}."
        )
    else:
        message = (
            f"FAILED: the autodiff gradient differs from {against} (max abs error {max_error:.2g}, "
            f"rtol={rtol:g}, atol={atol:g})"
        )
        if reference is None and not linear:
            message += (
                "; it is not linear in the upstream gradient either, so it is not a derivative. "
                "If you define such a rule on purpose (a clip), check it with reference=lambda x, u: ..."
            )
        message += "."
    second_error = None
    if order == 2 and ok:
        second_ok, second_error, cut = _second_order(fn, x, upstream, seed, delta, rtol, atol)
        if second_ok:
            message = message[:-1] + (f"; order 2: its own gradient matches finite differences too "
                                       f"(max abs error {second_error:.2g}).")
        else:
            ok = False
            what = ("autodiff sees no second derivative at all: the backward pass is cut"
                    if cut else f"the gradient of the gradient differs from finite differences "
                    f"(max abs error {second_error:.2g}, rtol={rtol:g}, atol={atol:g})")
            message = (
                f"FAILED at order 2: the gradient itself is right, but {what}. A custom grad built "
                "with tf.stop_gradient, NumPy or tf.py_function is not differentiable: build it from "
                "differentiable TensorFlow ops, or define its gradient with a nested tf.custom_gradient."
            )
    elif order == 2:
        message += " (Order 2 not checked: the gradient itself must pass first.)"
    return GradientCheck(ok, message, max_error, linear, autodiff, expected[0], bool(ignores), order, second_error)


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
