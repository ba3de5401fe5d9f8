"""What each technique costs: one training step with a gradient modification between two layers.

The reference models (raw ``tf.Variable``s, so that nothing but the technique differs between two
runs):

* **mlp**: ``x -> Dense(hidden, relu) -> [technique] -> Dense(hidden, relu) -> Dense(classes)``;
* **cnn**: ``x -> Conv3x3(c1, relu) -> [technique] -> Conv3x3(c2, stride 2, relu) -> global
  average pool -> Dense(classes)``;

and one training step = forward pass, softmax cross-entropy, gradients, a plain SGD update. The
technique modifies the hidden activation ``h`` after the first layer (or, for optimizer-level
clipping, the gradients before the update). Each step is built three ways: eagerly, as a
``tf.function``, and as a ``tf.function(jit_compile=True)`` (XLA). A technique that cannot run in a
mode is reported as ``n/a`` with the reason TensorFlow gives.

Measurement (:func:`measure_steps`): every (model, technique, mode) cell is warmed up (tracing and
compilation excluded), then timed in blocks of a few steps, round-robin over all cells in a freshly
shuffled order each round. Each cell's time per step is divided by the baseline's (technique
``none``, same model and mode) *in the same round*, so slow drifts of a shared machine cancel; the
median and the interquartile range of these per-round ratios are reported with the raw times.
Every block is timed with two clocks: the wall clock (what a user waits for; the default) and the
process CPU time (``time.process_time``, all threads), which does not count the time other
programs hold the CPU and so is steadier on a shared machine.

:func:`measure_fit` does the same for ``model.fit`` of a Keras model with and without a layer of
:mod:`gradlab.layers` (steps per second, as ratios to the layer-less model).
"""
from __future__ import annotations

import dataclasses
import gc
import math
import os
import random
import re
import time
from typing import Callable, Dict, List, Optional, Sequence

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
os.environ.setdefault("TF_ENABLE_ONEDNN_OPTS", "0")

import numpy as np  # noqa: E402
import tensorflow as tf  # noqa: E402

import gradlab  # noqa: E402

MODES = ("eager", "function", "xla")
MODE_LABELS = {"eager": "eager", "function": "tf.function", "xla": "XLA (jit_compile)"}

#: Reference sizes: a tf.function step takes several milliseconds on a 2-core CPU, so a few tens
#: of microseconds of overhead would show as a ratio of about 1.01.
REFERENCE_SIZES = {
    "mlp": dict(batch=128, inputs=256, hidden=512, classes=10),
    "cnn": dict(batch=16, size=32, channels=3, c1=16, c2=32, classes=10),
}
LEARNING_RATE = 0.01
SCALE = 0.5  # the rule of the scaling techniques: dL/dh = 0.5 * dL/dh'
#: The same factor as a variable: gradlab reads (and checks) it when the gradient is computed.
FACTOR = tf.Variable(SCALE, trainable=False, name="benchmark_factor")


# --------------------------------------------------------------------------------------------
# The techniques
# --------------------------------------------------------------------------------------------


@dataclasses.dataclass(frozen=True)
class Technique:
    """One way to modify the gradient between the two layers.

    Attributes:
      name: the row label.
      apply: ``apply(h) -> h'`` inserted after the first layer.
      gradients: ``"tape"`` (``tf.GradientTape``) or ``"tf.gradients"`` (needed by override maps).
      clip_global_norm: clip the variables' gradients by their global norm before the update
        (optimizer-level clipping) instead of modifying ``h``.
      reference: the same rule written by hand in plain TensorFlow (for a gradlab op): the cost of
        the rule itself, against which gradlab's own overhead shows.
      target_against: what the tf.function target compares a gradlab op with: the baseline
        ``"none"`` for identities, the hand-written reference for ops that change the forward
        value too (their forward op costs the same whoever writes it).
      gradlab_op: an op of gradlab.ops, subject to the tf.function target.
      note: what it computes, for the README and the JSON.
    """

    name: str
    apply: Callable[[tf.Tensor], tf.Tensor]
    gradients: str = "tape"
    clip_global_norm: bool = False
    reference: str = "none"
    target_against: str = "none"
    gradlab_op: bool = False
    note: str = ""


