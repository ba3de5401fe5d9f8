"""What ``gradlab.explain_gradient`` costs, against one plain gradient of the same function.

For each model, the function is ``fn(*weights) = sum(model(x))`` (logits) and the sources are the
model's trainable variables. The plain gradient is what a user computes anyway, eagerly:
``with tf.GradientTape() as tape: y = fn(); tape.gradient(y, weights)``. The report is
``gradlab.explain_gradient(fn, *weights)``: one tape gradient plus the status of every source
(the graph pass runs only for sources that are not ``ok``). Models:

* **CNN**: a small Keras CNN, batch 16 of 32x32x3: Conv3x3 16 + ReLU, Conv3x3/2 32 + ReLU, global
  average pool, Dense 10 (the reference CNN of ``models.py``, as Keras layers);
* **ResNet50**: ``keras.applications.ResNet50(weights=None, classifier_activation=None)``, batch 2 of
  224x224x3 (214 trainable variables);
* **CNN, input not ok**: the CNN with a ``tf.round`` on its input and the input as a second source,
  so that the graph pass runs for it (what a diagnosis costs when there is something to find).

Method: one untimed call of each first (Keras builds, TensorFlow warms up), then rounds; in each
round the plain gradient and the report run once each, in a random order, timed with the wall
clock and the process CPU time. The ratio report / plain is taken per round; the table gives its
median and interquartile range. Target: the report <= 5 x the plain gradient on ResNet50, where every
source is ``ok``.

Usage (from the repository root; also ``benchmarks/run.py --only doctor``)::

    TF_CPP_MIN_LOG_LEVEL=2 TF_ENABLE_ONEDNN_OPTS=0 .venv/bin/python benchmarks/doctor_cost.py [--quick]
"""
from __future__ import annotations

import argparse
import json
import os
import random
import sys
import time
from typing import Callable, Dict, List

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
os.environ.setdefault("TF_ENABLE_ONEDNN_OPTS", "0")

import numpy as np  # noqa: E402

TARGET_RATIO = 5.0


def _cnn():
    import keras

    return keras.Sequential([
        keras.Input((32, 32, 3)),
        keras.layers.Conv2D(16, 3, padding="same", activation="relu"),
        keras.layers.Conv2D(32, 3, strides=2, padding="same", activation="relu"),
        keras.layers.GlobalAveragePooling2D(),
        keras.layers.Dense(10),
    ])


def cases(quick: bool) -> Dict[str, dict]:
    """``{name: {fn, sources, plain}}``: the function, the sources, and the plain gradient to compare with."""
    import keras
    import tensorflow as tf

    keras.utils.set_random_seed(0)
    found = {}

    def entry(model, x, rounded=False):
        weights = list(model.trainable_variables)
        if rounded:
            def fn(x, *ws):
                return model(tf.round(x))

            sources = [x, *weights]
        else:
            def fn(*ws):
                return model(x)

            sources = weights

        def plain():
            with tf.GradientTape() as tape:
                if rounded:
                    tape.watch(x)
                y = fn(*sources)
            return tape.gradient(y, sources)

        return {"fn": fn, "sources": sources, "plain": plain, "variables": len(weights)}

    cnn = _cnn()
    x_cnn = tf.random.normal([16, 32, 32, 3], seed=0)
    found["CNN"] = entry(cnn, x_cnn)
    if not quick:
        resnet = keras.applications.ResNet50(weights=None, classifier_activation=None)
        found["ResNet50"] = entry(resnet, tf.random.normal([2, 224, 224, 3], seed=0))
    found["CNN, input not ok"] = entry(cnn, x_cnn, rounded=True)
    return found


def _timed(run: Callable[[], object]) -> tuple:
    wall, cpu = time.perf_counter(), time.process_time()
    run()
    return time.perf_counter() - wall, time.process_time() - cpu


def _stats(values: List[float]) -> dict:
    q25, median, q75 = np.percentile(values, [25, 50, 75])
    return {"median": float(median), "q25": float(q25), "q75": float(q75)}


def measure_doctor(quick: bool = False, rounds: int = 0, log=print) -> dict:
    """Times ``explain_gradient`` against the plain gradient, interleaved, per model."""
    import gradlab

    rounds = rounds or (3 if quick else 7)
    rng = random.Random(0)
    rows = []
    for name, case in cases(quick).items():
        report = gradlab.explain_gradient(case["fn"], *case["sources"])  # warm-up, untimed
        case["plain"]()
        samples = {"plain": [], "report": []}
        for _ in range(rounds):
            order = ["plain", "report"]
            rng.shuffle(order)
            for which in order:
                run = case["plain"] if which == "plain" else (
                    lambda: gradlab.explain_gradient(case["fn"], *case["sources"]))
                samples[which].append(_timed(run))
        row = {"model": name, "sources": len(case["sources"]), "statuses": sorted(set(report.statuses)),
               "rounds": rounds}
        for clock, k in (("wall", 0), ("cpu", 1)):
            plain = [s[k] for s in samples["plain"]]
            ratio = [r[k] / p[k] for r, p in zip(samples["report"], samples["plain"])]
            row[clock] = {"plain_seconds": _stats(plain), "report_seconds": _stats([s[k] for s in samples["report"]]),
                          "ratio": _stats(ratio)}
        rows.append(row)
        log(f"  {name}: measured ({rounds} rounds)")
    resnet = [r for r in rows if r["model"] == "ResNet50"]
    met = all(r["wall"]["ratio"]["median"] <= TARGET_RATIO for r in resnet) if resnet else None
    return {"rows": rows, "target_ratio": TARGET_RATIO, "met": met}


def report(results: dict, log=print) -> None:
    log(f"  {'model':<20s}{'sources':>8s}  {'statuses':<18s}{'plain gradient':>16s}{'report':>12s}"
        f"{'ratio (wall)':>22s}{'ratio (cpu)':>22s}")
    for row in results["rows"]:
        wall, cpu = row["wall"], row["cpu"]
        ratio = "{median:.2f} [{q25:.2f}-{q75:.2f}]"
        log(f"  {row['model']:<20s}{row['sources']:>8d}  {','.join(row['statuses']):<18s}"
            f"{wall['plain_seconds']['median'] * 1e3:>13.1f} ms{wall['report_seconds']['median'] * 1e3:>9.1f} ms"
            f"{ratio.format(**wall['ratio']):>22s}{ratio.format(**cpu['ratio']):>22s}")
    if results["met"] is not None:
        log(f"  Target: the report <= {TARGET_RATIO:.0f} x the plain gradient on ResNet50 (every source ok): "
            f"{'met' if results['met'] else 'MISSED'}.")


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--quick", action="store_true", help="the CNNs only, 3 rounds")
    parser.add_argument("--rounds", type=int, default=0)
    parser.add_argument("--json", default="", help="also write the results as JSON here ('-': stdout)")
    args = parser.parse_args(argv)
    print(f"explain_gradient against one plain gradient; load average {os.getloadavg()}", file=sys.stderr)
    results = measure_doctor(quick=args.quick, rounds=args.rounds, log=lambda t: print(t, file=sys.stderr))
    report(results, log=lambda t: print(t, file=sys.stderr))
    if args.json == "-":
        print(json.dumps(results, indent=1))
    elif args.json:
        with open(args.json, "w") as f:
            json.dump(results, f, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
