"""Finite differences for :func:`gradlab.check_gradient` (private module).

Central differences of ``L(t) = sum(terms(t))``, taken in the widest dtype ``fn`` accepts
(:func:`evaluation_dtype`), with the step each element actually took and the rounding noise each
value carries (:class:`Differences`); in full (two evaluations per element) or, in fast mode, along
two directions only (:func:`directions`).

Why not ``tf.test.compute_gradient``: it gives neither the noise floor nor a two-direction mode,
differences in ``x``'s own dtype, and divides by the nominal step even where ``x + delta`` rounds
(with the default delta 1/1024, in float32 above 2**14: twice the derivative or zero). On float64
inputs the two agree (``tests/library/test_finite_differences.py``).
"""
from __future__ import annotations

import dataclasses
from typing import Optional, Tuple

import numpy as np
import tensorflow as tf

# The unit roundoff (machine epsilon) of each dtype: the noise finite differences carry.
EPS = {tf.float64: 2.0**-52, tf.float32: 2.0**-23, tf.float16: 2.0**-10, tf.bfloat16: 2.0**-7}
# TensorFlow's default finite-difference step (tf.test.compute_gradient), exact in binary.
DEFAULT_DELTA = 1.0 / 1024
# Finite differences are exact only up to the rounding of the two evaluations: |L(x+h) - L(x-h)|
# carries up to ROUNDING_UNITS * eps * sum|u * fn(x)| of noise (two units for each evaluation).
ROUNDING_UNITS = 4.0


def evaluation_dtype(fn, x: tf.Tensor) -> Tuple[tf.DType, str]:
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


def default_steps(x64: np.ndarray, dtype: tf.DType, delta) -> np.ndarray:
    """The finite-difference step per element: ``delta``, or the default for ``dtype``.

    float64 and float32: TensorFlow's ``1/1024``. float16 and bfloat16 (only when ``fn`` accepts no
    wider dtype): the textbook ``eps**(1/3) * max(1, |x|)``, which balances truncation and rounding
    and moves ``x`` by many units in the last place.
    """
    if delta is not None:
        return np.full(x64.shape, float(delta))
    if dtype in (tf.float16, tf.bfloat16):
        return EPS[dtype] ** (1.0 / 3.0) * np.maximum(1.0, np.abs(x64))
    return np.full(x64.shape, DEFAULT_DELTA)


@dataclasses.dataclass(frozen=True)
class Differences:
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
            return None  # the comparison's default: the largest |element| of either
        return np.maximum(np.abs(self.displacements) @ np.abs(gradient.ravel()), np.abs(expected))

    def in_gradient_units(self, error: np.ndarray) -> np.ndarray:
        """An error of ``values`` in units of the gradient (fast: along a direction of max-norm 1)."""
        if self.displacements is None:
            return error
        return error / np.abs(self.displacements).max(axis=1)


def finite_differences(terms, x: tf.Tensor, dtype: tf.DType, delta, directions) -> Differences:
    """Central differences of ``L(t) = sum(terms(t))`` at ``x`` evaluated in ``dtype``.

    ``terms(t)`` returns float64 terms; the perturbed points are rounded to ``dtype`` and the step
    actually taken (``fl(x + h) - fl(x - h)``) is divided by, so a step the dtype cannot represent
    exactly costs nothing. Full (``directions`` None): ``2 n`` evaluations for ``n`` elements.
    Fast: two per direction (each of max-norm 1, scaled by the steps).
    """
    np_dtype = dtype.as_numpy_dtype
    x64 = np.asarray(x.numpy(), np.float64)
    steps = default_steps(x64, dtype, delta)
    point = x64.astype(np_dtype)
    at_x = terms(tf.constant(point))
    eps = max(EPS[dtype], EPS.get(at_x.dtype, 0.0))
    noise = ROUNDING_UNITS * eps * float(tf.reduce_sum(tf.abs(at_x)))

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
        return Differences(values.reshape(shape), (noise / taken).reshape(shape), None, dtype)
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
    return Differences(np.array(values), np.full(len(values), noise), np.array(displacements), dtype)


def directions(gradient: np.ndarray, seed: int) -> list:
    """Fast mode's two directions (max-norm 1): along the autodiff gradient, and a random one.

    Along the gradient itself a wrong sign, a zero or a wrong size shows in full; the random
    direction catches errors orthogonal to it.
    """
    rng = np.random.default_rng(seed + 2)
    first = gradient if np.abs(gradient).max(initial=0.0) > 0 else rng.standard_normal(gradient.shape)
    second = rng.standard_normal(gradient.shape)
    return [d / np.abs(d).max() for d in (first, second)]
