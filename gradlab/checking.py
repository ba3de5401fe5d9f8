"""``check_gradient``: does a function's autodiff gradient say what it should?"""
from __future__ import annotations

import dataclasses
import numbers
from typing import Callable, Optional, Tuple

import numpy as np
import tensorflow as tf

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
# The unit roundoff (machine epsilon) of each dtype: the noise finite differences carry.
_EPS = {tf.float64: 2.0**-52, tf.float32: 2.0**-23, tf.float16: 2.0**-10, tf.bfloat16: 2.0**-7}
# TensorFlow's default finite-difference step (tf.test.compute_gradient), exact in binary.
_DEFAULT_DELTA = 1.0 / 1024
# Finite differences are exact only up to the rounding of the two evaluations: |L(x+h) - L(x-h)|
# carries up to _ROUNDING_UNITS * eps * sum|u * fn(x)| of noise (two units for each evaluation).
_ROUNDING_UNITS = 4.0


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
        (``VJP(2u) = 2 VJP(u)``). A true derivative always does; a defined rule such as a clip
        need not, and is then judged against its ``reference`` only.
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


def _vjp(fn, x: tf.Tensor, upstream: tf.Tensor) -> tf.Tensor:
    """``upstream^T J_fn(x)`` by autodiff (the upstream is cast to ``fn(x)``'s dtype)."""
    with tf.GradientTape() as tape:
        tape.watch(x)
        y = tf.convert_to_tensor(fn(x))
    grad = tape.gradient(y, x, output_gradients=tf.cast(upstream, y.dtype))
    return tf.zeros_like(x) if grad is None else tf.convert_to_tensor(grad)


def _close(actual: np.ndarray, expected: np.ndarray, *, rtol: float, atol: float, floor=0.0,
           scale=None) -> bool:
    """The scale-aware comparison: ``|actual - expected| <= atol * scale + rtol * |expected| + floor``.

    ``scale`` is the size of the gradients compared as a whole (by default the largest ``|element|``
    of either), so ``atol`` is relative to it and the verdict does not depend on the units of
    ``fn``: a gradient scaled by ``c`` passes or fails as the unscaled one does, and a wrong sign
    or a zero gradient never passes (it misses by the scale itself). ``floor`` is the rounding noise
    of finite differences, below which nothing can be resolved (0 for an exact reference).
    NaN or infinity anywhere fails.
    """
    if actual.size == 0:
        return True
    if scale is None:
        scale = max(float(np.abs(actual).max()), float(np.abs(expected).max()))
    with np.errstate(invalid="ignore", over="ignore"):
        return bool(np.all(np.abs(actual - expected) <= atol * scale + rtol * np.abs(expected) + floor))


def _evaluation_dtype(fn, x: tf.Tensor) -> Tuple[tf.DType, str]:
    """The dtype to take finite differences in: the widest of float64 and float32 that ``fn`` accepts.

    ``fn`` accepts a dtype when, given ``x`` cast to it, it returns that dtype (a function that
    casts to, or autocasts to, a narrower dtype does not). Returns ``(dtype, why)``, ``why`` saying
    why a wider dtype was not used ("" when it was).
    """
    if x.dtype == tf.float64:
        return x.dtype, ""
    why = ""
    for wider in (tf.float64, tf.float32):
        if wider == x.dtype:
            break
        try:
            got = tf.convert_to_tensor(fn(tf.cast(x, wider))).dtype
        except Exception as exc:  # noqa: BLE001 - any failure means: not accepted; fall back
            why = why or f"fn raised {type(exc).__name__} on a {wider.name} input"
            continue
        if got == wider:
            return wider, ""
        why = why or f"fn returned {got.name} for a {wider.name} input"
    return x.dtype, why


def _default_steps(x64: np.ndarray, dtype: tf.DType, delta) -> np.ndarray:
    """The finite-difference step per element: ``delta``, or the default for ``dtype``.

    float64 and float32: TensorFlow's ``1/1024``. float16 and bfloat16 (only when ``fn`` accepts no
    wider dtype): the textbook ``eps**(1/3) * max(1, |x|)``, which balances truncation and rounding
    and moves ``x`` by many units in the last place.
    """
    if delta is not None:
        return np.full(x64.shape, float(delta))
    if dtype in (tf.float16, tf.bfloat16):
        return _EPS[dtype] ** (1.0 / 3.0) * np.maximum(1.0, np.abs(x64))
    return np.full(x64.shape, _DEFAULT_DELTA)


