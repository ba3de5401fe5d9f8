"""Gradient-modifying ops: the forward pass stays exactly as it is, the backward pass changes.

Every op here computes its forward value with ordinary TensorFlow ops and applies a rule to the
upstream gradient ``dy`` in the backward pass. Five are the identity in the forward pass
(:func:`map_gradient`, :func:`scale_gradient`, :func:`clip_gradient`, :func:`clip_gradient_norm`,
:func:`reverse_gradient`); :func:`straight_through` returns ``forward`` bitwise and sends the
gradient through ``backward``; :func:`surrogate_step` is the step ``1[x > 0]`` with a triangular
surrogate gradient. They accept tensors, NumPy arrays and Python lists of floats, keep float16,
bfloat16, float32 and float64, and work eagerly, inside ``tf.function`` and with ``jit_compile=True``.
Half-precision (float16, bfloat16) gradients are computed in float32 and the result is rounded
once to their dtype, so a parameter such as ``factor=1e-6`` is not first rounded to a float16
subnormal; a parameter the computation cannot represent (a ``factor`` or ``width`` that is neither
0 nor a normal number of that dtype) is refused with ``ValueError``.

The upstream gradient may arrive as a ``tf.IndexedSlices`` (when the op's output is read by
``tf.gather`` or an ``Embedding``; an index can repeat, and then its slices add up). Every op gives
the gradient it gives for the equivalent dense ``dy``: a scale keeps the sparse form (scaling each
slice is exact and cheaper), and a rule that is not linear in ``dy`` (a clip, a norm, ``fn`` of
:func:`map_gradient`) is applied to the summed, dense gradient.

Scalar hyperparameters (``factor``, ``clip_min``, ``max_norm``, ``width``...) may be Python numbers
or scalar tensors; a ``tf.Variable`` (or a ``keras.Variable``, e.g. a layer weight) is read when the
op runs its **forward pass**, and the backward pass uses that value, as TensorFlow does for the
gradient of ``v * x``. Changing the variable between training steps takes effect at the next step
without retracing; assigning it between the forward pass and ``tape.gradient`` does not change
that gradient. Reading it in the forward pass is also what lets a variable work inside
``tf.cond`` and ``tf.while_loop`` in a ``tf.function`` (TensorFlow fails on a custom gradient that
reads a variable there; under XLA a loop then needs ``maximum_iterations``, as it does for plain
``t * v``). The value is checked when the gradient is computed: an invalid value
(``nan``, ``clip_min > clip_max``, ``max_norm <= 0``) raises ``ValueError`` eagerly and
``tf.errors.InvalidArgumentError`` in a graph, instead of a silently wrong gradient (XLA drops
these checks: under ``jit_compile=True`` nothing is checked).
"""
from __future__ import annotations

from typing import Callable, Optional

import tensorflow as tf

from gradlab import _backward as bw
from gradlab import _validation as v
from gradlab._surrogates import straight_through, surrogate_step
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


