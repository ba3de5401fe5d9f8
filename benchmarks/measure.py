"""What each technique costs: one training step, and ``model.fit``, with a gradient modification between two layers.

:func:`measure_steps` times every (model, technique, mode) training step of the reference models
(``models.py``) for the techniques of ``catalogue.py``, as ratios to the baseline ``none`` of the
same model and mode in the same round (``timing.py``); a technique that cannot run in a mode is
reported as ``n/a`` with the reason TensorFlow gives. :func:`measure_fit` does the same for
``model.fit`` of a Keras model with and without a layer of :mod:`gradlab.layers` (steps per second,
as ratios to the layer-less model).
"""
from __future__ import annotations

import time
from typing import Optional, Sequence

import numpy as np

from catalogue import FIT_LAYERS, TECHNIQUE_BY_NAME, TECHNIQUES
from models import MODES, REFERENCE_SIZES, ReferenceModel, build_step, fit_model
from timing import Cell, ratio_rows, run_rounds, runner, short_reason, summarize, warm_up


def measure_steps(models: Sequence[str] = ("mlp", "cnn"), techniques: Optional[Sequence[str]] = None,
                  modes: Sequence[str] = MODES, rounds: int = 15, block_seconds: float = 0.04,
                  clock: str = "wall", seed: int = 0, log=print) -> dict:
    """Times every (model, technique, mode) training step; ratios to ``none`` in the same round."""
    names = list(techniques) if techniques else [t.name for t in TECHNIQUES]
    if "none" not in names:
        names.insert(0, "none")
    cells, references = [], {}
    for kind in models:
        model = ReferenceModel(kind)
        references[kind] = {"description": model.describe(), "sizes": model.sizes,
                            "parameters": model.parameters}
        log(f"  {model.describe()}")
        for name in names:
            technique = TECHNIQUE_BY_NAME[name]
            for mode in modes:
                cell = Cell(kind, name, mode, reset=model.reset)
                try:
                    cell.run = runner(build_step(model, technique, mode))
                except Exception as err:  # noqa: BLE001
                    cell.reason = short_reason(err)
                cells.append(cell)
    start = time.perf_counter()
    for cell in cells:
        if cell.run is not None:
            warm_up(cell, block_seconds)
    log(f"  warm-up (tracing, compiling, sizing blocks) {time.perf_counter() - start:.0f} s; "
        f"{rounds} rounds over {sum(c.run is not None for c in cells)} cells")
    start = time.perf_counter()

    def progress(done, total):
        if done == total or done % 5 == 0:
            log(f"  round {done}/{total} ({time.perf_counter() - start:.0f} s)")

    run_rounds(cells, rounds, seed=seed, progress=progress)
    rows = ratio_rows(cells, lambda c: (c.model, "none", c.mode), clock)
    by_key = {c.key: c for c in cells}
    for row in rows:  # ratios to the hand-written reference, and to what the target compares with
        technique = TECHNIQUE_BY_NAME[row["technique"]]
        row.update(reference=technique.reference, target_against=technique.target_against,
                   gradlab_op=technique.gradlab_op)
        if not row["available"]:
            continue
        cell = by_key[(row["model"], row["technique"], row["mode"])]
        for field, other in (("ratio_to_reference", technique.reference),
                             ("ratio_to_target", technique.target_against)):
            ref = by_key.get((row["model"], other, row["mode"]))
            if other == "none":
                row[field] = {name: row[name]["ratio"] for name in ("wall", "cpu")}
            elif ref is not None and ref.wall:
                row[field] = {name: summarize([t / r for t, r in zip(cell.samples(name), ref.samples(name))])
                              for name in ("wall", "cpu")}
    return {"models": references, "techniques": {n: TECHNIQUE_BY_NAME[n].note for n in names},
            "modes": list(modes), "rounds": rounds, "block_seconds": block_seconds, "clock": clock,
            "rows": rows}


def measure_fit(layers: Sequence[str] = tuple(FIT_LAYERS), modes: Sequence[str] = MODES,
                rounds: int = 8, steps: int = 32, clock: str = "wall", seed: int = 0, log=print) -> dict:
    """``model.fit`` of the reference MLP with a gradlab layer between the hidden layers.

    Each timed call is one epoch of ``steps`` batches (``verbose=0``); steps per second from its
    wall time, round-robin over (layer, mode) with the layer-less model as the baseline.
    """
    import keras

    sizes = REFERENCE_SIZES["mlp"]
    rng = np.random.default_rng(seed)
    x = rng.normal(size=(steps * sizes["batch"], sizes["inputs"])).astype(np.float32)
    y = rng.integers(0, sizes["classes"], size=steps * sizes["batch"]).astype(np.int32)
    cells = []
    for name in layers:
        for mode in modes:
            keras.utils.set_random_seed(seed)
            model = fit_model(FIT_LAYERS[name], mode, sizes)
            weights = model.get_weights()

            def run(k, model=model):
                for _ in range(k):
                    model.fit(x, y, batch_size=sizes["batch"], epochs=1, shuffle=False, verbose=0)

            cell = Cell("fit", name, mode, run=run,
                        reset=lambda model=model, weights=weights: model.set_weights(weights))
            cell.steps_per_block = 1
            cells.append(cell)
    start = time.perf_counter()
    for cell in cells:
        try:
            cell.reset()
            cell.run(1)
        except Exception as err:  # noqa: BLE001
            cell.run, cell.reason = None, short_reason(err)
    log(f"  fit warm-up {time.perf_counter() - start:.0f} s; {rounds} rounds over {len(cells)} cells")
    run_rounds(cells, rounds, seed=seed)
    for cell in cells:  # seconds per fit call -> seconds per training step
        cell.wall = [t / steps for t in cell.wall]
        cell.cpu = [t / steps for t in cell.cpu]
    rows = ratio_rows(cells, lambda c: ("fit", "none", c.mode), clock)
    for row in rows:
        if row["available"]:
            row["steps_per_second"] = 1.0 / row["wall"]["seconds_per_step"]["median"]  # wall clock
    description = (f"keras.Sequential MLP {sizes['inputs']} -> Dense {sizes['hidden']} relu -> [layer] -> "
                   f"Dense {sizes['hidden']} relu -> Dense {sizes['classes']}, SGD; model.fit of "
                   f"{steps} batches of {sizes['batch']} per call")
    log(f"  {description}")
    return {"description": description, "steps_per_fit": steps, "rounds": rounds, "clock": clock,
            "rows": rows}
