"""What each technique costs: the whole benchmark suite (``make bench``).

Five parts, each printed as a table and written to one JSON file:

1. **steps**: one training step of a reference MLP and a small CNN with a gradient modification
   between two layers, for each technique (stop_gradient trick, tf.custom_gradient, every gradlab
   op, gradient_override + tf.gradients, tf.numpy_function / tf.py_function, optimizer-level
   clipping), eagerly, in tf.function and with XLA; ratios to the unmodified step measured in the
   same run, mode and round (see ``measure.py``; the techniques are listed in ``catalogue.py``);
2. **fit**: ``model.fit`` with a layer of ``gradlab.layers`` against the same model without it;
3. **import**: what ``import gradlab`` adds to ``import tensorflow`` (``import_cost.py``);
4. **notebooks**: each notebook's wall time under strict nbval against a bare TensorFlow kernel
   (``notebook_times.py``);
5. **doctor**: ``gradlab.explain_gradient`` against one plain tape gradient of the same function, on a
   small CNN and on ResNet50 (``doctor_cost.py``).

Targets: every gradlab op in a tf.function training step <= 1.03 x baseline at the reference
sizes; ``import gradlab`` adds <= 0.3 s; the nbval suite <= 1.5 x (notebooks x floor) and no
notebook above 30 s.

Usage (from the repository root; ``make bench`` / ``make bench BENCH_ARGS='--quick'``)::

    TF_CPP_MIN_LOG_LEVEL=2 TF_ENABLE_ONEDNN_OPTS=0 .venv/bin/python benchmarks/run.py
    ... --quick              # about a minute: MLP only, fewer techniques and rounds, no notebooks
    ... --only steps,import  # some parts only (steps, fit, import, notebooks, doctor)
    ... --json out.json      # where the JSON goes (default benchmarks/results.json; '-': stdout,
                             # tables on stderr; through make, use make -s so make's echo stays out)
    ... --check              # exit with status 1 if a target is missed
    ... --clock cpu --threads 1   # steadier on a busy machine: process CPU time, one TF thread
"""
from __future__ import annotations

import argparse
import datetime
import json
import os
import platform
import sys
import time
from pathlib import Path

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
os.environ.setdefault("TF_ENABLE_ONEDNN_OPTS", "0")

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
sys.path.insert(0, str(HERE))

PARTS = ("steps", "fit", "import", "notebooks", "doctor")
STEP_TARGET = 1.03


def _load() -> list:
    try:
        return [round(x, 2) for x in os.getloadavg()]
    except OSError:
        return []


def _cell(stats: dict, scale: float = 1.0, unit: str = "", digits: int = 3) -> str:
    m, lo, hi = (stats[k] * scale for k in ("median", "q25", "q75"))
    return f"{m:.{digits}f}{unit} [{lo:.{digits}f}-{hi:.{digits}f}]"


def print_step_tables(steps: dict, out=print) -> None:
    from models import MODE_LABELS

    modes = steps["modes"]
    width = 24
    for kind, info in steps["models"].items():
        rows = [r for r in steps["rows"] if r["model"] == kind]
        names = list(dict.fromkeys(r["technique"] for r in rows))
        by = {(r["technique"], r["mode"]): r for r in rows}
        out("")
        out(f"{info['description']}")
        reasons: list = []

        def table(title, fmt):
            out(f"  {title}")
            out(f"  {'technique':<35s}" + "".join(f"{MODE_LABELS[m]:>{width}s}" for m in modes))
            for name in names:
                line = f"  {name:<35s}"
                for mode in modes:
                    row = by[(name, mode)]
                    if row["available"]:
                        text = fmt(row)
                    else:
                        if row["reason"] not in reasons:
                            reasons.append(row["reason"])
                        text = f"n/a ({reasons.index(row['reason']) + 1})"
                    line += f"{text:>{width}s}"
                out(line)

        clock = "wall time" if steps.get("clock", "wall") == "wall" else "process CPU time"
        table(f"{clock} per step / baseline 'none' in the same mode and round: median [IQR]",
              lambda r: _cell(r["ratio"]))
        table(f"raw {clock} per step, ms: median [IQR]",
              lambda r: _cell(r["seconds_per_step"], 1e3, "", 2))
        for i, reason in enumerate(reasons, 1):
            out(f"  ({i}) n/a: {reason}")