def _scale_custom_gradient(h):
    @tf.custom_gradient
    def identity(t):
        return tf.identity(t), lambda dy: dy * SCALE

    return identity(h)


def _clip_custom_gradient(h):
    @tf.custom_gradient
    def identity(t):
        return tf.identity(t), lambda dy: tf.clip_by_value(dy, -1e-3, 1e-3)

    return identity(h)


def _clip_norm_custom_gradient(h):
    @tf.custom_gradient
    def identity(t):
        return tf.identity(t), lambda dy: tf.clip_by_norm(dy, 1e-2)

    return identity(h)


def _step_custom_gradient(h, width=1.0):
    """The surrogate step written by hand with tf.custom_gradient (what gradlab.surrogate_step does)."""

    @tf.custom_gradient
    def step(t):
        def grad(dy):
            return dy * tf.nn.relu(1.0 - tf.abs(t) / width)

        return tf.cast(t > 0, t.dtype), grad

    return step(h)


def _override_identity(h):
    with gradlab.gradient_override({"Identity": _half_gradient}):
        return tf.identity(h)


def _half_gradient(op, grad):
    return grad * SCALE


def _numpy_identity(h):
    """Forward through NumPy (a Python round trip), gradient 0.5 * dy in TensorFlow."""

    @tf.custom_gradient
    def identity(t):
        y = tf.numpy_function(_np_identity, [t], t.dtype, stateful=False)
        y.set_shape(t.shape)
        return y, lambda dy: dy * SCALE

    return identity(h)


def _np_identity(a):
    return np.array(a)  # a copy: NumPy cannot hand TensorFlow's buffer back as a new tensor


def _py_function_identity(h):
    """Forward through tf.py_function (eager tensors in Python), gradient 0.5 * dy."""

    @tf.custom_gradient
    def identity(t):
        y = tf.py_function(tf.identity, [t], t.dtype)
        y.set_shape(t.shape)
        return y, lambda dy: dy * SCALE

    return identity(h)


TECHNIQUES: List[Technique] = [
    Technique("none", lambda h: h, note="baseline: no modification"),
    Technique("stop_gradient trick", lambda h: SCALE * h + tf.stop_gradient((1 - SCALE) * h),
              note="0.5*h + stop_gradient(0.5*h): value h, gradient 0.5*dy"),
    Technique("tf.custom_gradient", _scale_custom_gradient,
              note="identity forward, grad = 0.5*dy (tf.custom_gradient by hand)"),
    Technique("gradlab.map_gradient", lambda h: gradlab.map_gradient(h, lambda dy: dy * SCALE),
              reference="tf.custom_gradient", gradlab_op=True,
              note="map_gradient(h, lambda dy: 0.5*dy)"),
    Technique("gradlab.scale_gradient", lambda h: gradlab.scale_gradient(h, SCALE),
              reference="tf.custom_gradient", gradlab_op=True, note="scale_gradient(h, 0.5)"),
    Technique("gradlab.scale_gradient (Variable)", lambda h: gradlab.scale_gradient(h, FACTOR),
              reference="gradlab.scale_gradient", gradlab_op=True,
              note="scale_gradient(h, tf.Variable(0.5)): the factor is read when the gradient is computed"),
    Technique("gradlab.reverse_gradient", lambda h: gradlab.reverse_gradient(h, SCALE),
              reference="tf.custom_gradient", gradlab_op=True, note="reverse_gradient(h, 0.5)"),
    Technique("custom_gradient clip_by_value", _clip_custom_gradient,
              note="identity forward, grad = clip_by_value(dy, -1e-3, 1e-3) by hand"),
    Technique("gradlab.clip_gradient", lambda h: gradlab.clip_gradient(h, -1e-3, 1e-3),
              reference="custom_gradient clip_by_value", gradlab_op=True,
              note="clip_gradient(h, -1e-3, 1e-3)"),
    Technique("custom_gradient clip_by_norm", _clip_norm_custom_gradient,
              note="identity forward, grad = clip_by_norm(dy, 0.01) by hand"),
    Technique("gradlab.clip_gradient_norm", lambda h: gradlab.clip_gradient_norm(h, 1e-2),
              reference="custom_gradient clip_by_norm", gradlab_op=True,
              note="clip_gradient_norm(h, 0.01)"),
    Technique("stop_gradient STE (round)", lambda h: h + tf.stop_gradient(tf.round(h) - h),
              note="h + stop_gradient(round(h) - h): rounds the forward value"),
    Technique("gradlab.straight_through", lambda h: gradlab.straight_through(tf.round(h), h),
              reference="stop_gradient STE (round)", target_against="stop_gradient STE (round)",
              gradlab_op=True,
              note="straight_through(round(h), h): rounds the forward value"),
    Technique("custom_gradient step", _step_custom_gradient,
              note="hand-written surrogate step: forward h > 0, grad dy*max(0, 1-|h|)"),
    Technique("gradlab.surrogate_step", lambda h: gradlab.surrogate_step(h, 1.0),
              reference="custom_gradient step", target_against="custom_gradient step",
              gradlab_op=True,
              note="surrogate_step(h, 1.0): forward h > 0 (a spiking activation)"),
    Technique("gradlab.gradient_override", _override_identity, gradients="tf.gradients",
              note="tf.identity under gradient_override({'Identity': 0.5*grad}); tf.gradients"),
    Technique("tf.numpy_function", _numpy_identity,
              note="identity forward through NumPy, grad 0.5*dy (tf.custom_gradient)"),
    Technique("tf.py_function", _py_function_identity,
              note="identity forward through tf.py_function, grad 0.5*dy (tf.custom_gradient)"),
    Technique("optimizer clip_by_global_norm", lambda h: h, clip_global_norm=True,
              note="tf.clip_by_global_norm(grads, 1.0) before the SGD update"),
]
TECHNIQUE_BY_NAME = {t.name: t for t in TECHNIQUES}
QUICK_TECHNIQUES = ("none", "stop_gradient trick", "tf.custom_gradient", "gradlab.scale_gradient",
                    "gradlab.clip_gradient_norm", "gradlab.straight_through",
                    "stop_gradient STE (round)", "gradlab.gradient_override", "tf.numpy_function",
                    "optimizer clip_by_global_norm")


