"""Gradient-modifying ops: the forward pass stays exactly as it is, the backward pass changes.

Every op here computes its forward value with ordinary TensorFlow ops and applies a rule to the
upstream gradient ``dy`` in the backward pass. Five are the identity in the forward pass
(:func:`map_gradient`, :func:`scale_gradient`, :func:`clip_gradient`, :func:`clip_gradient_norm`,
:func:`reverse_gradient`); :func:`straight_through` returns ``forward`` bitwise and sends the
gradient through ``backward``; :func:`surrogate_step` is the step ``1[x > 0]`` with a triangular
surrogate gradient. They accept tensors, NumPy arrays and Python lists of floats, keep float16,
bfloat16, float32 and float64, and work eagerly, inside ``tf.function`` and with ``jit_compile=True``.

The upstream gradient may arrive as a ``tf.IndexedSlices`` (when the op's output is read by
``tf.gather`` or an ``Embedding``; an index can repeat, and then its slices add up). Every op gives
the gradient it gives for the equivalent dense ``dy``: a scale keeps the sparse form (scaling each
slice is exact and cheaper), and a rule that is not linear in ``dy`` (a clip, a norm, ``fn`` of
:func:`map_gradient`) is applied to the summed, dense gradient.

Scalar hyperparameters (``factor``, ``clip_min``, ``max_norm``, ``width``...) may be Python numbers
or scalar tensors; a ``tf.Variable`` (or a ``keras.Variable``, e.g. a layer weight) is read when the
gradient is computed, so changing it between training steps takes effect without retracing. Its
value is checked then as well: an invalid value (``nan``, ``clip_min > clip_max``, ``max_norm <= 0``)
raises ``ValueError`` eagerly and ``tf.errors.InvalidArgumentError`` in a graph, instead of a
silently wrong gradient (XLA drops these checks: under ``jit_compile=True`` nothing is checked).
"""
from __future__ import annotations

from typing import Callable, Optional, Union

import tensorflow as tf

from gradlab import _validation as v
from gradlab._validation import Scalar

__all__ = [
    "map_gradient",
    "scale_gradient",
    "clip_gradient",
    "clip_gradient_norm",
    "reverse_gradient",
    "straight_through",
    "surrogate_step",
]

GradientFn = Callable[[tf.Tensor], Optional[tf.Tensor]]
Upstream = Union[tf.Tensor, tf.IndexedSlices]


def _dense(dy: Upstream) -> tf.Tensor:
    """The upstream gradient as a dense tensor: an ``IndexedSlices`` is summed over its indices."""
    if isinstance(dy, tf.IndexedSlices):
        return tf.convert_to_tensor(dy)
    return dy


def _scaled(dy: Upstream, factor: tf.Tensor) -> Upstream:
    """``factor * dy``, keeping an ``IndexedSlices`` sparse (exact: scaling distributes over sums)."""
    if isinstance(dy, tf.IndexedSlices):
        return tf.IndexedSlices(dy.values * factor, dy.indices, dy.dense_shape)
    return dy * factor


def _cast(param: Scalar, dtype: tf.DType) -> tf.Tensor:
    """``param`` as a tensor of ``dtype``, rounded once from its full-precision value.

    A Python number goes straight to ``dtype``: ``tf.cast(0.1, tf.float64)`` would first make a
    float32 constant and lose the bits float64 keeps. Tensors and variables are cast as usual.
    """
    if isinstance(param, (int, float)):
        return tf.constant(param, dtype)
    return tf.cast(param, dtype)


def _after(checks: list, gradient: Upstream) -> Upstream:
    """``gradient``, computed after the run-time parameter checks (if any) have passed."""
    if not checks:
        return gradient
    with tf.control_dependencies(checks):
        if isinstance(gradient, tf.IndexedSlices):
            return tf.IndexedSlices(tf.identity(gradient.values), gradient.indices, gradient.dense_shape)
        return tf.identity(gradient)


def _identity_with_gradient(x: tf.Tensor, grad_fn: GradientFn) -> tf.Tensor:
    """``tf.identity(x)`` whose backward pass sends ``grad_fn(dy)``."""

    @tf.custom_gradient
    def _identity(t):
        return tf.identity(t), grad_fn

    return _identity(x)


