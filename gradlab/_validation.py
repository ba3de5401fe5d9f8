"""Argument checks shared by gradlab's public functions (private module).

Its names are public to the package (``describe``, ``scalar``, ``check_figsize``...): every gradlab
module calls them, and none of gradlab reaches into another module's ``_private`` names.

Every check raises at call time with a message that names the argument, shows the bad value and
says what to pass instead, so that a learner's kernel never fails later with an obscure error from
deep inside TensorFlow.
"""
from __future__ import annotations

import math
import numbers
import sys
from typing import Any, List, Union

import numpy as np
import tensorflow as tf

#: The dtypes whose gradients gradlab modifies.
FLOAT_DTYPES = (tf.float16, tf.bfloat16, tf.float32, tf.float64)

#: A scalar hyperparameter: a Python or NumPy number, or a scalar tensor, ``tf.Variable`` or
#: ``keras.Variable`` (a variable is read when the op runs its forward pass, so a variable that
#: changes between steps is honoured).
Scalar = Union[float, int, np.floating, np.integer, tf.Tensor, tf.Variable]


def is_variable(value: Any) -> bool:
    """Whether ``value`` is a ``tf.Variable`` or a Keras 3 variable (``layer.add_weight(...)``)."""
    if isinstance(value, tf.Variable):
        return True
    keras = sys.modules.get("keras")  # TensorFlow imports Keras; never import it here
    keras_variable = getattr(keras, "Variable", None)
    if isinstance(keras_variable, type) and isinstance(value, keras_variable):
        return True
    # Keras 3.3 exports a keras.Variable that its layers' variables are not instances of; they
    # derive from its KerasVariable.
    return any(cls.__name__ == "KerasVariable" and cls.__module__.startswith("keras.")
               for cls in type(value).__mro__)


