"""Timing and statistics of the benchmark: cells, interleaved rounds, ratios to a baseline.

Every (model, technique, mode) :class:`Cell` is warmed up (tracing and compilation excluded,
:func:`warm_up`), then timed in blocks of a few steps, round-robin over all cells in a freshly
shuffled order each round (:func:`run_rounds`). Each cell's time per step is divided by its
baseline's *in the same round*, so slow drifts of a shared machine cancel; :func:`ratio_rows`
reports the median and the interquartile range of these per-round ratios with the raw times
(:func:`summarize`). Every block is timed with two clocks: the wall clock (what a user waits for;
the default) and the process CPU time (``time.process_time``, all threads), which does not count
the time other programs hold the CPU and so is steadier on a shared machine.
"""
from __future__ import annotations

import dataclasses
import gc
import random
import re
import time
from typing import Callable, Dict, List, Optional, Sequence

import numpy as np

@dataclasses.dataclass
class Cell:
    """One (model, technique, mode) with its step function and its timings (seconds per step)."""

    model: str
    technique: str
    mode: str
    run: Optional[Callable[[int], None]] = None  # runs k steps and waits for the result
    reset: Optional[Callable[[], None]] = None
    reason: str = ""  # why it is n/a
    steps_per_block: int = 1
    warmup_seconds: float = 0.0
    wall: List[float] = dataclasses.field(default_factory=list)  # seconds per step, one per round
    cpu: List[float] = dataclasses.field(default_factory=list)   # process CPU seconds per step

    @property
    def key(self) -> tuple:
        return (self.model, self.technique, self.mode)

    def samples(self, clock: str) -> List[float]:
        return self.wall if clock == "wall" else self.cpu


def runner(step: Callable[[], object]) -> Callable[[int], None]:
    """``run(k)``: ``k`` calls of ``step``, then waits for the last loss (on the host)."""

    def run(k: int) -> None:
        loss = None
        for _ in range(k):
            loss = step()
        float(loss)  # the value is on the host: every step has finished

    return run


def _time_block(cell: Cell) -> tuple:
    """(wall seconds, process CPU seconds) per step over one block."""
    cell.reset()
    start, start_cpu = time.perf_counter(), time.process_time()
    cell.run(cell.steps_per_block)
    wall, cpu = time.perf_counter() - start, time.process_time() - start_cpu
    return wall / cell.steps_per_block, cpu / cell.steps_per_block


def warm_up(cell: Cell, block_seconds: float, warmup_steps: int = 3) -> None:
    """Traces/compiles and runs a few steps (not timed), then sizes the timed block."""
    start = time.perf_counter()
    try:
        cell.reset()
        cell.run(warmup_steps)
    except Exception as err:  # noqa: BLE001 - the technique cannot run in this mode
        cell.run, cell.reason = None, short_reason(err)
        return
    cell.warmup_seconds = time.perf_counter() - start
    probe = min(_time_block(cell)[0] for _ in range(2))
    cell.steps_per_block = max(1, int(round(block_seconds / max(probe, 1e-6))))


def run_rounds(cells: Sequence[Cell], rounds: int, seed: int = 0,
               group_of: Callable[[Cell], tuple] = lambda c: (c.model, c.mode), progress=None) -> None:
    """Round-robin over the runnable cells, group by group, in a fresh random order each round.

    A group holds the cells compared with one baseline (one model in one mode), so a technique
    and its baseline are timed within a second of each other and share the machine's load.
    """
    runnable = [c for c in cells if c.run is not None]
    groups: Dict[tuple, List[Cell]] = {}
    for cell in runnable:
        groups.setdefault(group_of(cell), []).append(cell)
    order = random.Random(seed)
    keys = list(groups)
    gc_was_enabled = gc.isenabled()
    try:
        for r in range(rounds):
            order.shuffle(keys)
            for key in keys:
                members = groups[key]
                order.shuffle(members)
                gc.collect()
                gc.disable()  # no collection pause inside a timed block
                for cell in members:
                    wall, cpu = _time_block(cell)
                    cell.wall.append(wall)
                    cell.cpu.append(cpu)
                if gc_was_enabled:
                    gc.enable()
            if progress:
                progress(r + 1, rounds)
    finally:
        if gc_was_enabled:
            gc.enable()


def summarize(values: Sequence[float]) -> Dict[str, float]:
    """Median, quartiles, 10th and 90th percentiles and count of ``values``."""
    a = np.asarray(values, dtype=float)
    return {"median": float(np.median(a)), "q25": float(np.percentile(a, 25)),
            "q75": float(np.percentile(a, 75)), "p10": float(np.percentile(a, 10)),
            "p90": float(np.percentile(a, 90)), "n": int(a.size)}


def ratio_rows(cells: Sequence[Cell], baseline_of: Callable[[Cell], tuple], clock: str = "wall") -> List[dict]:
    """Per cell and clock: time per step and the per-round ratio to its baseline cell, summarized.

    ``row["ratio"]`` and ``row["seconds_per_step"]`` are those of ``clock`` (``"wall"`` or
    ``"cpu"``); ``row["wall"]`` and ``row["cpu"]`` hold both, with the raw per-round samples.
    """
    by_key = {c.key: c for c in cells}
    rows = []
    for cell in cells:
        row = {"model": cell.model, "technique": cell.technique, "mode": cell.mode}
        if cell.run is None and not cell.wall:
            row.update(available=False, reason=cell.reason)
            rows.append(row)
            continue
        base = by_key[baseline_of(cell)]
        row.update(available=True, steps_per_block=cell.steps_per_block,
                   warmup_seconds=round(cell.warmup_seconds, 3))
        for name in ("wall", "cpu"):
            mine, theirs = cell.samples(name), base.samples(name)
            row[name] = {"seconds_per_step": summarize(mine),
                         "ratio": summarize([t / b for t, b in zip(mine, theirs)]),
                         "samples": [round(t, 7) for t in mine]}
        row["ratio"] = row[clock]["ratio"]
        row["seconds_per_step"] = row[clock]["seconds_per_step"]
        rows.append(row)
    return rows


def short_reason(err: BaseException) -> str:
    """A one-line, path-free reason why a technique cannot run in a mode."""
    text = str(err)
    match = re.search(r"No registered '(\w+)' OpKernel for (\w+) devices", text)
    if match:
        return f"XLA cannot compile a Python function (no {match.group(2)} kernel for {match.group(1)})"
    first = text.strip().splitlines()[0] if text.strip() else ""
    first = re.sub(r"(/[\w.\-]+)+", "<path>", first)
    if len(first) > 110:
        first = first[:107] + "..."
    return f"{type(err).__name__}: {first}"