@dataclasses.dataclass(frozen=True)
class _Differences:
    """Finite differences of ``L(t) = sum(terms(t))`` at ``x``, evaluated in ``dtype``.

    Full: ``values[i]`` estimates ``dL/dx_i`` (shape of ``x``). Fast: ``values[j]`` is
    ``L(x + D_j / 2) - L(x - D_j / 2)`` along the actual displacement ``displacements[j]``, which
    autodiff predicts as ``D_j . grad``. ``floor`` is the rounding noise of each value.
    """

    values: np.ndarray
    floor: np.ndarray
    displacements: Optional[np.ndarray]
    dtype: tf.DType

    def project(self, gradient: np.ndarray) -> np.ndarray:
        """What finite differences estimate, computed from an autodiff ``gradient``."""
        if self.displacements is None:
            return gradient
        return self.displacements @ gradient.ravel()

    def scale(self, gradient: np.ndarray, expected: np.ndarray):
        """The size of the compared gradients as a whole (per direction in fast mode)."""
        if self.displacements is None:
            return None  # _close's default: the largest |element| of either
        return np.maximum(np.abs(self.displacements) @ np.abs(gradient.ravel()), np.abs(expected))

    def in_gradient_units(self, error: np.ndarray) -> np.ndarray:
        """An error of ``values`` in units of the gradient (fast: along a direction of max-norm 1)."""
        if self.displacements is None:
            return error
        return error / np.abs(self.displacements).max(axis=1)


def _finite_differences(terms, x: tf.Tensor, dtype: tf.DType, delta, directions) -> _Differences:
    """Central differences of ``L(t) = sum(terms(t))`` at ``x`` evaluated in ``dtype``.

    ``terms(t)`` returns float64 terms; the perturbed points are rounded to ``dtype`` and the step
    actually taken (``fl(x + h) - fl(x - h)``) is divided by, so a step the dtype cannot represent
    exactly costs nothing. Full (``directions`` None): ``2 n`` evaluations for ``n`` elements.
    Fast: two per direction (each of max-norm 1, scaled by the steps).
    """
    np_dtype = dtype.as_numpy_dtype
    x64 = np.asarray(x.numpy(), np.float64)
    steps = _default_steps(x64, dtype, delta)
    point = x64.astype(np_dtype)
    at_x = terms(tf.constant(point))
    eps = max(_EPS[dtype], _EPS.get(at_x.dtype, 0.0))
    noise = _ROUNDING_UNITS * eps * float(tf.reduce_sum(tf.abs(at_x)))

    def total(p: np.ndarray) -> float:
        return float(tf.reduce_sum(terms(tf.constant(p))))

    def too_small(where: str) -> ValueError:
        return ValueError(
            f"delta={float(steps.ravel()[0]):g} is too small for {dtype.name} at {where}: x + delta "
            f"rounds to x. Pass a larger delta.")

    if directions is None:
        flat = point.reshape(-1)  # a view: perturbed in place, then restored
        values = np.empty(flat.size)
        taken = np.empty(flat.size)
        for i, (x_i, h_i) in enumerate(zip(x64.ravel(), steps.ravel())):
            original = flat[i]
            flat[i] = np_dtype(x_i + h_i)
            plus, up = total(point), float(flat[i])
            flat[i] = np_dtype(x_i - h_i)
            minus, down = total(point), float(flat[i])
            flat[i] = original
            taken[i] = up - down
            if taken[i] == 0:
                raise too_small(f"x = {x_i:g}")
            values[i] = (plus - minus) / taken[i]
        shape = x64.shape
        return _Differences(values.reshape(shape), (noise / taken).reshape(shape), None, dtype)
    values, displacements = [], []
    for direction in directions:
        with np.errstate(invalid="ignore", over="ignore"):  # an infinite x gives NaN: it fails later
            up = (x64 + steps * direction).astype(np_dtype)
            down = (x64 - steps * direction).astype(np_dtype)
            displacement = up.astype(np.float64) - down.astype(np.float64)
        if not displacement.any():
            raise too_small("every element")
        values.append(total(up) - total(down))
        displacements.append(displacement.ravel())
    return _Differences(np.array(values), np.full(len(values), noise), np.array(displacements), dtype)