def describe(value: Any) -> str:
    """A value for an error message: its type and a repr cut to 60 characters.

    Example:
      >>> from gradlab._validation import describe
      >>> describe("tanh"), describe(list(range(30)))
      ("str 'tanh'", 'list [0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16...')
    """
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
    keras_tensor = getattr(sys.modules.get("keras"), "KerasTensor", None)
    if isinstance(keras_tensor, type) and isinstance(value, keras_tensor):
        raise TypeError(
            f"{name} is a KerasTensor, a symbolic input of a functional Keras model; gradlab ops run "
            "on real tensors. In a model use the layer that wraps the op (gradlab.layers.ScaleGradient, "
            "ClipGradient, ClipGradientNorm, GradientReversal), or call the op inside your own layer's call()."
        )
    if isinstance(value, (str, bytes)) or value is None:
        raise TypeError(f"{name} must be a floating-point tensor, array or list; got {describe(value)}.")
    try:
        tensor = tf.convert_to_tensor(value)
    except (TypeError, ValueError) as err:
        raise TypeError(
            f"{name} must be a floating-point tensor, NumPy array or list of floats; "
            f"got {describe(value)}, which TensorFlow cannot convert ({err})."
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
        try:
            return float(value)
        except OverflowError:  # an int beyond the float range
            raise ValueError(
                f"{name} must be finite; got {describe(value)}, beyond the range of a float."
            ) from None
    if isinstance(value, np.ndarray):
        if value.ndim != 0:
            raise ValueError(f"{name} must be a scalar; got an array of shape {value.shape}.")
        if not (np.issubdtype(value.dtype, np.floating) or np.issubdtype(value.dtype, np.integer)):
            raise TypeError(f"{name} must be a real number; got an array of dtype {value.dtype}.")
        return float(value)
    if isinstance(value, tf.Tensor) or is_variable(value):
        dtype = tf.as_dtype(value.dtype).base_dtype  # keras.Variable.dtype is a string
        if not (dtype.is_floating or dtype.is_integer):
            raise TypeError(f"{name} must be a real number; got a tensor of dtype {dtype.name}.")
        shape = tf.TensorShape(value.shape)
        if shape.rank is not None and shape.rank != 0:
            raise ValueError(
                f"{name} must be a scalar; got a tensor of shape {shape}. "
                "Use map_gradient for an elementwise rule."
            )
        if is_variable(value):
            return None  # read in the forward pass; checked when the gradient is computed
        constant = tf.get_static_value(value)
        return None if constant is None else float(constant)
    raise TypeError(
        f"{name} must be a real number, a scalar tensor or a tf.Variable; got {describe(value)}."
    )


def _check_number(number: float, name: str, positive: bool) -> None:
    if not math.isfinite(number):
        raise ValueError(f"{name} must be finite; got {number!r}.")
    if positive and number <= 0:
        raise ValueError(f"{name} must be > 0; got {number!r}.")


def compute_dtype(dtype: tf.DType) -> tf.DType:
    """The dtype a gradient of ``dtype`` is computed in: float32 for float16 and bfloat16, else ``dtype``.

    Half-precision gradients are computed in float32 and the result is rounded once to their dtype,
    so that a parameter such as ``1e-6`` is not first rounded to a float16 subnormal (or to zero).

    Example:
      >>> import tensorflow as tf
      >>> from gradlab._validation import compute_dtype
      >>> compute_dtype(tf.float16).name, compute_dtype(tf.float64).name
      ('float32', 'float64')
    """
    return tf.float32 if dtype in (tf.float16, tf.bfloat16) else dtype


def _normal_range(dtype: tf.DType) -> tuple:
    info = np.finfo(dtype.as_numpy_dtype)
    return float(info.tiny), float(info.max)


def representable_requirement(dtype: tf.DType) -> str:
    """The words for :func:`check_representable`'s condition, for error messages."""
    tiny, biggest = _normal_range(dtype)
    return f"0 or of magnitude between {tiny:.4g} and {biggest:.4g} (a normal {dtype.name} number)"


def check_representable(number: float, name: str, dtype: tf.DType) -> None:
    """Raises ``ValueError`` unless ``number`` is 0 or a normal number of ``dtype``.

    A parameter that the arithmetic rounds to ``dtype`` must survive the rounding: a value beyond
    the dtype's largest number would become ``inf``, and one below its smallest normal number
    would become a subnormal (a few significant bits) or zero. Both would silently change the
    gradient, so they are refused, naming the dtype (see :func:`compute_dtype`).

    Example:
      >>> import tensorflow as tf
      >>> from gradlab._validation import check_representable
      >>> check_representable(1e-6, "factor", tf.float32)  # fine
      >>> check_representable(1e-40, "factor", tf.float32)
      Traceback (most recent call last):
      ...
      ValueError: factor=1e-40 cannot be represented in float32, ... between 1.175e-38 and 3.403e+38 ...
    """
    tiny, biggest = _normal_range(dtype)
    if number != 0 and not tiny <= abs(number) <= biggest:
        raise ValueError(
            f"{name}={number!r} cannot be represented in {dtype.name}, the dtype this gradient is "
            f"computed in: it must be {representable_requirement(dtype)}. Pass a value in that "
            "range, or use float64 tensors."
        )


def scalar(value: Any, name: str, *, positive: bool = False) -> Scalar:
    """Validates a scalar hyperparameter; returns it unchanged (Python numbers as ``float``).

    Raises ``TypeError`` for non-numbers and ``ValueError`` for non-finite values (and non-positive
    ones when ``positive``), whenever the value is known at call time.
    """
    static = _static_scalar(value, name)
    if static is not None:
        _check_number(static, name, positive)
    if isinstance(value, (numbers.Real, np.ndarray, np.number)):
        return float(value)
    return value


def static_value(value: Scalar) -> float | None:
    """The Python value of an already validated scalar, or None if it is only known at run time."""
    if isinstance(value, float):
        return value
    if is_variable(value):
        return None
    constant = tf.get_static_value(value)
    return None if constant is None else float(constant)


def run_time_checks(params: Any, *, positive: bool = False,
                    dtype: tf.DType | None = None) -> List[tf.Operation]:
    """Checks parameters whose values are only known when the op runs.

    ``params`` is a dict ``{name: value}`` of the parameters that could not be checked at call
    time (variables, already read, and graph tensors; the caller leaves out the rest). Eagerly an
    invalid value raises ``ValueError`` with the call-time message; in a graph (``tf.function``,
    ``tf.compat.v1``) the checks are returned as assert ops for ``tf.control_dependencies``, which
    raise ``tf.errors.InvalidArgumentError`` when they run. XLA drops assert ops, so under
    ``jit_compile=True`` nothing is checked. With ``dtype``, each value must also be 0 or a normal
    number of that dtype (:func:`check_representable`).
    """
    checks = []
    requirement = "finite and > 0" if positive else "finite"
    if dtype is not None:
        requirement += f" and {representable_requirement(dtype)}"
    for name, value in params.items():
        if tf.executing_eagerly():
            number = float(tf.convert_to_tensor(value))
            _check_number(number, name, positive)
            if dtype is not None:
                check_representable(number, name, dtype)
            continue
        number = tf.cast(value, tf.float64)
        valid = tf.math.is_finite(number)
        if positive:
            valid = tf.logical_and(valid, number > 0)
        if dtype is not None:
            tiny, biggest = _normal_range(dtype)
            magnitude = tf.abs(number)
            normal = tf.logical_and(magnitude >= tiny, magnitude <= biggest)
            valid = tf.logical_and(valid, tf.logical_or(tf.equal(number, 0.0), normal))
        message = f"{name} must be {requirement}; got"
        checks.append(tf.debugging.Assert(valid, [message, number], name=f"check_{name}"))
    return checks


def check_clip_order(clip_min: float, clip_max: float) -> None:
    """Raises ``ValueError`` unless ``clip_min <= clip_max`` (two Python numbers)."""
    if clip_min > clip_max:
        raise ValueError(
            f"clip_min must be <= clip_max; got clip_min={clip_min!r} > clip_max={clip_max!r}. "
            "Swap them, or use a symmetric range such as (-c, c)."
        )


def run_time_order_check(clip_min: Any, clip_max: Any) -> List[tf.Operation]:
    """``clip_min <= clip_max`` for bounds known only when the op runs (as above; the caller
    calls it only when a bound could not be checked at call time)."""
    if tf.executing_eagerly():
        check_clip_order(float(tf.convert_to_tensor(clip_min)), float(tf.convert_to_tensor(clip_max)))
        return []
    low, high = tf.cast(clip_min, tf.float64), tf.cast(clip_max, tf.float64)
    return [tf.debugging.Assert(tf.logical_not(low > high),
                                ["clip_min must be <= clip_max; got clip_min, clip_max =", low, high],
                                name="check_clip_order")]


def check_figsize(figsize: Any) -> None:
    """Raises ``ValueError`` unless ``figsize`` is ``(width, height)``: two positive finite numbers."""
    ok = (
        isinstance(figsize, (tuple, list)) and len(figsize) == 2
        and all(isinstance(s, numbers.Real) and not isinstance(s, bool) and math.isfinite(s) and s > 0
                for s in figsize)
    )
    if not ok:
        raise ValueError(
            f"figsize must be (width, height) in inches, two positive numbers; got {figsize!r}."
        )


def check_callable(fn: Any, name: str) -> None:
    """Raises ``TypeError`` naming ``name`` unless ``fn`` is callable."""
    if not callable(fn):
        raise TypeError(f"{name} must be callable (a function); got {describe(fn)}.")
