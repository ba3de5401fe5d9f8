"""The setup every notebook of the workbook runs first (explained once, in notebook 00).

``setup()`` must run before TensorFlow is imported for the first time: the two environment
variables it sets are read when TensorFlow loads. It is safe to run again (Restart-and-Run-All, or
running the setup cell twice): every step sets the same value again.
"""
from __future__ import annotations

import os
import platform

#: The environment TensorFlow reads at import: no C++ info and warning lines, and none of oneDNN's
#: optional graph rewrites (which also print a notice).
ENVIRONMENT = {"TF_CPP_MIN_LOG_LEVEL": "2", "TF_ENABLE_ONEDNN_OPTS": "0"}
PRINT_DECIMALS = 4


def setup(seed: int = 0) -> None:
    """Quiet TensorFlow, run one op at a time on one thread, seed everything, fix NumPy's printing.

    Args:
      seed: passed to ``keras.utils.set_random_seed``, which seeds Python, NumPy and TensorFlow.

    Prints one line with the versions in use and one with the CPU architecture and the settings:
    a learner on another machine can compare them with the stored output of the setup cell.
    """
    if not isinstance(seed, int) or isinstance(seed, bool) or seed < 0:
        raise ValueError(f"seed must be a non-negative integer; got {seed!r}")
    os.environ.update(ENVIRONMENT)      # read when TensorFlow loads; child processes inherit it
    import keras
    import numpy as np
    import tensorflow as tf

    import gradlab

    # One thread per op and one op at a time: the order of every floating-point sum, and so every
    # printed digit, does not depend on the number of cores.
    tf.config.threading.set_intra_op_parallelism_threads(1)
    tf.config.threading.set_inter_op_parallelism_threads(1)
    keras.utils.set_random_seed(seed)
    np.set_printoptions(precision=PRINT_DECIMALS, suppress=True)
    _inline_plots()
    print(f"TensorFlow {tf.__version__} · Keras {keras.__version__} · NumPy {np.__version__} · "
          f"gradlab {gradlab.__version__}")
    print(f"{platform.machine()} CPU · 1 thread, one op at a time · seed {seed} · arrays print {PRINT_DECIMALS} decimals")


def _inline_plots() -> None:
    """``%matplotlib inline`` when running under IPython (figures are drawn into the notebook)."""
    try:
        from IPython import get_ipython
    except ImportError:
        return
    shell = get_ipython()
    if shell is not None:
        shell.run_line_magic("matplotlib", "inline")
