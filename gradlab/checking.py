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
      ok: True when the autodiff gradient matches the reference *and* is linear in the upstream
        gradient.
      message: a readable verdict saying what failed and what to look at.
      max_error: the largest ``|autodiff - reference|`` over all elements.
      linear_in_upstream: False when the gradient does not scale with the upstream gradient ``dy``
        (the classic bug: a ``grad(dy)`` that never multiplies by ``dy``).
      autodiff: the autodiff vector-Jacobian product under the random upstream weighting.
      reference: what it should be: finite differences, or your ``reference``.
    """

    ok: bool
    message: str
    max_error: float
    linear_in_upstream: bool
    autodiff: np.ndarray = dataclasses.field(repr=False)
    reference: np.ndarray = dataclasses.field(repr=False)

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


def check_gradient(
    fn: Callable[[tf.Tensor], tf.Tensor],
    x,
    *,
    reference: Optional[Callable[[tf.Tensor, tf.Tensor], tf.Tensor]] = None,
    delta: Optional[float] = None,
    rtol: Optional[float] = None,
    atol: Optional[float] = None,
    seed: int = 0,
) -> GradientCheck:
    """Checks the autodiff gradient of ``fn`` at ``x`` against a reference, under a random upstream.

    Draws a random upstream gradient ``u`` of ``fn(x)``'s shape and compares the autodiff
    vector-Jacobian product ``u^T J`` with:

    * the finite-difference gradient of ``L(x) = sum(u * fn(x))`` (``tf.test.compute_gradient``),
      when ``reference`` is None: this checks a derivative you claim is *the* derivative;
    * ``reference(x, u)`` otherwise: this checks a gradient you *define*, such as a surrogate or a
      clipped gradient, which finite differences cannot know about.

    It also checks that the gradient is linear in the upstream gradient (``VJP(2u) = 2 VJP(u)``),
    which catches a custom ``grad(dy)`` that forgets to multiply by ``dy`` even where that bug
    happens to give the right answer for ``dy = 1``.

    Args:
      fn: a function of one floating-point tensor.
      x: the point to check at (float64 recommended for finite differences); avoid kinks such as
        ``x = 0`` for ``relu``, where finite differences are meaningless.
      reference: optional ``reference(x, upstream) -> expected gradient w.r.t. x``.
      delta: finite-difference step (TensorFlow's default when None).
      rtol: relative tolerance (default by dtype: 1e-5 for float64, 2e-2 for float32).
      atol: absolute tolerance (same defaults).
      seed: seed of the random upstream gradient, for reproducible checks.

    Returns:
      A :class:`GradientCheck`; ``result.ok`` is the verdict, ``print(result)`` explains it.

    Raises:
      TypeError: if ``fn`` or ``reference`` is not callable, ``x`` or what they return is not
        floating-point, or ``seed`` is not an int.
      ValueError: if ``delta``, ``rtol`` or ``atol`` is not a finite positive number, or ``seed``
        is negative.

    Example:
      >>> import tensorflow as tf, gradlab
      >>> x = tf.constant([0.3, -1.2, 2.0], tf.float64)
      >>> gradlab.check_gradient(tf.sin, x).ok
      True
      >>> @tf.custom_gradient
      ... def forgets_dy(t):
      ...     return tf.sin(t), lambda dy: tf.cos(t)      # should be dy * tf.cos(t)
      >>> result = gradlab.check_gradient(forgets_dy, x)
      >>> result.ok, result.linear_in_upstream
      (False, False)
    """
    v.check_callable(fn, "fn")
    if reference is not None:
        v.check_callable(reference, "reference")
    x = v.as_float_tensor(x, "x")
    for name, value in (("delta", delta), ("rtol", rtol), ("atol", atol)):
        if value is not None:
            v.scalar(value, name, positive=True)
    if isinstance(seed, (bool, np.bool_)) or not isinstance(seed, numbers.Integral):
        raise TypeError(f"seed must be an int; got {v._describe(seed)}.")
    if seed < 0:
        raise ValueError(f"seed must be >= 0; got {seed!r}.")
    default_rtol, default_atol = _TOLERANCES[x.dtype]
    rtol = default_rtol if rtol is None else float(rtol)
    atol = default_atol if atol is None else float(atol)

    y = v.as_float_tensor(fn(x), "fn(x)")
    rng = np.random.default_rng(seed)
    upstream = tf.constant(rng.standard_normal(y.shape.as_list()), dtype=y.dtype)

    autodiff = _vjp(fn, x, upstream).numpy().astype(np.float64)
    doubled = _vjp(fn, x, 2 * upstream).numpy().astype(np.float64)
    linear = bool(np.allclose(doubled, 2 * autodiff, rtol=rtol, atol=atol))

    if reference is None:
        def weighted_sum(t):
            return tf.reduce_sum(tf.cast(upstream, t.dtype) * tf.cast(fn(t), t.dtype))

        kwargs = {} if delta is None else {"delta": float(delta)}
        _, numerical = tf.test.compute_gradient(weighted_sum, [x], **kwargs)
        expected = np.asarray(numerical[0], np.float64).reshape(x.shape.as_list())
        against = "finite differences"
    else:
        expected = v.as_float_tensor(reference(x, upstream), "reference(x, upstream)")
        expected = np.asarray(expected, np.float64)
        if expected.shape != autodiff.shape:
            raise ValueError(
                f"reference returned shape {expected.shape}, but the gradient w.r.t. x has shape "
                f"{autodiff.shape}."
            )
        against = "the reference gradient"

    error = np.abs(autodiff - expected)
    max_error = float(error.max()) if error.size else 0.0
    matches = bool(np.allclose(autodiff, expected, rtol=rtol, atol=atol))
    ok = matches and linear

    if ok:
        message = (
            f"ok: the autodiff gradient matches {against} (max abs error {max_error:.2g}) and "
            "scales with the upstream gradient."
        )
    else:
        problems = []
        if not linear:
            problems.append(
                "the gradient does not scale with the upstream gradient dy: a custom grad(dy) "
                "probably returns a local derivative without multiplying it by dy"
            )
        if not matches:
            problems.append(
                f"the autodiff gradient differs from {against} (max abs error {max_error:.2g}, "
                f"rtol={rtol:g}, atol={atol:g})"
            )
        message = "FAILED: " + "; and ".join(problems) + "."
    return GradientCheck(ok, message, max_error, linear, autodiff, expected)
