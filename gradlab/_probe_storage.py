"""Where a :class:`gradlab.GradientProbe` keeps what it records: one slot of variables per name.

Private module. A :class:`Slot` holds the last gradient and a counter, created outside any trace
(:func:`new_slot`) so that they outlive the function graph, as ``ON_READ`` variables: under a
distribution strategy every replica writes its own copy (:func:`per_replica`,
:func:`check_distribution`). Under XLA the gradient variable takes the probed tensor's shape before
compiling (:func:`fit_for_xla`).
"""
from __future__ import annotations

import dataclasses
from typing import Tuple

import tensorflow as tf


@dataclasses.dataclass(frozen=True)
class Slot:
    """The storage of one name: the last gradient, how many arrived, and their dtype."""

    value: tf.Variable
    count: tf.Variable
    dtype: tf.DType


def new_slot(name: str, x: tf.Tensor) -> Slot:
    """The variables that record ``x``'s gradients under ``name``, created outside any trace.

    Raises:
      RuntimeError: in a later trace of an already traced ``tf.function`` (variables can only be
        created in the first trace).
    """
    shape = x.shape if x.shape.is_fully_defined() else [0]
    try:
        with tf.init_scope():  # outside any trace: the variables outlive the function graph
            # ON_READ: under a distribution strategy every replica keeps its own copy
            # (without one, a plain variable).
            return Slot(
                value=tf.Variable(tf.zeros(shape, x.dtype), shape=tf.TensorShape(None),
                                  trainable=False, name="probe_gradient",
                                  synchronization=tf.VariableSynchronization.ON_READ,
                                  aggregation=tf.VariableAggregation.ONLY_FIRST_REPLICA),
                count=tf.Variable(tf.constant(0, tf.int64), trainable=False,
                                  name="probe_count",
                                  synchronization=tf.VariableSynchronization.ON_READ,
                                  aggregation=tf.VariableAggregation.SUM),
                dtype=x.dtype,
            )
    except ValueError as err:
        if "first call" not in str(err):
            raise
        raise RuntimeError(
            f"GradientProbe: name {name!r} is watched for the first time in a later trace of "
            "an already traced tf.function, and tf.function creates variables on its first "
            "trace only. Watch every name in the function's first call, or once eagerly "
            "before (e.g. probe(tf.zeros(shape), name))."
        ) from None


def fit_for_xla(name: str, slot: Slot, x: tf.Tensor) -> None:
    """XLA compiles with the variable's current shape: make it the probed tensor's shape."""
    if not x.shape.is_fully_defined():
        raise ValueError(
            f"GradientProbe under jit_compile=True needs a fully known shape; {name!r} has "
            f"shape {x.shape} when the function is traced. Give the tf.function a fully "
            "defined input_signature, or use jit_compile=False."
        )
    with tf.init_scope():
        if tuple(tf.shape(slot.value).numpy()) != tuple(x.shape):
            slot.value.assign(tf.zeros(x.shape, slot.dtype))
            slot.count.assign(0)  # the old gradient is gone


def per_replica(variable) -> tuple:
    """The variable's copy on every replica, in replica order (one copy without a strategy)."""
    if isinstance(variable, tf.distribute.DistributedValues):
        return tuple(variable.values)
    return (variable,)


def replica_counts(slot: Slot) -> Tuple[int, ...]:
    """How many gradients each replica's copy counted, in replica order."""
    return tuple(int(copy.numpy()) for copy in per_replica(slot.count))


def check_distribution(name: str, slot: Slot) -> None:
    """Refuses to record where the name's variables would drop or mix replicas' gradients.

    Each replica must write its own copy: the name's variables must belong to the strategy in
    force, and a strategy's copies are written from its replicas (``strategy.run``, ``fit``), not
    from its cross-replica context.
    """
    strategy = tf.distribute.get_strategy()
    distributed = isinstance(slot.count, tf.distribute.DistributedValues)
    owned = strategy.extended.variable_created_in_scope(slot.count)
    if not owned and (distributed or strategy.num_replicas_in_sync > 1):  # one replica: harmless
        here = (f"under {type(strategy).__name__} ({strategy.num_replicas_in_sync} replicas)"
                if tf.distribute.has_strategy() else "without a distribution strategy")
        where = "under another distribution strategy" if distributed else "outside it"
        raise RuntimeError(
            f"GradientProbe: name {name!r} records a backward pass {here}, but it was first "
            f"watched {where}, so its storage is not one copy per replica here. Watch a name "
            "first where it records (under a strategy: build the model in strategy.scope()), or "
            "use another name or a new GradientProbe."
        )
    if distributed and tf.distribute.in_cross_replica_context():
        raise RuntimeError(
            f"GradientProbe: name {name!r} keeps one copy per replica of "
            f"{type(strategy).__name__}, and this backward pass runs in its cross-replica context "
            "(under strategy.scope(), outside strategy.run): no replica to record it for. Compute "
            "the gradient inside strategy.run (as model.fit does)."
        )