def map_gradient(x, fn: GradientFn) -> tf.Tensor:
    """Identity in the forward pass; sends ``fn(dy)`` back in the backward pass.

    The general form of every gradient modification in gradlab::

        forward:   y = x                      (bitwise: same values, dtype and shape)
        backward:  dL/dx = fn(dL/dy)

    ``fn`` receives the upstream gradient ``dy`` (a dense tensor of ``x``'s shape and dtype, also
    when TensorFlow propagates it as a ``tf.IndexedSlices``: the slices are summed first) and must
    return a tensor of the same shape and dtype, or ``None`` to send no gradient (like
    ``tf.stop_gradient``). It runs only when a gradient is computed, so it may read
    ``tf.Variable`` values that change between steps (in a ``tf.function``, not inside
    ``tf.cond`` or ``tf.while_loop``, where TensorFlow cannot read a variable from a custom
    gradient: read it into a tensor before calling ``map_gradient`` and use that tensor in ``fn``).

    The shape is checked where it is known: when ``fn`` is traced, or eagerly, a wrong shape
    raises ``ValueError`` at once. In a ``tf.function`` traced with unknown dimensions (an
    ``input_signature`` such as ``[None, 3]``, or Keras' ``fit``), the shapes are compared when the
    gradient runs, and a mismatch raises ``tf.errors.InvalidArgumentError`` instead of handing back
    a gradient of the wrong shape. XLA drops that run-time check (it drops every assert op): under
    ``jit_compile=True`` with unknown dimensions a result smaller than ``dy`` in some dimension
    still fails to compile, but a larger one is cut to ``dy``'s shape without a word.

    Args:
      x: a floating-point tensor, NumPy array or list.
      fn: the rule applied to the upstream gradient.

    Returns:
      A tensor equal to ``x``.

    Raises:
      TypeError: if ``x`` is not floating-point or ``fn`` is not callable; when the gradient is
        computed, if ``fn`` returns another dtype.
      ValueError: when the gradient is computed, if ``fn`` returns another shape (in a graph with
        unknown dimensions, ``tf.errors.InvalidArgumentError`` when the gradient runs).

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
        dy = bw.dense(dy)
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
        return _same_shape_at_run_time(result, dy)

    return bw.identity_with_gradient(x, grad)


def _same_shape_at_run_time(result: tf.Tensor, dy: tf.Tensor) -> tf.Tensor:
    """``result``, checked to have ``dy``'s shape when the shapes are not both known statically.

    Static shapes were compared already; this covers unknown dimensions (a ``tf.function`` with
    ``input_signature=[tf.TensorSpec([None, 3])]``), where a ``(1, 3)`` result is compatible with
    ``(None, 3)`` but not with the ``(4, 3)`` that runs. Eagerly every shape is known.
    """
    if result.shape.is_fully_defined() and dy.shape.is_fully_defined():
        return result
    message = ("map_gradient: fn must return the shape of the upstream gradient (a gradient has the "
               "shape of the value it belongs to); the upstream gradient shape, then the shape fn returned:")
    checks = [tf.debugging.Assert(tf.equal(tf.rank(result), tf.rank(dy)),
                                  [message, tf.shape(dy), tf.shape(result)], summarize=8)]
    with tf.control_dependencies(checks):
        same = tf.reduce_all(tf.equal(tf.shape(result), tf.shape(dy)))
        checks.append(tf.debugging.Assert(same, [message, tf.shape(dy), tf.shape(result)], summarize=8))
    # The result is handed on as a slice of dy's (symbolic) shape: Grappler's shape inference
    # would otherwise take fn's static (1, 3) as the batch size, fold shapes elsewhere in the
    # backward pass and fail there before this check runs. The slice is the whole tensor (no copy)
    # once the checks pass, and under XLA, which drops the asserts, a result smaller than dy in
    # some dimension fails to compile.
    with tf.control_dependencies(checks):
        shape = tf.shape(dy)
        return tf.slice(result, tf.zeros_like(shape), shape)


def scale_gradient(x, factor: Scalar) -> tf.Tensor:
    """Identity in the forward pass; multiplies the gradient by ``factor`` in the backward pass.

    ::

        forward:   y = x
        backward:  dL/dx = factor * dL/dy

    The product is computed in float32 for float16 and bfloat16 gradients (in the gradient's dtype
    otherwise) and rounded once: ``scale_gradient(x_float16, 1e-6)`` sends ``1e-6 * dy`` rounded
    to float16, not ``dy`` times ``1e-6`` rounded to a float16 subnormal (4.6 % off).

    Args:
      x: a floating-point tensor, NumPy array or list.
      factor: a finite real number, scalar tensor or ``tf.Variable`` (read in the forward pass).
        ``0`` acts like ``tf.stop_gradient`` (but sends zeros, not ``None``); a negative factor
        reverses the gradient. Its magnitude must be 0 or a normal number of the dtype the product
        is computed in (at least 1.2e-38 and at most 3.4e38 for float32, float16 and bfloat16).

    Returns:
      A tensor equal to ``x``.

    Raises:
      TypeError: if ``x`` is not floating-point or ``factor`` is not a real number.
      ValueError: if ``factor`` is not finite, not a scalar, or not representable as above.

    Example:
      >>> import tensorflow as tf, gradlab
      >>> x = tf.constant(3.0)
      >>> with tf.GradientTape() as tape:
      ...     tape.watch(x)
      ...     y = gradlab.scale_gradient(x, 5.0) ** 2
      >>> float(y), float(tape.gradient(y, x))  # forward 3**2; gradient 5 * 2*3
      (9.0, 30.0)
    """
    return _scaled_identity(x, factor, negate=False)


def clip_gradient(x, clip_min: Scalar, clip_max: Scalar) -> tf.Tensor:
    """Identity in the forward pass; clips each gradient element to ``[clip_min, clip_max]``.

    ::

        forward:   y = x
        backward:  dL/dx = clip_by_value(dL/dy, clip_min, clip_max)   (elementwise)

    The bounds are rounded to the gradient's dtype. Rounding is monotone, so clipping to the
    rounded bounds gives exactly the clip to the real bounds, rounded once: a bound beyond the
    dtype's range (``1e5`` for float16) acts as no bound, as it should.

    Args:
      x: a floating-point tensor, NumPy array or list.
      clip_min: the lower bound, a finite real number, scalar tensor or ``tf.Variable`` (read in
        the forward pass).
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
    values, unchecked = bw.read_params({"clip_min": clip_min, "clip_max": clip_max})

    def grad(dy):
        checks = v.run_time_checks(unchecked)
        if unchecked:
            checks += v.run_time_order_check(values["clip_min"], values["clip_max"])
        low, high = bw.cast(values["clip_min"], dy.dtype), bw.cast(values["clip_max"], dy.dtype)
        return bw.after(checks, tf.clip_by_value(bw.dense(dy), low, high))

    return bw.identity_with_gradient(x, grad)


