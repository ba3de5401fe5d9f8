"""The plumbing every op of :mod:`gradlab.ops` shares in its backward pass (private module).

An ``IndexedSlices`` upstream made dense (:func:`dense`) or scaled sparsely (:func:`scaled`); a
parameter cast once from its full-precision value (:func:`cast`); variables read in the forward
pass (:func:`read`, :func:`read_params`), their values checked when the gradient runs
(:func:`after`); and the identity whose backward pass is a given rule
(:func:`identity_with_gradient`).
"""
from __future__ import annotations

from typing import Callable, Optional, Union

import numpy as np
import tensorflow as tf

from gradlab import _validation as v
from gradlab._validation import Scalar

Upstream = Union[tf.Tensor, tf.IndexedSlices]


def dense(dy: Upstream) -> tf.Tensor:
    """The upstream gradient as a dense tensor: an ``IndexedSlices`` is summed over its indices."""
    if isinstance(dy, tf.IndexedSlices):
        return tf.convert_to_tensor(dy)
    return dy


def scaled(dy: Upstream, factor: Scalar) -> Upstream:
    """``factor * dy``, keeping an ``IndexedSlices`` sparse (exact: scaling distributes over sums).

    Computed in :func:`~gradlab._validation.compute_dtype` (float32 for half precision) and rounded
    once to ``dy``'s dtype.
    """
    if isinstance(dy, tf.IndexedSlices):
        return tf.IndexedSlices(scaled(dy.values, factor), dy.indices, dy.dense_shape)
    compute = v.compute_dtype(dy.dtype)
    if compute == dy.dtype:
        return dy * cast(factor, dy.dtype)
    return tf.cast(tf.cast(dy, compute) * cast(factor, compute), dy.dtype)


def cast(param: Scalar, dtype: tf.DType) -> tf.Tensor:
    """``param`` as a tensor of ``dtype``, rounded once from its full-precision value.

    A Python number goes straight to ``dtype``: ``tf.cast(0.1, tf.float64)`` would first make a
    float32 constant and lose the bits float64 keeps. Tensors and variables are cast as usual.
    """
    if isinstance(param, (int, float)):
        with np.errstate(over="ignore"):  # a clip bound beyond the dtype's range becomes +-inf, rightly
            return tf.constant(param, dtype)
    return tf.cast(param, dtype)


def read(param: Scalar) -> Scalar:
    """``param`` with a variable read now, in the forward pass; a number or tensor as it is.

    The backward pass closes over the value read here. A custom gradient that reads a variable
    itself fails inside ``tf.cond`` (``AttributeError``) and ``tf.while_loop`` (``ValueError``)
    in a ``tf.function``, a TensorFlow limitation; a tensor read in the forward pass does not.

    A Keras variable is read through its backend ``tf.Variable`` (``_value``, when it has one),
    at full precision: reading the Keras variable inside a layer's ``call`` under ``mixed_float16``
    would autocast it to float16 and round a factor such as ``1e-6`` to a subnormal.
    """
    if not v.is_variable(param):
        return param
    backend = getattr(param, "_value", None) if not isinstance(param, tf.Variable) else None
    return tf.convert_to_tensor(backend if isinstance(backend, tf.Variable) else param)


def read_params(params: dict) -> tuple:
    """``(values, unchecked)``: the validated parameters with variables read now, and the subset of
    ``values`` that call time could not check (variables and graph tensors), for
    :func:`~gradlab._validation.run_time_checks`."""
    values = {name: read(param) for name, param in params.items()}
    unchecked = {name: values[name] for name, param in params.items() if v.static_value(param) is None}
    return values, unchecked


def check_static(param: Scalar, name: str, dtype: tf.DType) -> None:
    """Refuses, at call time, a known parameter that ``dtype`` cannot represent (see
    :func:`~gradlab._validation.check_representable`)."""
    number = v.static_value(param)
    if number is not None:
        v.check_representable(number, name, dtype)


def after(checks: list, gradient: Upstream) -> Upstream:
    """``gradient``, computed after the run-time parameter checks (if any) have passed."""
    if not checks:
        return gradient
    with tf.control_dependencies(checks):
        if isinstance(gradient, tf.IndexedSlices):
            return tf.IndexedSlices(tf.identity(gradient.values), gradient.indices, gradient.dense_shape)
        return tf.identity(gradient)


def identity_with_gradient(x: tf.Tensor, grad_fn: Callable[[tf.Tensor], Optional[tf.Tensor]]) -> tf.Tensor:
    """``tf.identity(x)`` whose backward pass sends ``grad_fn(dy)``."""

    @tf.custom_gradient
    def _identity(t):
        return tf.identity(t), grad_fn

    return _identity(x)
