"""Argument checks shared by gradlab's public functions (private module).

Every check raises at call time with a message that names the argument, shows the bad value and
says what to pass instead, so that a learner's kernel never fails later with an obscure error from
deep inside TensorFlow.
"""
from __future__ import annotations

import math
import numbers
from typing import Any, Union

import numpy as np
import tensorflow as tf

#: The dtypes whose gradients gradlab modifies.
FLOAT_DTYPES = (tf.float16, tf.bfloat16, tf.float32, tf.float64)

#: A scalar hyperparameter: a Python or NumPy number, or a scalar tensor or ``tf.Variable``
#: (read when the gradient is computed, so a variable that changes between steps is honoured).
Scalar = Union[float, int, np.floating, np.integer, tf.Tensor, tf.Variable]


def _describe(value: Any) -> str:
    text = repr(value)
    if len(text) > 60:
        text = text[:57] + "..."
    return f"{type(value).__name__} {text}"


def as_float_tensor(value: Any, name: str) -> tf.Tensor:
    """Converts ``value`` to a floating-point tensor, or raises ``TypeError`` saying what to pass."""
    if isinstance(value, tf.RaggedTensor):
        raise TypeError(
            f"{name} is a tf.RaggedTensor; gradlab ops take dense tensors. Apply the op to "
            f"{name}.flat_values and rebuild with {name}.with_flat_values(...)."
        )
    if isinstance(value, (tf.SparseTensor, tf.compat.v1.SparseTensorValue)):
        raise TypeError(
            f"{name} is a tf.SparseTensor; gradlab ops take dense tensors. Apply the op to "
            f"{name}.values and rebuild with tf.SparseTensor({name}.indices, new_values, "
            f"{name}.dense_shape), or densify with tf.sparse.to_dense({name})."
        )
    if isinstance(value, (str, bytes)) or value is None:
        raise TypeError(f"{name} must be a floating-point tensor, array or list; got {_describe(value)}.")
    try:
        tensor = tf.convert_to_tensor(value)
    except (TypeError, ValueError) as err:
        raise TypeError(
            f"{name} must be a floating-point tensor, NumPy array or list of floats; "
            f"got {_describe(value)}, which TensorFlow cannot convert ({err})."
        ) from None
    if tensor.dtype not in FLOAT_DTYPES:
        raise TypeError(
            f"{name} must have a floating dtype (float16, bfloat16, float32 or float64) because only "
            f"floating-point values have gradients; got dtype {tensor.dtype.name}. "
            f"Cast it first, e.g. tf.cast({name}, tf.float32), or write 1.0 rather than 1."
        )
    return tensor


def _static_scalar(value: Any, name: str) -> float | None:
    """The value of a scalar parameter if it is known now (None for variables and graph tensors)."""
    if isinstance(value, bool) or isinstance(value, np.bool_):
        raise TypeError(f"{name} must be a real number, not a bool; got {value!r}.")
    if isinstance(value, numbers.Real):
        return float(value)
    if isinstance(value, np.ndarray):
        if value.ndim != 0:
            raise ValueError(f"{name} must be a scalar; got an array of shape {value.shape}.")
        if not (np.issubdtype(value.dtype, np.floating) or np.issubdtype(value.dtype, np.integer)):
            raise TypeError(f"{name} must be a real number; got an array of dtype {value.dtype}.")
        return float(value)
    if isinstance(value, (tf.Tensor, tf.Variable)):
        dtype = value.dtype.base_dtype
        if not (dtype.is_floating or dtype.is_integer):
            raise TypeError(f"{name} must be a real number; got a tensor of dtype {dtype.name}.")
        if value.shape.rank is not None and value.shape.rank != 0:
            raise ValueError(
                f"{name} must be a scalar; got a tensor of shape {value.shape}. "
                "Use map_gradient for an elementwise rule."
            )
        if isinstance(value, tf.Variable):
            return None  # read when the gradient is computed
        constant = tf.get_static_value(value)
        return None if constant is None else float(constant)
    raise TypeError(
        f"{name} must be a real number, a scalar tensor or a tf.Variable; got {_describe(value)}."
    )


def scalar(value: Any, name: str, *, positive: bool = False) -> Scalar:
    """Validates a scalar hyperparameter; returns it unchanged (Python numbers as ``float``).

    Raises ``TypeError`` for non-numbers and ``ValueError`` for non-finite values (and non-positive
    ones when ``positive``), whenever the value is known at call time.
    """
    static = _static_scalar(value, name)
    if static is not None:
        if not math.isfinite(static):
            raise ValueError(f"{name} must be finite; got {static!r}.")
        if positive and static <= 0:
            raise ValueError(f"{name} must be > 0; got {static!r}.")
    if isinstance(value, (numbers.Real, np.ndarray, np.number)):
        return float(value)
    return value


def static_value(value: Scalar) -> float | None:
    """The Python value of an already validated scalar, or None if it is only known at run time."""
    if isinstance(value, float):
        return value
    if isinstance(value, tf.Variable):
        return None
    constant = tf.get_static_value(value)
    return None if constant is None else float(constant)


def check_callable(fn: Any, name: str) -> None:
    if not callable(fn):
        raise TypeError(f"{name} must be callable (a function); got {_describe(fn)}.")
