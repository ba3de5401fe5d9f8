"""notebooks/workbook.py: the setup every notebook runs first."""
from __future__ import annotations

import platform
import subprocess
import sys
from pathlib import Path

import pytest

NOTEBOOKS = Path(__file__).resolve().parents[2] / "notebooks"  # on sys.path already (conftest.py)
import workbook  # noqa: E402


def _run(code: str) -> str:
    """Runs code in a fresh interpreter (TensorFlow not yet imported) from the notebooks folder."""
    done = subprocess.run([sys.executable, "-c", code], cwd=NOTEBOOKS, capture_output=True, text=True,
                          timeout=300, env={"PATH": "/usr/bin:/bin", "HOME": str(Path.home())})
    assert done.returncode == 0, done.stderr
    return done.stdout + done.stderr


def test_setup_quiets_tensorflow_fixes_threads_seed_and_printing_before_the_import():
    out = _run(
        "import workbook; workbook.setup(3)\n"
        "import os, random, numpy as np, tensorflow as tf, keras\n"
        "print(os.environ['TF_CPP_MIN_LOG_LEVEL'], os.environ['TF_ENABLE_ONEDNN_OPTS'])\n"
        "print(tf.config.threading.get_intra_op_parallelism_threads(), tf.config.threading.get_inter_op_parallelism_threads())\n"
        "first = np.random.rand(); keras.utils.set_random_seed(3); print(first == np.random.rand())\n"
        "print(np.get_printoptions()['precision'], np.array([1/3]))\n")
    lines = out.splitlines()
    assert lines[0].startswith("TensorFlow ") and " · gradlab " in lines[0] and " · NumPy " in lines[0]
    assert lines[1] == f"{platform.machine()} CPU · 1 thread, one op at a time · seed 3 · arrays print 4 decimals"
    assert lines[2:] == ["2 0", "1 1", "True", "4 [0.3333]"]        # and no TensorFlow log line at all


def test_setup_runs_twice_without_error():
    out = _run("import workbook; workbook.setup(); import tensorflow as tf; tf.constant(1.0) + 1; workbook.setup()")
    assert out.count("seed 0") == 2


@pytest.mark.parametrize("bad", [-1, 1.5, "0", True, None])
def test_setup_rejects_a_bad_seed(bad):
    with pytest.raises(ValueError, match="seed must be a non-negative integer"):
        workbook.setup(bad)
