"""Tracing a function with the ``tf.function``s it calls inlined (private; shared by the doctor and the workbook).

The gradient doctor (``gradlab/doctor.py``) and notebook 13's self-check both need every op a function runs,
with its line, in one graph: a nested ``tf.function`` would otherwise be one call op.
"""
from __future__ import annotations

import contextlib
import threading
import warnings
from typing import Iterator

import tensorflow as tf

__all__ = ["functions_traced_inline"]


#: Held while ``tf.config.run_functions_eagerly`` is switched on (:func:`functions_traced_inline`).
_RUN_EAGERLY_LOCK = threading.RLock()


@contextlib.contextmanager
def functions_traced_inline() -> Iterator[None]:
    """Traces the ``tf.function``s a traced function calls into its own graph, not as call ops that hide their ops.

    With ``tf.config.run_functions_eagerly(True)``, calling a ``tf.function`` runs its Python function
    where it is called: inside the trace, its ops land in the traced graph (a loss calling a
    ``tf.function`` with an ``input_signature``, say), and their tracebacks give the user's lines.
    The setting is process-wide: a lock keeps two diagnoses in two threads from restoring each other's
    value, and a ``tf.function`` that another thread calls meanwhile runs eagerly (correct, but slower).
    """
    with _RUN_EAGERLY_LOCK:
        before = tf.config.functions_run_eagerly()
        tf.config.run_functions_eagerly(True)
        try:
            with warnings.catch_warnings():  # tf.data's functions stay traced: that is fine here, say nothing
                warnings.filterwarnings("ignore", message=".*does not apply to tf.data functions",
                                        category=UserWarning)
                yield
        finally:
            tf.config.run_functions_eagerly(before)