def print_fit_table(fit: dict, out=print) -> None:
    from models import MODE_LABELS

    modes = list(dict.fromkeys(r["mode"] for r in fit["rows"]))
    names = list(dict.fromkeys(r["technique"] for r in fit["rows"]))
    by = {(r["technique"], r["mode"]): r for r in fit["rows"]}
    width = 30
    out("")
    out(fit["description"])
    clock_name = "wall" if fit.get("clock", "wall") == "wall" else "CPU"
    out(f"  {clock_name} time per step / fit without the layer, same mode and round: "
        "median [IQR]; steps per second (wall clock)")
    out(f"  {'layer':<33s}" + "".join(f"{MODE_LABELS[m]:>{width}s}" for m in modes))
    for name in names:
        line = f"  {name:<33s}"
        for mode in modes:
            row = by[(name, mode)]
            text = (f"{_cell(row['ratio'])} {row['steps_per_second']:5.0f}/s" if row["available"]
                    else f"n/a: {row['reason'][:20]}")
            line += f"{text:>{width}s}"
        out(line)


def step_targets(steps: dict) -> list:
    """The tf.function target for every gradlab op measured, on both clocks."""
    clock = steps["clock"]
    results = []
    for row in steps["rows"]:
        if not (row["gradlab_op"] and row["mode"] == "function" and row["available"]):
            continue
        against = row.get("ratio_to_target")
        if against is None:
            continue
        hand = row.get("ratio_to_reference", {}).get(clock, {}).get("median")
        results.append({
            "model": row["model"], "technique": row["technique"], "against": row["target_against"],
            "clock": clock, "ratio": against[clock]["median"], "q25": against[clock]["q25"],
            "q75": against[clock]["q75"],
            "other_clock": {"cpu" if clock == "wall" else "wall": against["cpu" if clock == "wall" else "wall"]},
            "ratio_to_baseline": row["ratio"]["median"],
            "hand_written": row["reference"], "ratio_to_hand_written": hand,
            "met": against[clock]["median"] <= STEP_TARGET,
        })
    return results


