"""The ops whose forward value is not their input: a straight-through estimator and a surrogate step.

Private module: both are public as ``gradlab.straight_through`` and ``gradlab.surrogate_step`` (and in
:mod:`gradlab.ops`, whose module docstring describes what every op shares).
"""
from __future__ import annotations

import tensorflow as tf

from gradlab import _backward as bw
from gradlab import _validation as v
from gradlab._validation import Scalar


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

    For float16 and bfloat16 the surrogate is computed in float32 and the gradient rounded once to
    the dtype (a float16 ``width=1e-8`` would otherwise round to 0 and give NaN).

    Args:
      x: a floating-point tensor, NumPy array or list.
      width: half-width of the triangle, a finite real number > 0, scalar tensor or ``tf.Variable``
        (read in the forward pass); a normal number of the dtype the surrogate is computed in (at
        least 1.2e-38 and at most 3.4e38 for float32, float16 and bfloat16).

    Returns:
      A tensor of ``x``'s shape and dtype holding 0s and 1s.

    Raises:
      TypeError: if ``x`` is not floating-point or ``width`` is not a real number.
      ValueError: if ``width`` is not finite, ``width <= 0``, or not representable as above.

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
    compute = v.compute_dtype(x.dtype)
    bw.check_static(width, "width", compute)
    values, unchecked = bw.read_params({"width": width})

    @tf.custom_gradient
    def _step(t):
        def grad(dy):
            checks = v.run_time_checks(unchecked, positive=True, dtype=compute)
            w = bw.cast(values["width"], compute)
            surrogate = tf.nn.relu(1 - tf.abs(tf.cast(t, compute)) / w)
            return bw.after(checks, tf.cast(tf.cast(bw.dense(dy), compute) * surrogate, t.dtype))

        return tf.cast(t > 0, t.dtype), grad

    return _step(x)