def map_gradient(x, fn: GradientFn) -> tf.Tensor:
    """Identity in the forward pass; sends ``fn(dy)`` back in the backward pass.

    The general form of every gradient modification in gradlab::

        forward:   y = x                      (bitwise: same values, dtype and shape)
        backward:  dL/dx = fn(dL/dy)

    ``fn`` receives the upstream gradient ``dy`` (a dense tensor of ``x``'s shape and dtype, also
    when TensorFlow propagates it as a ``tf.IndexedSlices``: the slices are summed first) and must
    return a tensor of the same shape and dtype, or ``None`` to send no gradient (like
    ``tf.stop_gradient``). It runs only when a gradient is computed, so it may read
    ``tf.Variable`` values that change between steps.

    Args:
      x: a floating-point tensor, NumPy array or list.
      fn: the rule applied to the upstream gradient.

    Returns:
      A tensor equal to ``x``.

    Raises:
      TypeError: if ``x`` is not floating-point or ``fn`` is not callable; when the gradient is
        computed, if ``fn`` returns another dtype.
      ValueError: when the gradient is computed, if ``fn`` returns another shape.

    Example:
      >>> import tensorflow as tf, gradlab
      >>> x = tf.constant([1.0, -2.0])
      >>> with tf.GradientTape() as tape:
      ...     tape.watch(x)
      ...     y = gradlab.map_gradient(x, lambda dy: dy ** 2)
      >>> tape.gradient(y, x, output_gradients=tf.constant([3.0, 4.0])).numpy()
      array([ 9., 16.], dtype=float32)
    """
    v.check_callable(fn, "fn")
    x = v.as_float_tensor(x, "x")

    def grad(dy):
        dy = _dense(dy)
        result = fn(dy)
        if result is None:
            return None
        result = tf.convert_to_tensor(result)
        if result.dtype != dy.dtype:
            raise TypeError(
                f"fn must return the upstream gradient's dtype {dy.dtype.name}; it returned "
                f"{result.dtype.name}. Cast inside fn, e.g. tf.cast(..., dy.dtype)."
            )
        if not result.shape.is_compatible_with(dy.shape):
            raise ValueError(
                f"fn must return the upstream gradient's shape {dy.shape}; it returned shape "
                f"{result.shape}. A gradient has the shape of the value it belongs to."
            )
        return result

    return _identity_with_gradient(x, grad)


def scale_gradient(x, factor: Scalar) -> tf.Tensor:
    """Identity in the forward pass; multiplies the gradient by ``factor`` in the backward pass.

    ::

        forward:   y = x
        backward:  dL/dx = factor * dL/dy

    Args:
      x: a floating-point tensor, NumPy array or list.
      factor: a finite real number, scalar tensor or ``tf.Variable``. ``0`` acts like
        ``tf.stop_gradient`` (but sends zeros, not ``None``); a negative factor reverses the gradient.

    Returns:
      A tensor equal to ``x``.

    Raises:
      TypeError: if ``x`` is not floating-point or ``factor`` is not a real number.
      ValueError: if ``factor`` is not finite or not a scalar.

    Example:
      >>> import tensorflow as tf, gradlab
      >>> x = tf.constant(3.0)
      >>> with tf.GradientTape() as tape:
      ...     tape.watch(x)
      ...     y = gradlab.scale_gradient(x, 5.0) ** 2
      >>> float(y), float(tape.gradient(y, x))  # forward 3**2; gradient 5 * 2*3
      (9.0, 30.0)
    """
    factor = v.scalar(factor, "factor")
    x = v.as_float_tensor(x, "x")

    def grad(dy):
        checks = v.run_time_checks({"factor": factor})
        return _after(checks, _scaled(dy, _cast(factor, dy.dtype)))

    return _identity_with_gradient(x, grad)


