"""The nudge check: ``GRADLAB_NUDGE=1`` makes every optimizer update land slightly off.

CI runs strict nbval over every notebook with it (``.ci/run``). These tests pin what the nudge does
(each changed element moves by one float32 rounding error, up or down; untouched elements stay
bitwise) and
show that the check does its job: a planted cell printing a trained number fails under the nudge,
while a cell that prints only exact values, and a trained cell tagged ``nbval-ignore-output``,
pass. Everything runs in fresh processes: the nudge patches Keras for the whole process.
"""
from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
from planted import code_cell, failed_cells, store_run, strict_nbval

ROOT = Path(__file__).resolve().parents[2]
NOTEBOOKS = ROOT / "notebooks"


def _environment(nudge: bool) -> dict[str, str]:
    env = {key: value for key, value in os.environ.items() if key != "GRADLAB_NUDGE"}
    env.update(TF_CPP_MIN_LOG_LEVEL="2", TF_ENABLE_ONEDNN_OPTS="0", PYTHONPATH=str(NOTEBOOKS))
    if nudge:
        env["GRADLAB_NUDGE"] = "1"
    return env


def _python(code: str, nudge: bool) -> str:
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300,
                          env=_environment(nudge), cwd=NOTEBOOKS)
    assert done.returncode == 0, done.stderr
    return done.stdout


STEP = """
import workbook; workbook.setup()
import numpy as np, tensorflow as tf, keras
for dtype in ("float32", "float64"):
    w = tf.Variable(np.array([1.0, -2.0, 3.0, 0.5]), dtype=dtype)          # a tf.Variable...
    grads = tf.constant([0.5, -1.0, 0.0, 1.0], dtype)
    keras.optimizers.SGD(0.5).apply_gradients([(grads, w)])                 # eagerly
    v = keras.Variable(np.array([1.0, -2.0, 3.0, 0.5]), dtype=dtype)       # ...and a keras.Variable
    opt = keras.optimizers.SGD(0.5)
    tf.function(lambda: opt.apply_gradients([(grads, v)]))()              # traced
    print(dtype, ",".join(repr(float(a)) for a in w.numpy()), ",".join(repr(float(a)) for a in v.numpy()))
workbook.setup()                                                          # a second setup patches once
print("patched:", getattr(keras.optimizers.Optimizer.apply, "_gradlab_nudged", False))
"""


@pytest.mark.parametrize("nudge", [False, True], ids=["plain", "nudged"])
def test_the_nudge_moves_each_changed_element_by_one_float32_rounding_error_and_leaves_the_rest(nudge):
    import numpy as np

    lines = _python(STEP, nudge).splitlines()[2:]
    plain = np.array([0.75, -1.5, 3.0, 0.0])     # w - 0.5 * g: exact in binary, in both dtypes
    changed = np.array([True, True, False, True])  # the third gradient is 0: that element stays bitwise
    for line, dtype in zip(lines, ("float32", "float64")):
        name, eager, traced = line.split()
        assert name == dtype
        runs = [np.array([float(a) for a in text.split(",")], dtype=dtype) for text in (eager, traced)]
        expected = plain.astype(dtype)
        if not nudge:
            for got in runs:
                np.testing.assert_array_equal(got, expected)
            continue
        if dtype == "float32":                   # one ulp, up or down
            up, down = np.nextafter(expected, np.float32(np.inf)), np.nextafter(expected, np.float32(-np.inf))
        else:                                    # a factor 1 +- 2**-24 (so 0 stays 0)
            up, down = expected * (1 + 2.0 ** -24), expected * (1 - 2.0 ** -24)
        for got in runs:
            assert np.all((got == up) | (got == down) | (~changed & (got == expected))), (dtype, got)
            assert np.all(got[~changed] == expected[~changed])
        assert np.array_equal(runs[0], runs[1])  # seeded by the step count: the same nudge eagerly and traced
    assert lines[-1] == f"patched: {nudge}"


TRAIN = """
model = keras.Sequential([keras.Input((3,)), keras.layers.Dense(8, activation="tanh"), keras.layers.Dense(1)])
model.compile(optimizer=keras.optimizers.SGD(0.1), loss="mse")
xs = np.random.default_rng(0).normal(size=(32, 3))
loss = model.fit(xs, xs.sum(1, keepdims=True), epochs=20, batch_size=8, verbose=0).history["loss"]
"""


def _planted_notebook(path: Path) -> None:
    cells = [
        code_cell("import workbook; workbook.setup()\nimport numpy as np, tensorflow as tf, keras"),
        code_cell(TRAIN + 'print(f"final loss {loss[-1]:.12f}")'),                           # fragile
        code_cell('print("exact:", np.array([0.5, -1.0]) * 4, tf.reduce_sum(tf.constant([1.0, 2.0])).numpy())'),
        code_cell(TRAIN + 'print(f"final loss {loss[-1]:.12f}")\nassert loss[-1] < 0.5 * loss[0]',
                  ("nbval-ignore-output",)),                                              # trained, tagged
    ]
    store_run(path, cells, _environment(False))


def test_strict_nbval_under_the_nudge_fails_a_planted_trained_cell_and_only_that_cell(tmp_path):
    notebook = tmp_path / "planted.ipynb"
    _planted_notebook(notebook)
    code, out = strict_nbval(notebook, _environment(False))
    assert code == 0, out                                 # deterministic: a second run matches bit for bit
    code, out = strict_nbval(notebook, _environment(True))
    failed = failed_cells(out)
    assert code != 0 and failed == ["Cell 1"], out        # the fragile cell, named; exact and tagged cells pass
    assert "4 passed" not in out and "3 passed" in out, out
