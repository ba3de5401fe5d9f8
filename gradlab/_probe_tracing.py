"""Where a :class:`gradlab.GradientProbe`'s backward pass is being built, and pfor's forms of its writes.

Private module. A probe records by writing to variables in the backward pass. Under XLA it must fix
their shape first (:func:`in_xla_context`); in a ``pfor`` loop body (``tape.jacobian``,
``tape.batch_jacobian``, ``tf.vectorized_map``: :func:`in_pfor_loop`) pfor vectorizes those writes
with the converters below (:func:`vectorizable` attaches one to an op), which keep one iteration's
gradient and count every iteration; a write built outside the loop is refused with
:data:`PFOR_MESSAGE`.
"""
from __future__ import annotations

import sys

import tensorflow as tf

try:  # private, but the only way to know at trace time that XLA will compile the graph
    from tensorflow.python.framework import ops as _tf_ops
    from tensorflow.python.ops import control_flow_util as _control_flow_util

    def in_xla_context() -> bool:
        """Whether the ops built now are compiled by XLA (``jit_compile=True``)."""
        return bool(_control_flow_util.GraphOrParentsInXlaContext(_tf_ops.get_default_graph()))

except (ImportError, AttributeError):  # pragma: no cover - a TensorFlow without it
    def in_xla_context() -> bool:
        return False

try:  # private, but the only way to know at trace time that pfor will vectorize the graph
    from tensorflow.python.ops.parallel_for import control_flow_ops as _pfor_ops

    _PFOR_CODE = _pfor_ops._pfor_impl.__code__
except (ImportError, AttributeError):  # pragma: no cover - a TensorFlow without it
    _PFOR_CODE = None


def in_pfor_loop() -> bool:
    """Whether the ops built now are a ``pfor`` loop body (``tape.jacobian``, ``vectorized_map``).

    ``pfor`` traces its loop body from ``_pfor_impl``, so that frame is on the Python stack exactly
    while the body is built.
    """
    frame = sys._getframe(1)
    while frame is not None:
        if frame.f_code is _PFOR_CODE:
            return True
        frame = frame.f_back
    return False


def pfor_assign_one(pfor_input):
    """pfor's vectorized form of the probe's ``AssignVariableOp``: keep one iteration's gradient.

    pfor stacks the iterations' gradients; the last one is written, as a loop run one iteration
    after another would leave it. (The loop body pfor traced stays in the graph and may run too,
    writing the first iteration's gradient: one of the gradients either way, as documented for a
    name that sees several.)
    """
    handle = pfor_input.unstacked_input(0)
    value, stacked, sparse_stacked = pfor_input.input(1)
    if sparse_stacked:  # pragma: no cover - the probe assigns a dense tensor
        raise RuntimeError(PFOR_MESSAGE)
    if stacked:
        if value.shape.rank is not None and value.shape[0] == 0:
            return tf.no_op()  # an empty chunk (parallel_iterations dividing the rows)
        value = value[-1]
    return tf.raw_ops.AssignVariableOp(resource=handle, value=value)


def pfor_count_iterations(pfor_input):
    """pfor's vectorized form of the probe's count ``AssignAddVariableOp``: one per iteration.

    Built inside a pfor loop body, the probe adds 0 (the body pfor traced may run as it is, once
    per vectorized chunk); its vectorized form adds the chunk's number of iterations, so the count
    grows by one per iteration, as in a loop run one iteration after another.
    """
    handle = pfor_input.unstacked_input(0)
    iterations = tf.cast(pfor_input.pfor.loop_len_vector[0], tf.int64)
    return tf.raw_ops.AssignAddVariableOp(resource=handle, value=iterations)


def pfor_refuse(pfor_input):
    """For a probe built outside a pfor loop body whose backward pass pfor vectorizes anyway."""
    raise RuntimeError(PFOR_MESSAGE)


def vectorizable(op, converter) -> None:
    """Gives a graph op the converter pfor uses for it instead of failing on a variable write.

    ``pfor`` looks for a ``pfor_converter`` attribute on an op before its registry (TensorFlow
    2.16 to 2.21).
    """
    if op is None:  # eagerly: nothing to vectorize
        return
    try:
        op.pfor_converter = converter
    except AttributeError:  # pragma: no cover - an Operation that takes no attribute: pfor fails
        pass


PFOR_MESSAGE = (
    "GradientProbe cannot record here: tape.jacobian, tape.batch_jacobian and tf.vectorized_map "
    "vectorize the backward pass (pfor), and this probe's backward pass was built before, outside "
    "the vectorized loop (typically a tf.function forward whose backward function TensorFlow "
    "reuses), so the number of gradients that pass cannot be counted. Pass "
    "experimental_use_pfor=False to jacobian/batch_jacobian (the probe then records the backward "
    "pass of every row), or run the forward pass eagerly or in the same tf.function as the "
    "jacobian."
)
