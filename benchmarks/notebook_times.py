"""The wall time of each notebook under nbval, against the floor of a bare TensorFlow kernel.

Each notebook runs in its own ``pytest --nbval --nbval-current-env --nbval-sanitize-with
tests/nbval_sanitize.cfg`` process, exactly as ``make test`` checks it (but one notebook per
process). The *floor* is the same command on a throw-away notebook whose only cell imports
TensorFlow: pytest's start-up, a fresh kernel and the TensorFlow import, which every notebook pays
before its first line of content. It is measured before, between and after the notebooks; its
median is used.

Targets: the whole suite <= 1.5 x (number of notebooks x floor); no notebook above 30 s.

Usage (from the repository root)::

    .venv/bin/python benchmarks/notebook_times.py [--floor-repeats 3] [notebooks/NN_name.ipynb ...]
"""
from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Optional, Sequence

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
PER_NOTEBOOK_SECONDS = 30.0
SUITE_FACTOR = 1.5

FLOOR_CELL = """import os

os.environ["TF_CPP_MIN_LOG_LEVEL"] = "2"
os.environ["TF_ENABLE_ONEDNN_OPTS"] = "0"

import tensorflow as tf"""


def write_floor_notebook(path: Path) -> Path:
    import nbformat

    nb = nbformat.v4.new_notebook()
    cell = nbformat.v4.new_code_cell(FLOOR_CELL)
    cell.execution_count = 1
    nb.cells = [nbformat.v4.new_markdown_cell("# Floor: a kernel that imports TensorFlow"), cell]
    nb.metadata["kernelspec"] = {"name": "python3", "display_name": "Python 3", "language": "python"}
    nb.metadata["language_info"] = {"name": "python"}
    nbformat.write(nb, str(path))
    return path


def run_nbval(path: Path) -> dict:
    """Runs one notebook under strict nbval in a fresh pytest process; wall time and verdict."""
    command = [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider",
               "-c", str(ROOT / "pyproject.toml"), "--rootdir", str(ROOT),
               "--nbval", "--nbval-current-env",
               "--nbval-sanitize-with", str(ROOT / "tests" / "nbval_sanitize.cfg"), str(path)]
    env = {**os.environ, "TF_CPP_MIN_LOG_LEVEL": "2", "TF_ENABLE_ONEDNN_OPTS": "0"}
    start = time.perf_counter()
    result = subprocess.run(command, capture_output=True, text=True, cwd=ROOT, env=env, timeout=900)
    seconds = time.perf_counter() - start
    last = (result.stdout.strip().splitlines() or [""])[-1]
    return {"seconds": seconds, "passed": result.returncode == 0, "summary": last}


def measure_notebooks(notebooks: Optional[Sequence[Path]] = None, floor_repeats: int = 3,
                      log=print) -> dict:
    """Times each notebook once and the floor ``floor_repeats`` times, spread over the run."""
    notebooks = [Path(p) for p in (notebooks or sorted((ROOT / "notebooks").glob("*.ipynb")))]
    floor_times, rows = [], []
    with tempfile.TemporaryDirectory(prefix="gradlab-floor-") as tmp:
        floor = write_floor_notebook(Path(tmp) / "floor.ipynb")
        # the floor runs at evenly spread positions among the notebooks: first, ..., last
        schedule = [("notebook", path) for path in notebooks]
        slots = [0] if floor_repeats <= 1 else \
            np.linspace(0, len(notebooks), floor_repeats).round().astype(int).tolist()
        for offset, slot in enumerate(sorted(slots)):
            schedule.insert(slot + offset, ("floor", floor))
        for kind, path in schedule:
            res = run_nbval(path)
            if kind == "floor":
                floor_times.append(res["seconds"])
                log(f"  {'floor (kernel + import tensorflow)':<36s} {res['seconds']:6.1f} s  "
                    f"{'passed' if res['passed'] else 'FAILED: ' + res['summary']}")
            else:
                rows.append({"notebook": path.name, **res})
                log(f"  {path.name:<36s} {res['seconds']:6.1f} s  "
                    f"{'passed' if res['passed'] else 'FAILED: ' + res['summary']}")
    floor_median = float(np.median(floor_times))
    total = float(sum(r["seconds"] for r in rows))
    budget = SUITE_FACTOR * len(rows) * floor_median
    for row in rows:
        row["ratio_to_floor"] = row["seconds"] / floor_median
        row["above_floor_seconds"] = row["seconds"] - floor_median
    slow = [r["notebook"] for r in rows if r["seconds"] > PER_NOTEBOOK_SECONDS]
    return {
        "floor_seconds": floor_times, "floor_median_seconds": floor_median, "notebooks": rows,
        "total_seconds": total, "suite_budget_seconds": budget,
        "suite_ratio_to_floor": total / (len(rows) * floor_median) if rows else None,
        "suite_target_met": total <= budget, "over_30_seconds": slow,
        "per_notebook_target_met": not slow, "all_passed": all(r["passed"] for r in rows),
    }


def report(result: dict, log=print) -> None:
    n = len(result["notebooks"])
    floor = result["floor_median_seconds"]
    log(f"  floor median {floor:.1f} s (runs: {', '.join(f'{t:.1f}' for t in result['floor_seconds'])})")
    log(f"  {'notebook':<36s} {'seconds':>8s} {'x floor':>8s} {'above floor':>12s}  nbval")
    for row in result["notebooks"]:
        log(f"  {row['notebook']:<36s} {row['seconds']:8.1f} {row['ratio_to_floor']:8.2f} "
            f"{row['above_floor_seconds']:11.1f}s  {'passed' if row['passed'] else 'FAILED'}")
    if not n:
        return
    log(f"  suite: {result['total_seconds']:.1f} s for {n} notebooks = "
        f"{result['suite_ratio_to_floor']:.2f} x (notebooks x floor); target <= {SUITE_FACTOR} x "
        f"({result['suite_budget_seconds']:.1f} s): {'met' if result['suite_target_met'] else 'MISSED'}")
    slow = result["over_30_seconds"]
    log(f"  no notebook above {PER_NOTEBOOK_SECONDS:.0f} s: "
        f"{'met' if not slow else 'MISSED (' + ', '.join(slow) + ')'}")


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("notebooks", nargs="*", help="default: notebooks/*.ipynb")
    parser.add_argument("--floor-repeats", type=int, default=3)
    args = parser.parse_args(argv)
    result = measure_notebooks(args.notebooks or None, args.floor_repeats)
    report(result)
    return 0


if __name__ == "__main__":
    sys.exit(main())