def clip_gradient_norm(x, max_norm: Scalar) -> tf.Tensor:
    """Identity in the forward pass; rescales the gradient so its L2 norm is at most ``max_norm``.

    The norm is taken over the whole upstream tensor::

        forward:   y = x
        backward:  dL/dx = dL/dy * min(1, max_norm / ||dL/dy||_2)

    This is the ``clip_grad`` of the source material's ``py_func`` answer, in TF2 code, evaluated
    as written (as optax and PyTorch do), not as ``tf.clip_by_norm``'s
    ``dy * max_norm / max(||dy||, max_norm)``:

    * a gradient whose norm is at most ``max_norm`` comes back **bitwise** unchanged;
    * otherwise each element is ``dy`` times the factor ``max_norm / ||dy||`` (rounded to the
      gradient's dtype, or float32 for float16 and bfloat16, where the product is computed and
      rounded once). The factor and the comparison are computed in float64, so every finite
      ``max_norm`` works, up to ``sys.float_info.max`` (``tf.clip_by_norm`` multiplies ``dy`` by
      ``max_norm`` first and overflows to ``inf``, then NaN);
    * the norm neither overflows (``[3e19, 4e19]`` in float32 has norm ``5e19``; its float32 sum
      of squares is ``inf``, and ``tf.clip_by_norm`` sends back zeros) nor underflows to 0 for
      tiny gradients: the squares of float16, bfloat16 and float32 gradients are summed in
      float64, and a float64 gradient is scaled by its largest ``|dy|`` first (as LAPACK's
      ``nrm2``);
    * non-finite upstream gradients follow IEEE arithmetic in the formula: any NaN makes the
      norm, and so every element, NaN; an infinite element (and no NaN) makes the norm ``inf`` and
      the factor 0, so that element becomes NaN (``inf * 0``) and the others 0.

    Where the factor is below the smallest normal number of the compute dtype (a gradient ~1e38
    times longer than ``max_norm`` in float32), it loses bits or flushes to zero.

    Args:
      x: a floating-point tensor, NumPy array or list.
      max_norm: a finite real number > 0, scalar tensor or ``tf.Variable`` (read in the forward
        pass).

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
    values, unchecked = bw.read_params({"max_norm": max_norm})

    def grad(dy):
        checks = v.run_time_checks(unchecked, positive=True)
        return bw.after(checks, _clip_by_norm(bw.dense(dy), values["max_norm"]))

    return bw.identity_with_gradient(x, grad)


def _clip_by_norm(dy: tf.Tensor, max_norm: Scalar) -> tf.Tensor:
    """``dy * min(1, max_norm / ||dy||)`` as :func:`clip_gradient_norm` documents it.

    The scalars are combined in float64, so ``max_norm`` is not rounded to the gradient's dtype:
    ``||dy|| <= max_norm`` gives the factor exactly 1, and ``dy * 1`` is ``dy`` bitwise. A NaN
    norm fails the test and gives a NaN factor; an infinite one gives the factor 0.
    """
    compute = v.compute_dtype(dy.dtype)
    m = bw.cast(max_norm, tf.float64)
    if dy.dtype == tf.float64:
        factor = _float64_clip_factor(dy, m)
    else:
        # float16, bfloat16, float32: squares summed in float64 can neither overflow (3.4e38**2 is
        # 1.2e77) nor underflow (the smallest float32 subnormal squared is 2e-90)
        norm = tf.sqrt(tf.reduce_sum(tf.square(tf.cast(dy, tf.float64))))
        factor = tf.cast(tf.where(norm <= m, tf.ones_like(m), m / norm), compute)
    if compute == dy.dtype:
        return dy * factor
    return tf.cast(tf.cast(dy, compute) * factor, dy.dtype)


def _float64_clip_factor(dy: tf.Tensor, m: tf.Tensor) -> tf.Tensor:
    """The clipping factor of a float64 ``dy``, its norm scaled by the largest ``|dy|``.

    With ``a = max |dy|`` (1 where that is 0, non-finite or ``dy`` is empty) and
    ``s = sum((dy / a)**2)`` (``s >= 1`` unless ``dy`` is all zeros), ``||dy|| = a * sqrt(s)``
    without overflow or underflow in the squares. The test multiplies (XLA divides through a
    reciprocal: 1.25 / 1.25 gives 1 - 1 ulp there; a product beyond float64's range is inf, rightly
    > m), and the factor ``(m / a) / sqrt(s)`` cannot overflow.
    """
    largest = tf.reduce_max(tf.abs(dy))
    a = tf.where(tf.logical_and(tf.math.is_finite(largest), largest > 0), largest, tf.ones_like(largest))
    root = tf.sqrt(tf.reduce_sum(tf.square(dy / a)))
    return tf.where(a * root <= m, tf.ones_like(m), (m / a) / root)


def reverse_gradient(x, factor: Scalar = 1.0) -> tf.Tensor:
    """Identity in the forward pass; sends ``-factor * dy`` back (a gradient reversal layer).

    Used in domain-adversarial training (Ganin & Lempitsky, 2015): the features are trained to
    *maximise* the loss of whatever sits after this op::

        forward:   y = x
        backward:  dL/dx = -factor * dL/dy

    Args:
      x: a floating-point tensor, NumPy array or list.
      factor: a finite real number, scalar tensor or ``tf.Variable`` (often ramped up in training;
        read in the forward pass), 0 or a normal number as for :func:`scale_gradient`.

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
    return _scaled_identity(x, factor, negate=True)


def _scaled_identity(x, factor: Scalar, negate: bool) -> tf.Tensor:
    """Identity forward, ``factor * dy`` (``-factor * dy`` if ``negate``) backward: the body of
    :func:`scale_gradient` and :func:`reverse_gradient`."""
    factor = v.scalar(factor, "factor")
    x = v.as_float_tensor(x, "x")
    compute = v.compute_dtype(x.dtype)
    bw.check_static(factor, "factor", compute)
    values, unchecked = bw.read_params({"factor": factor})

    def grad(dy):
        checks = v.run_time_checks(unchecked, dtype=compute)
        return bw.after(checks, bw.scaled(dy, -values["factor"] if negate else values["factor"]))

    return bw.identity_with_gradient(x, grad)