def _directions(gradient: np.ndarray, seed: int) -> list:
    """Fast mode's two directions (max-norm 1): along the autodiff gradient, and a random one.

    Along the gradient itself a wrong sign, a zero or a wrong size shows in full; the random
    direction catches errors orthogonal to it.
    """
    rng = np.random.default_rng(seed + 2)
    first = gradient if np.abs(gradient).max(initial=0.0) > 0 else rng.standard_normal(gradient.shape)
    second = rng.standard_normal(gradient.shape)
    return [d / np.abs(d).max() for d in (first, second)]


def _unresolved(differences: _Differences, autodiff: np.ndarray, rtol: float, atol: float) -> bool:
    """Whether finite differences could not tell this gradient from zero (nothing was checked).

    True when a zero gradient would have passed too although their noise floor is not zero, unless
    autodiff and finite differences are both exactly zero (a constant function).
    """
    zero = np.zeros_like(autodiff)
    projected_zero = differences.project(zero)
    if not differences.floor.any() or not (differences.values.any() or autodiff.any()):
        return False
    return _close(projected_zero, differences.values, rtol=rtol, atol=atol, floor=differences.floor,
                  scale=differences.scale(zero, differences.values))


def _resolution_note(differences: _Differences, why: str) -> str:
    """Why finite differences cannot resolve the gradient, and what to do."""
    noise = float(differences.in_gradient_units(differences.floor).max())
    size = float(np.abs(differences.in_gradient_units(differences.values)).max(initial=0.0))
    advice = "pass a larger delta"
    if why:
        advice += f", or make fn accept a float64 input ({why})"
    return (f"finite differences in {differences.dtype.name} cannot tell this gradient from zero: their "
            f"rounding noise (up to {noise:.2g}) is as large as the gradient (up to {size:.2g}); {advice}")


