"""Where the time of a gradient modification goes: each rule alone, on the reference activations.

``make bench`` compares whole training steps. When a gradlab op comes out above the 1.03 target,
this profile says why: it times, inside ``tf.function``, only the backward pass through the op
(``tape.gradient(op(h), h, dy)``) on the hidden activation of each reference model, next to the
same backward pass through a plain ``tf.identity`` and through the same rule written by hand with
``tf.custom_gradient``. The difference to ``tf.identity`` is what the rule itself costs; dividing
it by the reference step's time (measured here too) gives the share of the step it must take,
whoever writes it.

Usage (from the repository root)::

    TF_CPP_MIN_LOG_LEVEL=2 TF_ENABLE_ONEDNN_OPTS=0 .venv/bin/python benchmarks/rule_cost.py
    ... --threads 1     # one TensorFlow thread (default), as in run.py --threads 1
"""
from __future__ import annotations

import argparse
import os
import sys
import time
from pathlib import Path

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
os.environ.setdefault("TF_ENABLE_ONEDNN_OPTS", "0")
sys.path.insert(0, str(Path(__file__).resolve().parent))

import numpy as np  # noqa: E402


def _median_ms(fn, repeats: int, number: int) -> float:
    fn()  # trace and warm up
    samples = []
    for _ in range(repeats):
        start = time.process_time()
        for _ in range(number):
            fn()
        samples.append((time.process_time() - start) / number * 1e3)
    return float(np.median(samples))


def _backward_ms(op, h, dy, repeats: int) -> float:
    """Median ms of the backward pass through ``op`` at ``h`` with upstream ``dy``, in tf.function."""
    import tensorflow as tf

    @tf.function
    def backward():
        with tf.GradientTape() as tape:
            tape.watch(h)
            y = op(h)
        return tape.gradient(y, h, output_gradients=dy)

    return _median_ms(backward, repeats, 200)


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--threads", type=int, default=1, help="TensorFlow intra/inter-op threads")
    parser.add_argument("--repeats", type=int, default=15)
    args = parser.parse_args(argv)

    import tensorflow as tf

    tf.config.threading.set_intra_op_parallelism_threads(args.threads)
    tf.config.threading.set_inter_op_parallelism_threads(args.threads)
    import gradlab
    import models
    from catalogue import clip_custom_gradient, clip_norm_custom_gradient, scale_custom_gradient

    rules = {
        "tf.identity (no rule)": (lambda h: tf.identity(h), None),
        "gradlab.scale_gradient": (lambda h: gradlab.scale_gradient(h, 0.5), scale_custom_gradient),
        "gradlab.clip_gradient": (lambda h: gradlab.clip_gradient(h, -1e-3, 1e-3), clip_custom_gradient),
        "gradlab.clip_gradient_norm": (lambda h: gradlab.clip_gradient_norm(h, 1.0), clip_norm_custom_gradient),
        "gradlab.map_gradient (0.5 * dy)": (lambda h: gradlab.map_gradient(h, lambda g: 0.5 * g), scale_custom_gradient),
    }
    print(f"process CPU time, {args.threads} TensorFlow thread(s), median of {args.repeats} blocks")
    for kind in ("mlp", "cnn"):
        model = models.ReferenceModel(kind)
        shape = tuple(model.hidden_shape)
        h = tf.random.stateless_normal(shape, seed=(1, 2))
        dy = tf.random.stateless_normal(shape, seed=(3, 4)) * 1e-2
        print(f"\n{model.describe()}")
        print(f"  activation {shape}: {int(np.prod(shape)) * 4 / 2**20:.2f} MiB of float32")
        base = None
        for name, (op, hand) in rules.items():
            ms = _backward_ms(op, h, dy, args.repeats)
            base = ms if base is None else base
            line = f"  {name:<34} backward {ms:7.3f} ms   rule alone {ms - base:+7.3f} ms"
            if hand is not None:
                line += f"   hand-written tf.custom_gradient {_backward_ms(hand, h, dy, args.repeats):7.3f} ms"
            print(line)
    print("\nCompare 'rule alone' with the reference step's time in make bench's raw-time table "
          "(same clock and threads: run.py --clock cpu --threads 1).")
    return 0


if __name__ == "__main__":
    sys.exit(main())
