"""Which TensorFlow gradlab runs on, checked once when gradlab is imported.

gradlab does not install TensorFlow itself (installing its distribution, ``gradlab-tf``, keeps the
TensorFlow you have, CPU or GPU build). It needs TensorFlow 2.16 to 2.21: 2.16 is the first whose ``tf.keras`` is
Keras 3, and 2.21 is the newest release it is tested on. Anything else raises an ``ImportError``
that says what to install, instead of failing later with an obscure error.

It also holds :func:`functions_traced_inline`, the one switch of ``tf.config.run_functions_eagerly`` that the
gradient doctor and notebook 13's self-check share.
"""
from __future__ import annotations

import contextlib
import re
import threading
import warnings
from typing import Iterator

#: The supported TensorFlow releases: ``MIN <= (major, minor) < MAX``. pyproject.toml's extras
#: declare the same range; tests/project/test_packaging.py checks that the two agree.
MIN_TENSORFLOW = (2, 16)
MAX_TENSORFLOW = (2, 22)

_INSTALL = (
    "Install a supported TensorFlow into this environment, for example "
    "`pip install 'tensorflow>=2.16,<2.22'` (GPU-capable build on Linux), "
    "`pip install 'tensorflow-cpu>=2.16,<2.22'` (CPU only), or gradlab-tf with its extra "
    "`[tensorflow]` (`pip install '.[tensorflow]'` from a clone of gradlab-tf)."
)


def _version_tuple(version: str) -> tuple[int, int]:
    match = re.match(r"(\d+)\.(\d+)", version)
    if match is None:
        raise ImportError(f"gradlab cannot read the TensorFlow version {version!r}. {_INSTALL}")
    return int(match[1]), int(match[2])


def check_tensorflow_version(version: str) -> None:
    """Raises ``ImportError`` unless ``version`` (a TensorFlow release string) is supported.

    Example:
      >>> from gradlab._compat import check_tensorflow_version
      >>> check_tensorflow_version("2.21.0")
      >>> check_tensorflow_version("2.15.1")
      Traceback (most recent call last):
      ...
      ImportError: gradlab needs TensorFlow 2.16 to 2.21 (with Keras 3); found TensorFlow 2.15.1. ...
    """
    found = _version_tuple(version)
    if not MIN_TENSORFLOW <= found < MAX_TENSORFLOW:
        raise ImportError(
            f"gradlab needs TensorFlow 2.16 to 2.21 (with Keras 3); found TensorFlow {version}. "
            + _INSTALL
        )


def import_tensorflow():
    """Imports TensorFlow and checks its version; a clear ``ImportError`` if it is missing."""
    try:
        import tensorflow as tf
    except ImportError as error:  # TensorFlow missing, or a broken install
        raise ImportError(f"gradlab needs TensorFlow, which cannot be imported ({error}). {_INSTALL}") from error
    check_tensorflow_version(tf.__version__)
    return tf


# --- tracing with the tf.functions a function calls inlined (the doctor, and notebook 13's self-check) ---

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
    import tensorflow as tf  # here, not at the top: importing this module must not import TensorFlow (see above)

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