def _second_order(fn, x: tf.Tensor, upstream: tf.Tensor, seed: int, delta, rtol: float, atol: float,
                  dtype: tf.DType, fast: bool, why: str):
    """Autodiff against finite differences for the gradient of ``w^T VJP(x, u)`` w.r.t. ``x``.

    Returns ``(ok, max_error, problem)``; ``problem`` is "cut" when autodiff sees no second
    derivative at all (every element zero) where finite differences see one, a resolution note
    when finite differences cannot resolve it, else "".
    """
    w = np.random.default_rng(seed + 1).standard_normal(x.shape.as_list())

    def weighted_vjp(t):
        return tf.constant(w, tf.float64) * tf.cast(_vjp(fn, t, upstream), tf.float64)

    with tf.GradientTape() as tape:
        tape.watch(x)
        total = tf.reduce_sum(tf.cast(w, x.dtype) * _vjp(fn, x, upstream))
    autodiff = tape.gradient(total, x)
    # An IndexedSlices second derivative (fn reads x through tf.gather) is summed into a dense tensor.
    autodiff = (np.zeros(x.shape.as_list()) if autodiff is None
                else tf.convert_to_tensor(autodiff).numpy().astype(np.float64))
    directions = _directions(autodiff, seed + 10) if fast and autodiff.size else None
    differences = _finite_differences(weighted_vjp, x, dtype, delta, directions)
    projected = differences.project(autodiff)
    error = differences.in_gradient_units(np.abs(projected - differences.values))
    max_error = float(error.max()) if error.size else 0.0
    ok = _close(projected, differences.values, rtol=rtol, atol=atol, floor=differences.floor,
                scale=differences.scale(autodiff, differences.values))
    problem = ""
    if not ok and not autodiff.any() and bool((np.abs(differences.values) > differences.floor).any()):
        problem = "cut"
    elif ok and _unresolved(differences, autodiff, rtol, atol):
        ok, problem = False, _resolution_note(differences, why)
    return ok, max_error, problem


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
    derivative is linear in the upstream gradient, ``VJP(2u) = 2 VJP(u)``, so against finite
    differences a gradient that is not is reported. A defined rule need not be linear (a clip is
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
    fast = bool(fast)
    default_rtol, default_atol = _TOLERANCES[x.dtype]
    rtol = default_rtol if rtol is None else float(rtol)
    atol = default_atol if atol is None else float(atol)
    delta = None if delta is None else float(delta)

    y = v.as_float_tensor(fn(x), "fn(x)")
    rng = np.random.default_rng(seed)
    upstream = tf.constant(rng.standard_normal(y.shape.as_list()), dtype=y.dtype)

    # The upstream gradients tried: u, 2u, -u and u/1024 (powers of two: scaling is exact). A rule
    # that reads dy changes its answer under at least one of them, a clip included (a small dy
    # passes it unclipped); one that ignores dy gives the same answer for all four.
    factors = (1.0, 2.0, -1.0, 1.0 / 1024)
    vjps = [_vjp(fn, x, upstream * k).numpy().astype(np.float64) for k in factors]
    autodiff = vjps[0]
    linear = _close(vjps[1], 2 * autodiff, rtol=rtol, atol=atol)

    dtype, why = _evaluation_dtype(fn, x) if reference is None or order == 2 else (None, "")
    differences = None
    if reference is None:
        u64 = tf.cast(upstream, tf.float64)

        def terms(t):
            return u64 * tf.cast(fn(t), tf.float64)

        differences = _finite_differences(terms, x, dtype, delta, _directions(autodiff, seed) if fast and autodiff.size else None)
        # A true derivative is linear in the upstream: the differences under k u are k times these.
        expected = [k * differences.values for k in factors]
        floors = [abs(k) * differences.floor for k in factors]
        compared = [differences.project(a) for a in vjps]
        scales = [differences.scale(a, e) for a, e in zip(vjps, expected)]
        errors = [differences.in_gradient_units(np.abs(c - e)) for c, e in zip(compared, expected)]
        against = "finite differences" + ("" if dtype == x.dtype else f" in {dtype.name}")
    else:
        expected = [_reference(reference, x, upstream * k, autodiff.shape) for k in factors]
        floors, compared, scales = [0.0] * 4, vjps, [None] * 4
        errors = [np.abs(a - e) for a, e in zip(vjps, expected)]
        against = "the reference gradient"

    max_error = float(max(e.max() for e in errors)) if autodiff.size else 0.0
    matches = all(_close(c, e, rtol=rtol, atol=atol, floor=f, scale=s)
                  for c, e, f, s in zip(compared, expected, floors, scales))
    # "Ignores dy": the autodiff gradient stayed put while the expected one moved.
    ignores = (all(_close(a, autodiff, rtol=rtol, atol=atol) for a in vjps[1:])
               and not all(_close(e, expected[0], rtol=rtol, atol=atol, floor=f + floors[0])
                           for e, f in zip(expected[1:], floors[1:])))
    ok = matches and (linear or reference is not None)
    unresolved = ok and differences is not None and _unresolved(differences, autodiff, rtol, atol)

    if unresolved:
        ok = False
        message = f"FAILED: inconclusive: {_resolution_note(differences, why)}."
    elif ok:
        rule = ("scales with the upstream gradient" if linear else
                "follows the reference for every upstream gradient tried (the rule is not linear "
                "in dy, as the reference defines it)")
        mode = "fast mode, 2 directions; " if fast and differences is not None else ""
        message = f"ok: the autodiff gradient matches {against} ({mode}max abs error {max_error:.2g}) and {rule}."
    elif not autodiff.any() and not _close(np.zeros_like(expected[0]), expected[0], rtol=rtol, atol=atol,
                                           floor=floors[0]):
        message = (f"FAILED: the autodiff gradient is zero everywhere, but {against} is not (up to "
                   f"{max_error:.2g}): a custom grad that returns zeros, or no path from x to fn(x)?")
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
        second_ok, second_error, problem = _second_order(fn, x, upstream, seed, delta, rtol, atol, dtype, fast, why)
        if second_ok:
            message = message[:-1] + (f"; order 2: its own gradient matches finite differences too "
                                       f"(max abs error {second_error:.2g}).")
        elif problem and problem != "cut":
            ok = False
            message = f"FAILED at order 2 (inconclusive): the gradient itself is right, but {problem}."
        else:
            ok = False
            what = ("autodiff sees no second derivative at all: the backward pass is cut"
                    if problem == "cut" else f"the gradient of the gradient differs from finite differences "
                    f"(max abs error {second_error:.2g}, rtol={rtol:g}, atol={atol:g})")
            message = (
                f"FAILED at order 2: the gradient itself is right, but {what}. A custom grad built "
                "with tf.stop_gradient, NumPy or tf.py_function is not differentiable: build it from "
                "differentiable TensorFlow ops, or define its gradient with a nested tf.custom_gradient."
            )
    elif order == 2:
        message += " (Order 2 not checked: the gradient itself must pass first.)"
    return GradientCheck(ok, message, max_error, linear, autodiff, None if fast and differences is not None
                         else expected[0], bool(ignores), order, second_error,
                         None if dtype is None else dtype.name, fast)


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