# --------------------------------------------------------------------------------------------
# The reference models
# --------------------------------------------------------------------------------------------


class ReferenceModel:
    """Variables, one fixed batch of data, and ``loss(technique)`` for the MLP or the small CNN."""

    def __init__(self, kind: str, seed: int = 0, **sizes):
        if kind not in REFERENCE_SIZES:
            raise ValueError(f"kind must be one of {sorted(REFERENCE_SIZES)}; got {kind!r}")
        self.kind = kind
        self.sizes = {**REFERENCE_SIZES[kind], **sizes}
        s = self.sizes
        rng = np.random.default_rng(seed)

        def glorot(*shape):
            fan_in, fan_out = np.prod(shape[:-1]), shape[-1]
            limit = math.sqrt(6.0 / (fan_in + fan_out))
            return rng.uniform(-limit, limit, size=shape).astype(np.float32)

        if kind == "mlp":
            shapes = [(s["inputs"], s["hidden"]), (s["hidden"],), (s["hidden"], s["hidden"]),
                      (s["hidden"],), (s["hidden"], s["classes"]), (s["classes"],)]
            x = rng.normal(size=(s["batch"], s["inputs"])).astype(np.float32)
        else:
            shapes = [(3, 3, s["channels"], s["c1"]), (s["c1"],), (3, 3, s["c1"], s["c2"]),
                      (s["c2"],), (s["c2"], s["classes"]), (s["classes"],)]
            x = rng.normal(size=(s["batch"], s["size"], s["size"], s["channels"])).astype(np.float32)
        self.initial = [glorot(*shape) if len(shape) > 1 else np.zeros(shape, np.float32)
                        for shape in shapes]
        self.variables = [tf.Variable(value) for value in self.initial]
        self.x = tf.constant(x)
        self.y = tf.constant(rng.integers(0, s["classes"], size=s["batch"]), tf.int32)

    @property
    def parameters(self) -> int:
        return int(sum(np.prod(v.shape) for v in self.variables))

    def describe(self) -> str:
        s = self.sizes
        if self.kind == "mlp":
            shape = (f"MLP batch {s['batch']}: {s['inputs']} -> Dense {s['hidden']} relu -> [technique] "
                     f"-> Dense {s['hidden']} relu -> Dense {s['classes']}")
        else:
            shape = (f"CNN batch {s['batch']} of {s['size']}x{s['size']}x{s['channels']}: Conv3x3 {s['c1']} "
                     f"relu -> [technique] -> Conv3x3/2 {s['c2']} relu -> avg pool -> Dense {s['classes']}")
        return f"{shape}; {self.parameters:,} parameters; hidden activation {self.hidden_shape}"

    @property
    def hidden_shape(self) -> tuple:
        s = self.sizes
        if self.kind == "mlp":
            return (s["batch"], s["hidden"])
        return (s["batch"], s["size"], s["size"], s["c1"])

    def reset(self) -> None:
        """Puts the initial values back (so that no technique drifts into NaNs over many steps)."""
        for variable, value in zip(self.variables, self.initial):
            variable.assign(value)

    def loss(self, technique: Technique) -> tf.Tensor:
        w1, b1, w2, b2, w3, b3 = self.variables
        if self.kind == "mlp":
            h = tf.nn.relu(tf.matmul(self.x, w1) + b1)
            h = technique.apply(h)
            h = tf.nn.relu(tf.matmul(h, w2) + b2)
        else:
            h = tf.nn.relu(tf.nn.conv2d(self.x, w1, 1, "SAME") + b1)
            h = technique.apply(h)
            h = tf.nn.relu(tf.nn.conv2d(h, w2, 2, "SAME") + b2)
            h = tf.reduce_mean(h, axis=[1, 2])
        logits = tf.matmul(h, w3) + b3
        return tf.reduce_mean(tf.nn.sparse_softmax_cross_entropy_with_logits(self.y, logits))

    def step_fn(self, technique: Technique) -> Callable[[], tf.Tensor]:
        """One training step (loss, gradients, SGD update) as a Python function."""
        variables = self.variables

        def step():
            if technique.gradients == "tf.gradients":
                loss = self.loss(technique)
                grads = tf.gradients(loss, variables)
            else:
                with tf.GradientTape() as tape:
                    loss = self.loss(technique)
                grads = tape.gradient(loss, variables)
            if technique.clip_global_norm:
                grads, _ = tf.clip_by_global_norm(grads, 1.0)
            for variable, grad in zip(variables, grads):
                variable.assign_sub(LEARNING_RATE * grad)
            return loss

        return step


