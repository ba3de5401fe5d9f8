"""Gradient probes: identity ops that record the gradient passing through them.

A :class:`GradientProbe` is the TensorFlow counterpart of a PyTorch tensor hook that only looks:
put ``probe(h, name="layer1")`` anywhere in the forward pass, compute gradients as usual, then read
``probe.gradients["layer1"]``, the gradient of the loss with respect to ``h`` in the last backward
pass::

    forward:   y = h                        (bitwise: same values, dtype and shape)
    backward:  dL/dh = dL/dy                (unchanged) and dL/dy is recorded under "layer1"

Unlike ``tape.gradient(loss, h)``, the probe needs no handle on the intermediate tensor ``h``
outside the model and no extra backward pass: the gradient is recorded by the backward pass the
training step computes anyway, for instance inside ``model.fit`` or a ``tf.function`` train step.

How it records, and why
-----------------------
Inside ``tf.function`` the backward pass is *traced* once into a graph, so a Python callback that
stores the upstream gradient would only ever see a symbolic tensor. Each name therefore owns two
``tf.Variable``\\ s (the last gradient and a counter), created lazily, *outside* any trace (with
``tf.init_scope``), the first time the name is watched. The probe's backward pass assigns to them,
and the gradient it returns depends on those assignments (a control dependency), so they run
whenever the gradient is needed: eagerly, in a ``tf.function``, with ``jit_compile=True``, and in
the backward function TensorFlow builds when an eager tape differentiates a ``tf.function``.

A callback-style ``probe(x, callback)`` is deliberately not offered: in a graph it would need
``tf.numpy_function`` in the backward pass, which XLA cannot compile, a SavedModel cannot store,
and which forces a device-to-host copy at every step. Reading the probe's variables after the step
costs nothing while training.

Limitations (TensorFlow 2.21)
-----------------------------
* Use one name per probed tensor. If one name sees several gradients in one backward pass (a probe
  inside a loop, a shared layer), only one is kept (which one is unspecified in a graph) and
  :attr:`GradientProbe.counts` shows that more than one passed.
* ``tf.function`` creates variables on its *first* trace only. A name watched for the first time
  in a later trace of an already traced function raises ``RuntimeError``: watch every name in the
  first call (the usual case), or once eagerly before.
* With ``jit_compile=True`` XLA fixes a variable's shape when it compiles, so the probed tensor's
  shape must be fully known when the function is traced (else ``ValueError``), and a name must see
  the same shape on every call of a compiled function: alternating between two already compiled
  shapes, or watching the name elsewhere with another shape in between, fails in XLA with
  ``InvalidArgumentError: Shape of resource ... cannot be changed after initialization``. Use one
  name per shape there.
* ``tape.jacobian`` and ``tape.batch_jacobian`` run one backward pass per row of the Jacobian,
  vectorized by default (pfor): the probe records them all, like a name that sees several
  gradients: :attr:`GradientProbe.counts` grows by the number of rows, one row's gradient is kept
  (the last one under pfor), and the Jacobian is the one without the probe. The same holds for
  ``tf.vectorized_map`` (per-example gradients) and with ``experimental_use_pfor=False``. One case
  is refused with ``RuntimeError``: a ``tf.function`` forward pass already differentiated once,
  whose stored backward function pfor vectorizes; pass ``experimental_use_pfor=False`` there.
* Under a distribution strategy (``MirroredStrategy`` in ``fit``, or ``strategy.run``) every
  replica records the gradient of its own slice of the batch in its own copy of the variables
  (``ON_READ`` variables): :attr:`GradientProbe.gradients` joins them along the batch axis,
  :attr:`GradientProbe.replica_gradients` keeps them apart, and :attr:`GradientProbe.counts`
  counts every replica's backward pass. A name must be watched first under the strategy that
  records it (build the model in ``strategy.scope()``), and a strategy's backward pass must run
  in its replicas, not its cross-replica context; otherwise recording raises ``RuntimeError``
  (one copy written by every replica would keep one replica's slice).
* TF1 graphs (``tf.compat.v1.Session``) are not supported (``RuntimeError``); use
  ``tf.gradients(loss, h)`` on the intermediate tensors there.
* Create the probe once, before the ``tf.function`` that uses it, and :meth:`~GradientProbe.clear`
  it rather than replacing it: a traced function keeps writing to the variables of the probe it
  was traced with.
"""
from __future__ import annotations

from typing import Dict, Tuple

import numpy as np
import tensorflow as tf

