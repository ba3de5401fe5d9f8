"""The setup every notebook of the workbook runs first (explained once, in notebook 00).

``setup()`` must run before TensorFlow is imported for the first time: the two environment
variables it sets are read when TensorFlow loads. It is safe to run again (Restart-and-Run-All, or
running the setup cell twice): every step sets the same value again.
"""
from __future__ import annotations

import os
import platform
from pathlib import Path

#: The environment TensorFlow reads at import: no C++ info and warning lines, and none of oneDNN's
#: optional graph rewrites (which also print a notice).
ENVIRONMENT = {"TF_CPP_MIN_LOG_LEVEL": "2", "TF_ENABLE_ONEDNN_OPTS": "0"}
PRINT_DECIMALS = 4
#: Test-only: when this environment variable is "1", ``setup()`` makes every optimizer update land
#: one float32 rounding error off (``nudge_optimizer_updates``). CI runs strict nbval so, and a
#: compared output that changes is one another CPU could change too.
NUDGE_VARIABLE = "GRADLAB_NUDGE"
#: The language of the workbook's messages, set by ``setup(language=...)`` (see ``exercises/_i18n.py``).
LANGUAGE_VARIABLE = "GRADLAB_LANGUAGE"
LOCALE_DIR = Path(__file__).resolve().parent / "locale"


def setup(seed: int = 0, *, language: str = "en") -> None:
    """Quiet TensorFlow, run one op at a time on one thread, seed everything, fix NumPy's printing.

    Args:
      seed: passed to ``keras.utils.set_random_seed``, which seeds Python, NumPy and TensorFlow.
      language: the language of the workbook's messages in this kernel (the self-checks' verdicts,
        this function's own output): ``"en"``, or an edition with a catalog in ``notebooks/locale``
        (``"zh_CN"``, which the Chinese notebooks in ``notebooks/zh`` choose). Exceptions stay English.

    Prints one line with the versions in use and one with the CPU architecture and the settings:
    a learner on another machine can compare them with the stored output of the setup cell.
    """
    if not isinstance(seed, int) or isinstance(seed, bool) or seed < 0:
        raise ValueError(f"seed must be a non-negative integer; got {seed!r}")
    languages = ["en", *sorted(mo.parents[1].name for mo in LOCALE_DIR.glob("*/LC_MESSAGES/workbook.mo"))]
    if language not in languages:
        raise ValueError(f"language must be one of {languages}; got {language!r}")
    if language == "en":
        os.environ.pop(LANGUAGE_VARIABLE, None)
    else:
        os.environ[LANGUAGE_VARIABLE] = language      # read by exercises._i18n when a message is shown
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
    if os.environ.get(NUDGE_VARIABLE) == "1":
        nudge_optimizer_updates()
    np.set_printoptions(precision=PRINT_DECIMALS, suppress=True)
    _inline_plots()
    print(f"TensorFlow {tf.__version__} · Keras {keras.__version__} · NumPy {np.__version__} · "
          f"gradlab {gradlab.__version__}")
    from exercises._i18n import _

    print(_("{machine} CPU · 1 thread, one op at a time · seed {seed} · arrays print {decimals} decimals").format(
        machine=platform.machine(), seed=seed, decimals=PRINT_DECIMALS))


def nudge_optimizer_updates() -> None:
    """Test-only: every Keras optimizer step lands one float32 rounding error off, up or down.

    Trained numbers differ from CPU to CPU: other vector widths and cache-sized blocks in the
    matrix kernels add in another order, and training amplifies that. Float64 does not prevent
    it (the same pins gave other DANN accuracies in notebook 12 on two x86-64 CPUs). This makes the
    effect happen on one machine: after each ``Optimizer.apply`` (``apply_gradients``, ``fit``,
    hand-written loops, inside or outside ``tf.function``), each float32 element the step changed
    moves one ulp (``tf.math.nextafter``) and each float64 element by a factor ``1 ± 2**-24``
    (float32's unit roundoff; one float64 ulp per step proved too weak to change what other CPUs
    change). The direction comes from a stateless random stream seeded by the step count and the
    variable's position: the same every run, and unbiased (a nudge of one sign scales all weights
    alike, which a step function never notices). Elements a step leaves alone (a zero or missing
    gradient) stay bitwise, so what is exact by construction stays exact. Patches once.
    """
    import keras
    import tensorflow as tf

    optimizer_class = keras.optimizers.Optimizer
    if getattr(optimizer_class.apply, "_gradlab_nudged", False):
        return
    original = optimizer_class.apply

    def apply(self, grads, trainable_variables=None):
        variables = list(self._trainable_variables if trainable_variables is None else trainable_variables)
        # tf.Variable or keras.Variable: both convert to a tensor; dtype spelled either way.
        before = [tf.identity(tf.convert_to_tensor(v)) if tf.as_dtype(v.dtype) in (tf.float32, tf.float64) else None
                  for v in variables]
        step = tf.cast(tf.convert_to_tensor(self.iterations), tf.int64)
        original(self, grads, trainable_variables)
        for index, (variable, old) in enumerate(zip(variables, before)):
            if old is not None:
                seed = tf.stack([step, tf.constant(index, tf.int64)])
                variable.assign(_nudged(tf.convert_to_tensor(variable), old, seed))

    apply._gradlab_nudged = True
    optimizer_class.apply = apply


def _nudged(new, old, seed):
    """``new`` with each element that differs from ``old`` moved one float32 rounding error up or down."""
    import tensorflow as tf

    up = tf.random.stateless_uniform(tf.shape(new), seed=seed) < 0.5
    if new.dtype == tf.float32:
        moved = tf.math.nextafter(new, tf.where(up, float("inf"), float("-inf")))
    else:
        moved = new * (1.0 + tf.where(up, tf.constant(2.0 ** -24, new.dtype), -(2.0 ** -24)))
    return tf.where(tf.equal(new, old), new, moved)


def _inline_plots() -> None:
    """``%matplotlib inline`` when running under IPython (figures are drawn into the notebook)."""
    try:
        from IPython import get_ipython
    except ImportError:
        return
    shell = get_ipython()
    if shell is not None:
        shell.run_line_magic("matplotlib", "inline")
