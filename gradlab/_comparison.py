"""How :func:`gradlab.check_gradient` compares autodiff with its reference (private module).

The scale-aware test (:func:`close`), whether finite differences resolved the gradient at all
(:func:`unresolved`), and the first-order verdict (:func:`verdict`) on a :class:`Comparison`: the
autodiff gradient under each upstream tried, beside what it should be.
"""
from __future__ import annotations

import dataclasses
from typing import Optional

import numpy as np

from gradlab import _finite_differences as fd


def close(actual: np.ndarray, expected: np.ndarray, *, rtol: float, atol: float, floor=0.0,
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


def unresolved(differences: fd.Differences, autodiff: np.ndarray, rtol: float, atol: float) -> bool:
    """Whether finite differences could not tell this gradient from zero (nothing was checked).

    True when a zero gradient would have passed too although their noise floor is not zero, unless
    autodiff and finite differences are both exactly zero (a constant function).
    """
    zero = np.zeros_like(autodiff)
    projected_zero = differences.project(zero)
    if not differences.floor.any() or not (differences.values.any() or autodiff.any()):
        return False
    return close(projected_zero, differences.values, rtol=rtol, atol=atol, floor=differences.floor,
                 scale=differences.scale(zero, differences.values))


def resolution_note(differences: fd.Differences, why: str) -> str:
    """Why finite differences cannot resolve the gradient, and what to do."""
    noise = float(differences.in_gradient_units(differences.floor).max())
    size = float(np.abs(differences.in_gradient_units(differences.values)).max(initial=0.0))
    advice = "pass a larger delta"
    if why:
        advice += f", or make fn accept a float64 input ({why})"
    return (f"finite differences in {differences.dtype.name} cannot tell this gradient from zero: their "
            f"rounding noise (up to {noise:.2g}) is as large as the gradient (up to {size:.2g}); {advice}")


@dataclasses.dataclass(frozen=True)
class Comparison:
    """The autodiff gradient under each upstream tried (``u``, ``2u``, ``-u``, ``u/1024``) beside what it should be.

    ``compared[i]`` is autodiff as the reference sees it (fast mode: projected on the directions),
    ``expected[i]`` the reference's, ``floors[i]`` the reference's rounding noise (0 for an exact
    one), ``scales[i]`` the size the tolerances are relative to (None: the comparison's default) and
    ``errors[i]`` the error in gradient units; ``against`` names the reference in messages.
    """

    compared: list
    expected: list
    floors: list
    scales: list
    errors: list
    against: str
    differences: Optional[fd.Differences] = None


@dataclasses.dataclass(frozen=True)
class Verdict:
    """The first-order verdict: ``ok``, and what the message explains."""

    ok: bool
    max_error: float
    linear: bool
    ignores: bool
    unresolved: bool


def verdict(comparison: Comparison, vjps: list, *, rtol: float, atol: float, defined_rule: bool) -> Verdict:
    """Whether autodiff matches under every upstream and, unless the rule is defined by a
    reference, is linear in it; whether it ignores the upstream; whether anything was resolved."""
    c, autodiff = comparison, vjps[0]
    # Linear: twice the upstream gives twice the gradient, and its negation the negated gradient
    # (a rule that reads |dy| scales under 2u but not under -u).
    linear = close(vjps[1], 2 * autodiff, rtol=rtol, atol=atol) and close(vjps[2], -autodiff, rtol=rtol, atol=atol)
    max_error = float(max(e.max() for e in c.errors)) if autodiff.size else 0.0
    matches = all(close(a, e, rtol=rtol, atol=atol, floor=f, scale=scale)
                  for a, e, f, scale in zip(c.compared, c.expected, c.floors, c.scales))
    # "Ignores dy": the autodiff gradient stayed put while the expected one moved.
    ignores = (all(close(a, autodiff, rtol=rtol, atol=atol) for a in vjps[1:])
               and not all(close(e, c.expected[0], rtol=rtol, atol=atol, floor=f + c.floors[0])
                           for e, f in zip(c.expected[1:], c.floors[1:])))
    ok = matches and (linear or defined_rule)
    inconclusive = ok and c.differences is not None and unresolved(c.differences, autodiff, rtol, atol)
    return Verdict(ok=ok and not inconclusive, max_error=max_error, linear=linear, ignores=bool(ignores),
                   unresolved=inconclusive)
