"""Domain-adversarial training (Ganin & Lempitsky, 2015) on two moons, for notebook 12.

The source domain is scikit-learn's two moons with labels; the target domain is new moons rotated
by 35 degrees about their centre, without labels (the toy problem of the paper's journal version,
Ganin et al., 2016). Everything runs in float64, which keeps the runs far from float32's rounding
noise; the trained accuracies still differ in their last digits from one CPU to another (each CPU
sums in its own order, and 150 steps amplify the last bits), so notebook 12 asserts bounds on them
and does not compare their printed digits. One encoder feeds a label head (trained on the source only) and, behind
``gradlab.layers.GradientReversal``, a domain head (trained on both domains). The reversal factor
follows the paper's ramp ``2 / (1 + exp(-10 p)) - 1``, ``p`` the fraction of training done.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Sequence

import keras
import numpy as np
import tensorflow as tf
from matplotlib.figure import Figure
from sklearn.datasets import make_moons

import gradlab

DTYPE = "float64"          # the whole model and data (module docstring)
#: The paper's own figures (Ganin & Lempitsky, 2015, Table 1): target-domain accuracy on
#: MNIST -> MNIST-M.
PAPER_MNIST_M = {"source only": 0.5225, "adversarial": 0.7666}
DOMAIN_HEAD = [32, 1]     # the domain classifier: one hidden layer of 32 ReLUs


def reversal_factor(progress: float, gamma: float = 10.0) -> float:
    """The paper's ramp of the reversal factor: ``2 / (1 + exp(-gamma * p)) - 1``, 0 at p = 0, ~1 at p = 1."""
    if not 0.0 <= progress <= 1.0:
        raise ValueError(f"progress must be in [0, 1]; got {progress!r}")
    return float(2.0 / (1.0 + np.exp(-gamma * progress)) - 1.0)


def rotated_moons(seed: int, n: int = 200, angle: float = 35.0, noise: float = 0.1):
    """``(x_source, y_source, x_target, y_target)``: two moons, and fresh moons rotated by ``angle`` degrees."""
    x_s, y_s = make_moons(n, noise=noise, random_state=seed)
    x_t, y_t = make_moons(n, noise=noise, random_state=seed + 1000)
    a = np.radians(angle)
    rotation = np.array([[np.cos(a), -np.sin(a)], [np.sin(a), np.cos(a)]])
    centre = np.array([0.5, 0.25])
    x_t = (x_t - centre) @ rotation.T + centre
    return [np.asarray(t, DTYPE) for t in (x_s, y_s, x_t, y_t)]


@dataclass
class Run:
    """One training run: accuracies and the trained networks."""
    seed: int
    adversarial: bool
    n: int                      # points per domain (rotated_moons(seed, n) is the data)
    source_accuracy: float
    target_accuracy: float
    domain_accuracy: float      # the domain head on both domains' features (0.5 is chance)
    probe_accuracy: float       # a fresh classifier (5 nearest neighbours) on the frozen features, held out
    encoder: keras.Model
    label_head: keras.Model

    def predict(self, x: np.ndarray) -> np.ndarray:
        """The label head's class (0 or 1) for points ``x`` of shape (n, 2)."""
        return (self.label_head(self.encoder(x)).numpy()[:, 0] > 0).astype(int)


def _accuracy(logits: tf.Tensor, labels: np.ndarray) -> float:
    return float(np.mean((logits.numpy()[:, 0] > 0) == (labels > 0.5)))


def _mlp(widths: Sequence[int], inputs: int, name: str, last: str | None = None) -> keras.Model:
    """Dense layers of the given widths, ReLU between them, ``last`` after the final one."""
    activations = ["relu"] * (len(widths) - 1) + [last]
    layers = [keras.layers.Dense(w, activation=a, dtype=DTYPE) for w, a in zip(widths, activations)]
    return keras.Sequential([keras.Input((inputs,), dtype=DTYPE), *layers], name=name)


def train(seed: int, adversarial: bool, steps: int = 150, n: int = 200, learning_rate: float = 2e-2) -> Run:
    """Trains encoder + label head on the source (and the domain head, reversed, if ``adversarial``)."""
    if steps < 1:
        raise ValueError(f"steps must be a positive integer; got {steps!r}")
    keras.utils.set_random_seed(seed)
    x_s, y_s, x_t, y_t = rotated_moons(seed, n)
    encoder = _mlp([32, 32], 2, "encoder", last="relu")
    label_head, domain_head = _mlp([1], 32, "label"), _mlp(DOMAIN_HEAD, 32, "domain")
    reversal = gradlab.layers.GradientReversal(0.0, dtype=DTYPE)
    optimizer = keras.optimizers.Adam(learning_rate)
    bce = keras.losses.BinaryCrossentropy(from_logits=True)
    domains = np.r_[np.zeros(n), np.ones(n)].astype(DTYPE)[:, None]
    x_both = np.concatenate([x_s, x_t])
    reversal(encoder(x_both[:1]))                                  # build: the factor's weight exists
    variables = encoder.trainable_variables + label_head.trainable_variables + domain_head.trainable_variables
    optimizer.build(variables)                                     # its slots exist before tracing

    @tf.function
    def step():
        with tf.GradientTape() as tape:
            features = encoder(x_both)
            loss = bce(y_s[:, None], label_head(features[:n]))
            # Source-only training still fits a domain head, as an observer: it reads the features
            # through stop_gradient, so it measures how well they reveal the domain without
            # changing them. The adversarial run reads them through the reversal layer instead.
            seen = reversal(features) if adversarial else tf.stop_gradient(features)
            loss += bce(domains, domain_head(seen))
        optimizer.apply_gradients(zip(tape.gradient(loss, variables), variables))

    for i in range(steps):
        reversal.factor = reversal_factor(i / steps)
        step()
    features = encoder(x_both)
    probe = probe_domain(features.numpy(), domains[:, 0], seed)
    return Run(seed, adversarial, n,
               source_accuracy=_accuracy(label_head(features[:n]), y_s),
               target_accuracy=_accuracy(label_head(features[n:]), y_t),
               domain_accuracy=_accuracy(domain_head(features), domains[:, 0]),
               probe_accuracy=probe,
               encoder=encoder, label_head=label_head)