def clip_gradient(x, clip_min: Scalar, clip_max: Scalar) -> tf.Tensor:
    """Identity in the forward pass; clips each gradient element to ``[clip_min, clip_max]``.

    ::

        forward:   y = x
        backward:  dL/dx = clip_by_value(dL/dy, clip_min, clip_max)   (elementwise)

    Args:
      x: a floating-point tensor, NumPy array or list.
      clip_min: the lower bound, a finite real number, scalar tensor or ``tf.Variable``.
      clip_max: the upper bound, likewise; ``clip_min <= clip_max``.

    Returns:
      A tensor equal to ``x``.

    Raises:
      TypeError: if ``x`` is not floating-point or a bound is not a real number.
      ValueError: if a bound is not finite, or ``clip_min > clip_max``.

    Example:
      >>> import tensorflow as tf, gradlab
      >>> x = tf.constant([3.0])
      >>> with tf.GradientTape() as tape:
      ...     tape.watch(x)
      ...     y = gradlab.clip_gradient(x, -0.1, 0.1)
      >>> tape.gradient(y, x).numpy()  # a plain identity would send 1.0
      array([0.1], dtype=float32)
    """
    clip_min = v.scalar(clip_min, "clip_min")
    clip_max = v.scalar(clip_max, "clip_max")
    low, high = v.static_value(clip_min), v.static_value(clip_max)
    if low is not None and high is not None:
        v.check_clip_order(low, high)
    x = v.as_float_tensor(x, "x")

    def grad(dy):
        checks = v.run_time_checks({"clip_min": clip_min, "clip_max": clip_max})
        checks += v.run_time_order_check(clip_min, clip_max)
        low, high = _cast(clip_min, dy.dtype), _cast(clip_max, dy.dtype)
        return _after(checks, tf.clip_by_value(_dense(dy), low, high))

    return _identity_with_gradient(x, grad)


def clip_gradient_norm(x, max_norm: Scalar) -> tf.Tensor:
    """Identity in the forward pass; rescales the gradient so its L2 norm is at most ``max_norm``.

    The norm is taken over the whole upstream tensor (``tf.clip_by_norm``)::

        forward:   y = x
        backward:  dL/dx = dL/dy * min(1, max_norm / ||dL/dy||_2)

    This is the ``clip_grad`` of the source material's ``py_func`` answer, in TF2 code. For
    float16 and bfloat16 the norm is computed in float32 and the result rounded once to the dtype:
    in float16 the sum of squares overflows as soon as an element exceeds 256 (common with loss
    scaling), and ``tf.clip_by_norm`` would then send back zeros.

    Args:
      x: a floating-point tensor, NumPy array or list.
      max_norm: a finite real number > 0, scalar tensor or ``tf.Variable``.

    Returns:
      A tensor equal to ``x``.

    Raises:
      TypeError: if ``x`` is not floating-point or ``max_norm`` is not a real number.
      ValueError: if ``max_norm`` is not finite or ``max_norm <= 0``.

    Example:
      >>> import tensorflow as tf, gradlab
      >>> x = tf.constant([1.0, 1.0])
      >>> with tf.GradientTape() as tape:
      ...     tape.watch(x)
      ...     y = gradlab.clip_gradient_norm(x, 1.0)
      >>> tape.gradient(y, x, output_gradients=tf.constant([3.0, 4.0])).numpy()  # norm 5 -> 1
      array([0.6, 0.8], dtype=float32)
    """
    max_norm = v.scalar(max_norm, "max_norm", positive=True)
    x = v.as_float_tensor(x, "x")

    def grad(dy):
        checks = v.run_time_checks({"max_norm": max_norm}, positive=True)
        return _after(checks, _clip_by_norm(_dense(dy), max_norm))

    return _identity_with_gradient(x, grad)


def _clip_by_norm(dy: tf.Tensor, max_norm: Scalar) -> tf.Tensor:
    """``tf.clip_by_norm(dy, max_norm)``, through float32 for the half-precision dtypes."""
    if dy.dtype in (tf.float16, tf.bfloat16):
        clipped = tf.clip_by_norm(tf.cast(dy, tf.float32), _cast(max_norm, tf.float32))
        return tf.cast(clipped, dy.dtype)
    return tf.clip_by_norm(dy, _cast(max_norm, dy.dtype))


def reverse_gradient(x, factor: Scalar = 1.0) -> tf.Tensor:
    """Identity in the forward pass; sends ``-factor * dy`` back (a gradient reversal layer).

    Used in domain-adversarial training (Ganin & Lempitsky, 2015): the features are trained to
    *maximise* the loss of whatever sits after this op::

        forward:   y = x
        backward:  dL/dx = -factor * dL/dy

    Args:
      x: a floating-point tensor, NumPy array or list.
      factor: a finite real number, scalar tensor or ``tf.Variable`` (often ramped up in training).

    Returns:
      A tensor equal to ``x``: ``scale_gradient(x, -factor)``.

    Raises:
      TypeError, ValueError: as :func:`scale_gradient`, naming ``factor``.

    Example:
      >>> import tensorflow as tf, gradlab
      >>> w = tf.Variable(2.0)                      # a variable: the tape watches it already
      >>> with tf.GradientTape() as tape:
      ...     y = 3.0 * gradlab.reverse_gradient(w, 0.5)
      >>> float(y), float(tape.gradient(y, w))
      (6.0, -1.5)
    """
    factor = v.scalar(factor, "factor")
    x = v.as_float_tensor(x, "x")

    def grad(dy):
        checks = v.run_time_checks({"factor": factor})
        return _after(checks, _scaled(dy, -_cast(factor, dy.dtype)))

    return _identity_with_gradient(x, grad)