def build_step(model: ReferenceModel, technique: Technique, mode: str) -> Callable[[], tf.Tensor]:
    """The training step of ``technique`` in ``mode`` (eager, function or xla); not yet called."""
    step = model.step_fn(technique)
    if mode == "eager":
        return step
    return tf.function(step, jit_compile=(mode == "xla"), autograph=False)


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


# --------------------------------------------------------------------------------------------
# Timing
# --------------------------------------------------------------------------------------------


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


def _runner(step: Callable[[], tf.Tensor]) -> Callable[[int], None]:
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
                    cell.run = _runner(build_step(model, technique, mode))
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


# --------------------------------------------------------------------------------------------
# Keras layers in model.fit
# --------------------------------------------------------------------------------------------

FIT_LAYERS = {
    "none": None,
    "gradlab.layers.ScaleGradient": lambda: gradlab.layers.ScaleGradient(SCALE),
    "gradlab.layers.ClipGradientNorm": lambda: gradlab.layers.ClipGradientNorm(1e-2),
}


def _fit_model(layer_factory, mode: str, sizes: dict):
    import keras

    layers = [keras.Input((sizes["inputs"],)), keras.layers.Dense(sizes["hidden"], activation="relu")]
    if layer_factory is not None:
        layers.append(layer_factory())
    layers += [keras.layers.Dense(sizes["hidden"], activation="relu"), keras.layers.Dense(sizes["classes"])]
    model = keras.Sequential(layers)
    model.compile(optimizer=keras.optimizers.SGD(LEARNING_RATE),
                  loss=keras.losses.SparseCategoricalCrossentropy(from_logits=True),
                  run_eagerly=(mode == "eager"), jit_compile=(mode == "xla"))
    return model


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
            model = _fit_model(FIT_LAYERS[name], mode, sizes)
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
