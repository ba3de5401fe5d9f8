"""An explorer's model: parameter values in, the curves to draw out (private module).

It imports neither ipywidgets nor matplotlib (``tests/library/test_explorer_model.py`` checks it without
them): :mod:`gradlab.widgets` wraps it in widgets and draws its curves.

::

    forward        = fn(op(x, **params))
    gradient       = d sum(forward) / dx      (the modified gradient)
    plain_forward  = plain(x, **params)       (default fn(x))
    plain_gradient = d sum(plain_forward) / dx

computed by :class:`gradlab._compute.CompiledCurves` (one ``tf.function`` per non-numeric choice).
"""
from __future__ import annotations

import itertools
import math
from typing import Any, Callable, Iterable, Mapping, Optional, Sequence

import numpy as np
import tensorflow as tf

from gradlab import _compute

#: The arrays a model computes, in the renderer's drawing order.
CURVES = ("plain_forward", "plain_gradient", "forward", "gradient")
#: At most this many parameter combinations are visited when choosing the y limits.
MAX_SWEEP = 64

Limits = list  # [(low, high) of the forward panel, (low, high) of the gradient panel]


def finite_range(arrays: Iterable) -> Optional[tuple[float, float]]:
    """``(min, max)`` over the finite values of some arrays, or None if there are none."""
    values = np.concatenate([np.ravel(a) for a in arrays]).astype(np.float64)
    values = values[np.isfinite(values)]
    if values.size == 0:
        return None
    return float(values.min()), float(values.max())


def padded(low: float, high: float) -> tuple[float, float]:
    """Axis limits around ``[low, high]`` with 8% margins (a flat range gets a visible height).

    Flat means flat relative to the values themselves: a curve between 1e-7 and 3e-7 is shown at
    its own scale, not as a line at 0.
    """
    span = high - low
    if span <= 1e-6 * max(abs(low), abs(high)):
        half = max(0.5, 0.1 * abs(low))
        return low - half, high + half
    return low - 0.08 * span, high + 0.08 * span


def limits_of(data: Mapping[str, np.ndarray], previous: Optional[Limits] = None) -> Limits:
    """Y limits (forward panel, gradient panel) that show ``data``, widening ``previous`` if needed."""
    limits = []
    for i, keys in enumerate((("forward", "plain_forward"), ("gradient", "plain_gradient"))):
        found = finite_range([data[k] for k in keys])
        if previous is None:
            limits.append(padded(*found) if found else (-1.0, 1.0))
            continue
        low, high = previous[i]
        inside = found is None or (found[0] >= low and found[1] <= high)
        limits.append((low, high) if inside else padded(min(low, found[0]), max(high, found[1])))
    return limits


class ExplorerModel:
    """The curves of ``fn(op(x, **params))`` for any setting of the parameters, without widgets.

    Example:
      >>> import gradlab
      >>> from gradlab._explorer_model import ExplorerModel
      >>> model = ExplorerModel(gradlab.scale_gradient, ["factor"])
      >>> float(model.compute({"factor": -2.0})["gradient"].min())   # -2 * tanh'(0)
      -2.0
    """

    def __init__(
        self,
        op: Callable[..., tf.Tensor],
        names: Sequence[str],
        *,
        fn: Optional[Callable[[tf.Tensor], tf.Tensor]] = tf.tanh,
        plain: Optional[Callable[..., tf.Tensor]] = None,
        x=None,
    ):
        self.names = list(names)
        self._op = op
        shape = fn if fn is not None else (lambda t: t)
        self._x = _compute.grid(x)
        self.x = self._x.numpy()
        self._curves = _compute.CompiledCurves({
            "fn(op)": lambda t, **params: shape(op(t, **params)),
            "plain": plain if plain is not None else (lambda t, **_: shape(t)),
        }, self._x)

    def compute(self, values: Mapping[str, Any]) -> dict[str, np.ndarray]:
        """``{"x", "forward", "gradient", "plain_forward", "plain_gradient": np.ndarray}``.

        Raises:
          ValueError: if a name is not a parameter, or the op rejects the setting (its own
            message, e.g. ``clip_min must be <= clip_max``).
          TypeError: likewise, from the op.
        """
        unknown = sorted(set(values) - set(self.names))
        if unknown:
            raise ValueError(f"unknown parameter(s) {unknown}; this explorer has {sorted(self.names)}.")
        tensors, static = self._curves.split(values)
        # The op validates its arguments eagerly (gradlab's ops raise readable ValueErrors here);
        # inside the tf.function the same tensors are symbolic and such checks cannot run.
        self._op(self._x[:1], **static, **tensors)
        result = self._curves.run(tensors, static)
        (forward, gradient), (plain_forward, plain_gradient) = result["fn(op)"], result["plain"]
        return {"x": self.x.copy(), "forward": forward, "gradient": gradient,
                "plain_forward": plain_forward, "plain_gradient": plain_gradient}

    def sweep_limits(self, values: Mapping[str, Any], data: Mapping[str, np.ndarray],
                     options: Mapping[str, list]) -> Limits:
        """Fixed y limits covering ``data`` (the curves of ``values``) and every combination of the
        parameters' ``options``.

        With more than :data:`MAX_SWEEP` combinations, one parameter at a time is varied around
        the current setting. Settings the op rejects (e.g. ``clip_min > clip_max``) are skipped.
        """
        names = list(options)
        if math.prod(len(options[k]) for k in names) <= MAX_SWEEP:
            settings = [dict(zip(names, combo)) for combo in itertools.product(*options.values())]
        else:
            settings = [{k: val} for k in names for val in options[k]]
        current = {k: data[k] for k in CURVES}
        swept = [current]
        for setting in settings:
            try:
                swept.append(self.compute({**values, **setting}))
            except Exception:  # an invalid corner: skip it
                continue
        merged = {k: np.concatenate([np.ravel(d[k]) for d in swept]) for k in CURVES}
        return limits_of(merged)

    def tracing_count(self) -> int:
        """How many times TensorFlow traced the computation (one per non-numeric choice)."""
        return self._curves.tracing_count()

    def compiled_count(self) -> int:
        """How many compiled functions the model holds (one per non-numeric choice seen)."""
        return self._curves.compiled_count()