def print_step_targets(targets: list, out=print) -> None:
    if not targets:
        return
    clock = targets[0]["clock"]
    other = "cpu" if clock == "wall" else "wall"
    out("")
    out(f"Target: every gradlab op in a tf.function training step <= {STEP_TARGET} x the baseline 'none' "
        "(for ops that also change the forward value: their plain-TF equivalent)")
    out(f"  {'model':<6s}{'op':<35s}{'compared with':<27s}{clock + ' ratio [IQR]':>22s}"
        f"{other + ' ratio':>11s}{'vs hand-written':>17s}  verdict")
    for t in targets:
        hand = t["ratio_to_hand_written"]
        hand_text = f"{hand:.3f}" if hand is not None and t["hand_written"] not in (t["against"], "none") else "-"
        out(f"  {t['model']:<6s}{t['technique']:<35s}{t['against']:<27s}"
            f"{t['ratio']:>8.3f} [{t['q25']:.3f}-{t['q75']:.3f}]{t['other_clock'][other]['median']:>11.3f}"
            f"{hand_text:>17s}  {'met' if t['met'] else 'MISSED'}")


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--quick", action="store_true",
                        help="a short run (about a minute): MLP only, fewer techniques and rounds, "
                             "no notebooks")
    parser.add_argument("--only", default=",".join(PARTS),
                        help=f"comma-separated parts to run, of {','.join(PARTS)}")
    parser.add_argument("--rounds", type=int, default=None, help="rounds of the step benchmark")
    parser.add_argument("--json", default=str(HERE / "results.json"),
                        help="where to write the JSON results ('-' for stdout)")
    parser.add_argument("--clock", choices=("wall", "cpu"), default="wall",
                        help="the clock the ratios use: wall time (default) or process CPU time, "
                             "steadier on a busy machine (both are in the JSON)")
    parser.add_argument("--threads", type=int, default=0,
                        help="TensorFlow intra- and inter-op threads (default 0: TensorFlow's choice)")
    parser.add_argument("--check", action="store_true", help="exit 1 if a target is missed")
    args = parser.parse_args(argv)
    parts = [p.strip() for p in args.only.split(",") if p.strip()]
    unknown = sorted(set(parts) - set(PARTS))
    if unknown:
        parser.error(f"unknown part(s) {unknown}; choose from {list(PARTS)}")
    if args.quick and "notebooks" in parts and args.only == ",".join(PARTS):
        parts.remove("notebooks")  # --quick alone skips them; --only ...,notebooks keeps them

    # Table text goes to stdout unless the JSON does.
    stream = sys.stderr if args.json == "-" else sys.stdout

    def out(text=""):
        print(text, file=stream, flush=True)

    import tensorflow as tf
    import keras
    import gradlab

    if args.threads:
        tf.config.threading.set_intra_op_parallelism_threads(args.threads)
        tf.config.threading.set_inter_op_parallelism_threads(args.threads)
    started = time.perf_counter()
    results = {
        "meta": {
            "date": datetime.datetime.now().isoformat(timespec="seconds"),
            "quick": args.quick, "parts": parts, "cpus": os.cpu_count(), "clock": args.clock,
            "threads": args.threads or "tensorflow default",
            "python": platform.python_version(), "platform": platform.platform(),
            "tensorflow": tf.__version__, "keras": keras.__version__, "gradlab": gradlab.__version__,
            "load_average_start": _load(),
        },
        "targets": {},
    }
    out(f"gradlab benchmarks{' (--quick)' if args.quick else ''}: TensorFlow {tf.__version__}, "
        f"Keras {keras.__version__}, gradlab {gradlab.__version__}, Python "
        f"{platform.python_version()}, {os.cpu_count()} CPU(s), load average {_load()}")
    out(f"Ratios use the {'wall clock' if args.clock == 'wall' else 'process CPU time'} and compare with a "
        "baseline measured in the same run, mode and round; other processes on the machine add noise "
        "(see the IQRs; --clock cpu --threads 1 is steadier on a busy machine).")
    missed = []

    if "steps" in parts:
        import catalogue
        import measure

        out("")
        out("== 1. One training step, gradient modified between two layers ==")
        if args.quick:
            steps = measure.measure_steps(models=("mlp",), techniques=catalogue.QUICK_TECHNIQUES,
                                          rounds=args.rounds or 7, block_seconds=0.03,
                                          clock=args.clock, log=out)
        else:
            steps = measure.measure_steps(rounds=args.rounds or 15, clock=args.clock, log=out)
        print_step_tables(steps, out)
        targets = step_targets(steps)
        print_step_targets(targets, out)
        results["steps"] = steps
        results["targets"]["gradlab_op_in_tf_function"] = targets
        missed += [f"{t['model']} {t['technique']}" for t in targets if not t["met"]]

    if "fit" in parts:
        import measure

        out("")
        out("== 2. A gradlab.layers layer in model.fit ==")
        if args.quick:
            fit = measure.measure_fit(layers=("none", "gradlab.layers.ScaleGradient"),
                                      rounds=4, steps=16, clock=args.clock, log=out)
        else:
            fit = measure.measure_fit(clock=args.clock, log=out)
        print_fit_table(fit, out)
        results["fit"] = fit

    if "import" in parts:
        import import_cost

        out("")
        out("== 3. import gradlab beyond import tensorflow ==")
        imp = import_cost.measure_import(repeats=3 if args.quick else 10, warmup=not args.quick, log=out)
        import_cost.report(imp, log=out)
        results["import"] = imp
        results["targets"]["import"] = imp["met"]
        if not imp["met"]:
            missed.append("import gradlab")

    if "notebooks" in parts:
        import notebook_times

        out("")
        out("== 4. Notebooks under nbval, against a bare TensorFlow kernel ==")
        nbs = notebook_times.measure_notebooks(floor_repeats=3, log=out)
        out("")
        notebook_times.report(nbs, log=out)
        results["notebooks"] = nbs
        results["targets"]["notebook_suite"] = nbs["suite_target_met"]
        results["targets"]["notebook_30s"] = nbs["per_notebook_target_met"]
        if not nbs["suite_target_met"]:
            missed.append("nbval suite")
        missed += [f"notebook {n} > 30 s" for n in nbs["over_30_seconds"]]
    elif args.quick:
        out("")
        out("== 4. Notebooks: skipped with --quick (run `make bench`, or add --only notebooks) ==")

    if "doctor" in parts:
        import doctor_cost

        out("")
        out("== 5. gradlab.explain_gradient against one plain gradient ==")
        doc = doctor_cost.measure_doctor(quick=args.quick, rounds=args.rounds or 0, log=out)
        doctor_cost.report(doc, log=out)
        results["doctor"] = doc
        if doc["met"] is not None:
            results["targets"]["explain_gradient"] = doc["met"]
            if not doc["met"]:
                missed.append("explain_gradient on ResNet50")

    results["meta"]["load_average_end"] = _load()
    results["meta"]["seconds"] = round(time.perf_counter() - started, 1)
    results["missed"] = missed
    out("")
    out(f"Done in {results['meta']['seconds']:.0f} s; load average at the end {_load()}. "
        f"Targets missed: {', '.join(missed) if missed else 'none'}.")
    text = json.dumps(results, indent=1)
    if args.json == "-":
        print(text)
    else:
        Path(args.json).write_text(text + "\n")
        out(f"JSON written to {args.json}")
    return 1 if (args.check and missed) else 0


if __name__ == "__main__":
    sys.exit(main())