def straight_through(forward, backward) -> tf.Tensor:
    """The value of ``forward`` with the gradient of ``backward`` (a straight-through estimator).

    ::

        value:     y = forward                 (bitwise)
        backward:  dL/d(backward) = dL/dy,     dL/d(forward) = None

    The classic trick ``backward + tf.stop_gradient(forward - backward)`` has the same gradient,
    but its value is computed in floating point as ``b + (f - b)``, which rounds and is then *not*
    bitwise ``forward``. This op returns ``forward`` itself.

    Args:
      forward: the tensor whose value to use, for instance ``tf.round(x)``.
      backward: a tensor of the same shape and dtype whose gradient to use, for instance ``x``.

    Returns:
      A tensor equal to ``forward``.

    Raises:
      TypeError: if either is not floating-point, or their dtypes differ.
      ValueError: if their shapes are incompatible.

    Example:
      >>> import tensorflow as tf, gradlab
      >>> x = tf.constant([0.2, 1.7])
      >>> with tf.GradientTape() as tape:
      ...     tape.watch(x)
      ...     y = gradlab.straight_through(tf.round(x), x)  # round forward, identity backward
      >>> y.numpy(), tape.gradient(y, x).numpy()
      (array([0., 2.], dtype=float32), array([1., 1.], dtype=float32))
    """
    forward = v.as_float_tensor(forward, "forward")
    backward = v.as_float_tensor(backward, "backward")
    if forward.dtype != backward.dtype:
        got = f"got forward {forward.dtype.name} and backward {backward.dtype.name}"
        raise TypeError(f"forward and backward must have one dtype; {got}. Cast one of them.")
    if not forward.shape.is_compatible_with(backward.shape):
        got = f"got forward {forward.shape} and backward {backward.shape}"
        raise ValueError(f"forward and backward must have one shape; {got}. The gradient of backward has backward's "
                         "shape, so it cannot carry forward's gradient unless the shapes agree (broadcast explicitly first).")
    value = tf.stop_gradient(forward)

    @tf.custom_gradient
    def _straight_through(b):
        return tf.identity(value), lambda dy: dy

    return _straight_through(backward)


def surrogate_step(x, width: Scalar = 1.0) -> tf.Tensor:
    """Heaviside step in the forward pass; a triangular surrogate derivative in the backward pass.

    ::

        forward:   y = 1 if x > 0 else 0        (cast to x's dtype)
        backward:  dL/dx = dL/dy * max(0, 1 - |x| / width)

    The step's true derivative is zero almost everywhere, so nothing would learn through it. This
    is the source material's ``non_differentiable`` example, with the factor ``dL/dy`` that the
    original forgot (without it the chain rule is broken: the same gradient is sent back whatever
    the loss).

    Args:
      x: a floating-point tensor, NumPy array or list.
      width: half-width of the triangle, a finite real number > 0, scalar tensor or ``tf.Variable``.

    Returns:
      A tensor of ``x``'s shape and dtype holding 0s and 1s.

    Raises:
      TypeError: if ``x`` is not floating-point or ``width`` is not a real number.
      ValueError: if ``width`` is not finite or ``width <= 0``.

    Example:
      >>> import tensorflow as tf, gradlab
      >>> x = tf.constant([-0.5, 0.25, 2.0])
      >>> with tf.GradientTape() as tape:
      ...     tape.watch(x)
      ...     y = gradlab.surrogate_step(x)
      >>> y.numpy(), tape.gradient(y, x).numpy()
      (array([0., 1., 1.], dtype=float32), array([0.5 , 0.75, 0.  ], dtype=float32))
    """
    width = v.scalar(width, "width", positive=True)
    x = v.as_float_tensor(x, "x")

    @tf.custom_gradient
    def _step(t):
        def grad(dy):
            checks = v.run_time_checks({"width": width}, positive=True)
            w = _cast(width, t.dtype)
            return _after(checks, _dense(dy) * tf.nn.relu(1 - tf.abs(t) / w))

        return tf.cast(t > 0, t.dtype), grad

    return _step(x)