def probe_domain(features: np.ndarray, domains: np.ndarray, seed: int, k: int = 5) -> float:
    """How well a *fresh* classifier reads the domain from frozen features.

    A k-nearest-neighbour vote (``k`` odd, so no ties) learns from a random half of the points and
    is scored on the other half. Unlike the adversary's own accuracy, this measures what the
    features reveal to a classifier the encoder was never trained against. NumPy only, float64.
    """
    if k < 1 or k % 2 == 0:
        raise ValueError(f"k must be a positive odd integer; got {k!r}")
    features = np.asarray(features, np.float64)
    order = np.random.default_rng(seed + 100).permutation(len(features))
    fit, held_out = order[: len(order) // 2], order[len(order) // 2:]
    distances = ((features[held_out, None, :] - features[None, fit, :]) ** 2).sum(axis=-1)
    nearest = np.argsort(distances, axis=1, kind="stable")[:, :k]
    votes = domains[fit][nearest].mean(axis=1)
    return float(np.mean((votes > 0.5) == (domains[held_out] > 0.5)))


def compare(seeds: Sequence[int] = (0, 1, 2), **options) -> dict[int, tuple[Run, Run]]:
    """``{seed: (source-only run, adversarial run)}``: both trained from the same initial weights."""
    return {seed: (train(seed, False, **options), train(seed, True, **options)) for seed in seeds}


def print_table(runs: dict[int, tuple[Run, Run]]) -> None:
    """Per seed and on average: target accuracy, the domain heads' accuracy and a fresh probe's."""
    print(f"{'':6s} {'target accuracy':^23s}  {'domain head accuracy':^23s}  {'fresh domain probe':^23s}")
    print(f"{'seed':>6s}" + f" {'source only':>11s} {'adversarial':>11s} " * 3)
    rows = [(str(s), a.target_accuracy, b.target_accuracy, a.domain_accuracy, b.domain_accuracy,
             a.probe_accuracy, b.probe_accuracy) for s, (a, b) in runs.items()]
    rows.append(("mean", *np.mean([r[1:] for r in rows], axis=0)))
    for name, *values in rows:
        print(f"{name:>6s}" + "".join(f" {v:11.3f}" + (" " if i % 2 else "") for i, v in enumerate(values)))
    paper = PAPER_MNIST_M
    print(f"The paper (Table 1, MNIST -> MNIST-M digits, not comparable in size): target accuracy "
          f"{paper['source only']:.4f} source only, {paper['adversarial']:.4f} adversarial")


def plot_boundaries(pair: tuple[Run, Run]) -> Figure:
    """The label head's decision regions, source-only beside adversarial, with both domains' points.

    Returns a Figure not kept open by pyplot: as a cell's value Jupyter shows it once.
    """
    x_s, y_s, x_t, y_t = rotated_moons(pair[0].seed, pair[0].n)
    grid_x, grid_y = np.meshgrid(np.linspace(-2.0, 3.0, 151), np.linspace(-1.8, 2.3, 124))
    grid = np.c_[grid_x.ravel(), grid_y.ravel()].astype(DTYPE)
    fig = Figure(figsize=(9.6, 3.8), dpi=80, layout="constrained")
    axes = fig.subplots(1, 2, sharey=True)
    for ax, run in zip(axes, pair):
        ax.contourf(grid_x, grid_y, run.predict(grid).reshape(grid_x.shape), levels=[-0.5, 0.5, 1.5],
                    colors=["#d6e4f0", "#f6dcc8"])
        for cls, colour in ((0, "C0"), (1, "C1")):
            ax.scatter(*x_s[y_s == cls].T, s=9, color=colour, alpha=0.6, label=f"source, class {cls}")
            ax.scatter(*x_t[y_t == cls].T, s=14, color=colour, marker="x", label=f"target, class {cls}")
        kind = "adversarial (gradient reversal)" if run.adversarial else "source only"
        ax.set(title=f"{kind}: target accuracy {run.target_accuracy:.3f}", xlabel="$x_1$")
    axes[0].set_ylabel("$x_2$")
    fig.legend(*axes[0].get_legend_handles_labels(), loc="outside lower center", ncols=4, frameon=False, fontsize=9)
    return fig