from gradlab import _probe_storage as storage
from gradlab import _probe_tracing as tracing
from gradlab import _validation as v
from gradlab import ops

__all__ = ["GradientProbe"]


def _check_name(name: object) -> str:
    if not isinstance(name, str):
        raise TypeError(
            f"name must be a string naming the probed tensor, e.g. name='layer1'; "
            f"got {v.describe(name)}."
        )
    if not name:
        raise ValueError("name must be a non-empty string, e.g. name='layer1'; got ''.")
    return name


class GradientProbe:
    """Records the gradient that flows back through chosen tensors; the values stay untouched.

    ``probe(h, name)`` (or ``probe.watch(h, name)``) is an identity op, bitwise in the forward
    pass and transparent in the backward pass, that keeps the upstream gradient under ``name``::

        forward:   y = h
        backward:  dL/dh = dL/dy,     probe.gradients[name] = dL/dy   (the last one that passed)

    It works eagerly, inside ``tf.function`` and with ``jit_compile=True`` (see the module
    docstring for the few limitations and why), under ``tape.jacobian`` and under a distribution
    strategy (each replica records its slice). Read the results eagerly, after the step:
    :attr:`gradients` (NumPy arrays), :meth:`norms` (L2 norms, ready for
    :func:`gradlab.plots.gradient_norm_bars`), :attr:`counts` and :attr:`replica_gradients`;
    inside a ``tf.function`` use :meth:`gradient`. :meth:`clear` forgets what was recorded.

    Names are kept in the order they were first watched, which for a probe per layer is the
    order of the layers.

    Example:
      >>> import tensorflow as tf, gradlab
      >>> probe = gradlab.GradientProbe()
      >>> x = tf.constant([1.0, 2.0])
      >>> with tf.GradientTape() as tape:
      ...     tape.watch(x)
      ...     h = probe(3.0 * x, name="h")         # the value is 3x, unchanged
      ...     loss = tf.reduce_sum(h ** 2)
      >>> tape.gradient(loss, x).numpy()           # unchanged: 2 * 3x * 3
      array([18., 36.], dtype=float32)
      >>> probe.gradients["h"]                     # dloss/dh = 2h
      array([ 6., 12.], dtype=float32)

      Inside ``tf.function`` (and with ``jit_compile=True``) it records just the same:

      >>> @tf.function(jit_compile=True)
      ... def step(x):
      ...     with tf.GradientTape() as tape:
      ...         tape.watch(x)
      ...         loss = tf.reduce_sum(probe(x * x, name="square") * 5.0)
      ...     return tape.gradient(loss, x)
      >>> step(x).numpy(), probe.gradients["square"]
      (array([10., 20.], dtype=float32), array([5., 5.], dtype=float32))
    """

    def __init__(self) -> None:
        self._slots: Dict[str, storage.Slot] = {}

    def __repr__(self) -> str:
        return f"GradientProbe(names={list(self._slots)!r})"

    # -- recording ------------------------------------------------------------------------------

    def __call__(self, x, name: str) -> tf.Tensor:
        """Same as :meth:`watch`."""
        return self.watch(x, name)

    @tf.autograph.experimental.do_not_convert
    def watch(self, x, name: str) -> tf.Tensor:
        """Returns ``x`` unchanged; its gradient will be recorded under ``name``.

        ::

            forward:   y = x             (bitwise: same values, dtype and shape)
            backward:  dL/dx = dL/dy     and dL/dy is stored under name

        Args:
          x: a floating-point tensor, NumPy array or list.
          name: a non-empty string naming the tensor, unique per probed tensor.

        Returns:
          A tensor equal to ``x``.

        Raises:
          TypeError: if ``x`` is not floating-point, ``name`` is not a string, or ``name``
            already records gradients of another dtype.
          ValueError: if ``name`` is empty; with ``jit_compile=True``, if ``x``'s shape is not
            fully known when the function is traced.
          RuntimeError: in a TF1 graph, or when ``name`` is first watched in a later trace of an
            already traced ``tf.function`` (variables can only be created in the first trace).
            In the backward pass: where ``name``'s storage is not one copy per replica of the
            strategy in force (it was first watched under another strategy or none), or in a
            strategy's cross-replica context (see the module docstring).

        Example:
          >>> import tensorflow as tf, gradlab
          >>> probe = gradlab.GradientProbe()
          >>> x = tf.constant([0.5, -1.0])
          >>> with tf.GradientTape() as tape:
          ...     tape.watch(x)
          ...     y = 4.0 * probe.watch(x, "x")
          >>> tape.gradient(y, x).numpy()
          array([4., 4.], dtype=float32)
          >>> probe.gradients["x"], probe.counts
          (array([4., 4.], dtype=float32), {'x': 1})
        """
        name = _check_name(name)
        x = v.as_float_tensor(x, "x")
        if not tf.executing_eagerly() and not tf.inside_function():
            raise RuntimeError(
                "GradientProbe works eagerly and inside tf.function, not in a TF1 graph "
                "(tf.compat.v1.Session). There, ask tf.gradients(loss, [h1, h2, ...]) for the "
                "intermediate tensors' gradients instead."
            )
        slot = self._slot(name, x)
        if not tf.executing_eagerly() and tracing.in_xla_context():
            storage.fit_for_xla(name, slot, x)

        def record(dy):
            storage.check_distribution(name, slot)
            dense = tf.convert_to_tensor(dy)  # an IndexedSlices upstream is recorded densely
            # In a pfor loop body (tape.jacobian...) the count's vectorized form adds the number
            # of iterations, and the body itself, which may also run, adds 0.
            in_pfor = not tf.executing_eagerly() and tracing.in_pfor_loop()
            updates = [
                slot.value.assign(dense, read_value=False),
                slot.count.assign_add(0 if in_pfor else 1, read_value=False),
            ]
            tracing.vectorizable(updates[0], tracing.pfor_assign_one if in_pfor else tracing.pfor_refuse)
            tracing.vectorizable(updates[1], tracing.pfor_count_iterations if in_pfor else tracing.pfor_refuse)
            with tf.control_dependencies([u for u in updates if u is not None]):  # None eagerly
                return tf.identity(dense)

        return ops.map_gradient(x, record)

    def _slot(self, name: str, x: tf.Tensor) -> storage.Slot:
        slot = self._slots.get(name)
        if slot is not None:
            if slot.dtype != x.dtype:
                raise TypeError(
                    f"name {name!r} already records {slot.dtype.name} gradients; got a "
                    f"{x.dtype.name} tensor. Use another name for it."
                )
            return slot
        slot = self._slots[name] = storage.new_slot(name, x)
        return slot

    # -- reading --------------------------------------------------------------------------------

    @property
    def names(self) -> Tuple[str, ...]:
        """The watched names, in the order they were first watched."""
        return tuple(self._slots)

    @property
    def counts(self) -> Dict[str, int]:
        """``{name: how many gradients passed since the last clear()}``, for every watched name.

        More than one per backward pass means the name probes several tensors (see the module
        docstring). Under a distribution strategy every replica's backward pass counts: one
        training step on R replicas adds R.

        Raises:
          RuntimeError: inside a ``tf.function`` (read it after the call).
        """
        self._require_eager("counts")
        return {name: sum(storage.replica_counts(slot)) for name, slot in self._slots.items()}

    @property
    def gradients(self) -> Dict[str, np.ndarray]:
        """``{name: the last gradient recorded}`` as NumPy arrays, for the names that recorded one.

        A name that was watched but has no gradient since the last :meth:`clear` (no backward
        pass yet, or the loss does not depend on it) is left out.

        Under a distribution strategy (``MirroredStrategy`` in ``fit``) each replica records the
        gradient of its own slice of the batch, and this is their concatenation along the first
        (batch) axis, in replica order: the whole batch's gradient, as one device records it
        (Keras scales each replica's loss by 1 / replicas, so each sample's gradient is the
        single-device one). For a probed tensor that every replica holds whole, such as a weight,
        read the replicas' parts in :attr:`replica_gradients` instead (their sum is the
        all-reduced gradient).

        Raises:
          RuntimeError: inside a ``tf.function`` (use :meth:`gradient` there).
        """
        self._require_eager("gradients")
        joined = {}
        for name, parts in self.replica_gradients.items():
            if len(parts) == 1:
                joined[name] = parts[0]
            elif parts[0].ndim == 0:
                joined[name] = np.stack(parts)
            else:
                joined[name] = np.concatenate(parts, axis=0)
        return joined

    @property
    def replica_gradients(self) -> Dict[str, Tuple[np.ndarray, ...]]:
        """``{name: (the last gradient recorded on each replica, in replica order)}``.

        One array per replica that recorded a gradient since the last :meth:`clear`; without a
        distribution strategy, a tuple of one (the array in :attr:`gradients`). Names without a
        gradient are left out.

        Raises:
          RuntimeError: inside a ``tf.function``.

        Example:
          >>> import tensorflow as tf, gradlab
          >>> probe = gradlab.GradientProbe()
          >>> x = tf.constant([1.0, 2.0])
          >>> with tf.GradientTape() as tape:
          ...     tape.watch(x)
          ...     y = tf.reduce_sum(probe(x, "x") * 3.0)
          >>> _ = tape.gradient(y, x)
          >>> probe.replica_gradients      # one device: one part
          {'x': (array([3., 3.], dtype=float32),)}
        """
        self._require_eager("replica_gradients")
        result = {}
        for name, slot in self._slots.items():
            counts = storage.replica_counts(slot)
            parts = tuple(
                copy.numpy() for copy, count in zip(storage.per_replica(slot.value), counts) if count > 0
            )
            if parts:
                result[name] = parts
        return result

    def gradient(self, name: str) -> tf.Tensor:
        """The last gradient recorded under ``name``, as a tensor; works inside ``tf.function`` too.

        Before any gradient arrived it holds zeros (check :attr:`counts`). Inside a replica of a
        distribution strategy (``strategy.run``) it is that replica's own gradient; outside,
        the first replica's (:attr:`gradients` joins them all).

        Args:
          name: a watched name.

        Returns:
          A tensor of the probed tensor's dtype.

        Raises:
          TypeError: if ``name`` is not a string.
          KeyError: if ``name`` was never watched.

        Example:
          >>> import tensorflow as tf, gradlab
          >>> probe = gradlab.GradientProbe()
          >>> @tf.function
          ... def grad_and_recorded(x):
          ...     with tf.GradientTape() as tape:
          ...         tape.watch(x)
          ...         y = tf.sin(probe(x, name="x"))
          ...     return tape.gradient(y, x), probe.gradient("x")
          >>> g, recorded = grad_and_recorded(tf.constant(0.0))
          >>> float(g), float(recorded)   # the recorded dy/d(probe output) is cos(0)
          (1.0, 1.0)
        """
        return self._get(name).value.read_value()

    def norms(self) -> Dict[str, float]:
        """``{name: L2 norm of its last recorded gradient}`` (computed in float64).

        ::

            norms()[name] = sqrt(sum(gradients[name] ** 2))

        Under a distribution strategy it is the norm of the replicas' joined gradient (the whole
        batch's), ``sqrt`` of the sum of each replica's squared norm.

        The result plugs into :func:`gradlab.plots.gradient_norm_bars`.

        Returns:
          A dict of Python floats, for the names in :attr:`gradients`, in watch order.

        Raises:
          RuntimeError: inside a ``tf.function``.

        Example:
          >>> import tensorflow as tf, gradlab
          >>> probe = gradlab.GradientProbe()
          >>> x = tf.constant([1.0, 1.0])
          >>> with tf.GradientTape() as tape:
          ...     tape.watch(x)
          ...     loss = tf.reduce_sum(probe(x, "x") * tf.constant([3.0, 4.0]))
          >>> _ = tape.gradient(loss, x)
          >>> probe.norms()
          {'x': 5.0}
        """
        return {
            name: float(np.linalg.norm(np.asarray(g, np.float64).ravel()))
            for name, g in self.gradients.items()
        }

    def clear(self) -> None:
        """Forgets the recorded gradients (the names and their variables are kept).

        Works eagerly and inside ``tf.function``. Keep using the same probe after clearing: a
        traced function keeps the probe it was traced with.

        Example:
          >>> import tensorflow as tf, gradlab
          >>> probe = gradlab.GradientProbe()
          >>> x = tf.constant(2.0)
          >>> with tf.GradientTape() as tape:
          ...     tape.watch(x)
          ...     y = probe(x, "x") ** 2
          >>> _ = tape.gradient(y, x)
          >>> probe.clear()
          >>> probe.gradients, probe.counts, probe.names
          ({}, {'x': 0}, ('x',))
        """
        for slot in self._slots.values():
            slot.count.assign(0)

    def _get(self, name: str) -> storage.Slot:
        name = _check_name(name)
        if name not in self._slots:
            raise KeyError(
                f"name {name!r} was never watched; watched names: {list(self._slots)}."
            )
        return self._slots[name]

    @staticmethod
    def _require_eager(what: str) -> None:
        if not tf.executing_eagerly():
            raise RuntimeError(
                f"GradientProbe.{what} reads NumPy values, which do not exist while a "
                "tf.function is traced. Read it after the call, or use probe.gradient(name) "
                "inside the function."
            )
