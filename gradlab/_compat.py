"""Which TensorFlow gradlab runs on, checked once when gradlab is imported.

gradlab does not install TensorFlow itself (installing its distribution, ``gradlab-tf``, keeps the
TensorFlow you have, CPU or GPU build). It needs TensorFlow 2.16 to 2.21: 2.16 is the first whose ``tf.keras`` is
Keras 3, and 2.21 is the newest release it is tested on. Anything else raises an ``ImportError``
that says what to install, instead of failing later with an obscure error.
"""
from __future__ import annotations

import re

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
