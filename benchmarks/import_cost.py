"""The cost of ``import gradlab`` beyond ``import tensorflow``, in fresh interpreters.

Each repetition starts a new Python process that imports TensorFlow, then gradlab, and reports
both durations (``time.perf_counter`` around each import) and which modules ``import gradlab``
added. ``gradlab.plots`` and ``gradlab.widgets`` are lazy, so ``matplotlib.pyplot`` and
``ipywidgets`` must not be among them (TensorFlow itself already loads parts of matplotlib).

Target: ``import gradlab`` adds <= 0.3 s (median) to ``import tensorflow``.

Usage (from the repository root)::

    .venv/bin/python benchmarks/import_cost.py [--repeats 10]
"""
from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
TARGET_SECONDS = 0.3
HEAVY = ("matplotlib.pyplot", "ipywidgets", "ipympl", "keras", "gradlab.layers", "gradlab.plots",
         "gradlab.widgets")

PROBE = r"""
import sys, time, json
t0 = time.perf_counter()
import tensorflow
t1 = time.perf_counter()
before = set(sys.modules)
import gradlab
t2 = time.perf_counter()
heavy = %r
added = sorted(set(sys.modules) - before)
print(json.dumps({
    "tensorflow": t1 - t0, "gradlab": t2 - t1, "added": len(added),
    "added_heavy": sorted(m for m in added if m in heavy or m.split(".")[0] in ("ipywidgets", "ipympl")),
    "loaded_by_tensorflow": sorted(m for m in heavy if m in before),
}))
""" % (HEAVY,)


def environment() -> dict:
    return {**os.environ, "TF_CPP_MIN_LOG_LEVEL": "2", "TF_ENABLE_ONEDNN_OPTS": "0"}


def probe_once() -> dict:
    result = subprocess.run([sys.executable, "-c", PROBE], capture_output=True, text=True,
                            timeout=300, cwd=ROOT, env=environment())
    if result.returncode != 0:
        raise RuntimeError(f"the import probe failed:\n{result.stderr[-2000:]}")
    return json.loads(result.stdout.strip().splitlines()[-1])


def measure_import(repeats: int = 10, warmup: bool = True, log=print) -> dict:
    """Median (and IQR) of the import times over ``repeats`` fresh processes (after one warm-up)."""
    if warmup:
        probe_once()  # warm the file cache; not counted
    samples = [probe_once() for _ in range(repeats)]
    tf_times = np.array([s["tensorflow"] for s in samples])
    gl_times = np.array([s["gradlab"] for s in samples])

    def stats(a):
        return {"median": float(np.median(a)), "q25": float(np.percentile(a, 25)),
                "q75": float(np.percentile(a, 75)), "min": float(a.min()), "max": float(a.max())}

    added_heavy = sorted({m for s in samples for m in s["added_heavy"]})
    result = {
        "repeats": repeats,
        "import_tensorflow_seconds": stats(tf_times),
        "import_gradlab_after_tensorflow_seconds": stats(gl_times),
        "modules_added_by_gradlab": int(np.median([s["added"] for s in samples])),
        "heavy_modules_added_by_gradlab": added_heavy,
        "heavy_modules_already_loaded_by_tensorflow": samples[0]["loaded_by_tensorflow"],
        "target_seconds": TARGET_SECONDS,
    }
    result["met"] = result["import_gradlab_after_tensorflow_seconds"]["median"] <= TARGET_SECONDS and not added_heavy
    return result


def report(result: dict, log=print) -> None:
    tf_s, gl_s = result["import_tensorflow_seconds"], result["import_gradlab_after_tensorflow_seconds"]
    log(f"  import tensorflow                 median {tf_s['median']:6.3f} s  "
        f"(IQR {tf_s['q25']:.3f}-{tf_s['q75']:.3f}, {result['repeats']} fresh processes)")
    log(f"  import gradlab after tensorflow   median {gl_s['median']:6.3f} s  "
        f"(IQR {gl_s['q25']:.3f}-{gl_s['q75']:.3f}); {result['modules_added_by_gradlab']} modules added")
    heavy = result["heavy_modules_added_by_gradlab"]
    log(f"  heavy modules added by gradlab: {', '.join(heavy) if heavy else 'none'} "
        f"(checked: {', '.join(HEAVY)})")
    already = result["heavy_modules_already_loaded_by_tensorflow"]
    if already:
        log(f"  already loaded by import tensorflow itself: {', '.join(already)}")
    verdict = "met" if result["met"] else "MISSED"
    log(f"  target: import gradlab adds <= {result['target_seconds']:.1f} s and no plotting/widget "
        f"module: {verdict}")


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--repeats", type=int, default=10)
    args = parser.parse_args(argv)
    report(measure_import(args.repeats))
    return 0


if __name__ == "__main__":
    sys.exit(main())
