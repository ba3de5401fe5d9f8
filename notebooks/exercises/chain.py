"""Self-checks for notebook 06 (how a gradient modification propagates down the chain).

Both checks run real backward passes through the notebook's model: the notebook passes its own
``backward(modify)`` function (one forward and backward pass; ``modify(h, i)`` may change the
gradient at the output of layer ``i``), which returns ``loss``, per-layer ``norms`` and ``weights``.
"""
from __future__ import annotations

import numpy as np

import gradlab
from exercises._harness import NotYet, running, self_check

__all__ = ["check_exercise_1", "check_exercise_2"]


@self_check
def check_exercise_1(predict_norms, backward) -> str:
    """Compares ``predict_norms(plain_norms, clip_at, max_norm)`` with real backward passes.

    The right answer multiplies the norms of the clip point and every earlier layer by
    ``s = min(1, max_norm / |g_clip_at|)`` and keeps the later layers' norms.
    """
    plain = backward()
    names = list(plain["norms"])
    depth = len(names)
    settings = [(min(4, depth), 1.0), (2, 0.3), (depth, 0.1), (3, 50.0)]
    for clip_at, max_norm in settings:
        truth = backward(lambda h, i: gradlab.clip_gradient_norm(h, max_norm) if i == clip_at else h)["norms"]
        with running(f"predict_norms(plain_norms, {clip_at}, {max_norm})",
                     hint="Return a dict {layer name: norm}."):
            guess = predict_norms(dict(plain["norms"]), clip_at, max_norm)
            guess = {name: float(guess[name]) for name in truth}
        wrong = [n for n in truth if not np.isclose(guess[n], truth[n], rtol=1e-4)]
        if not wrong:
            continue
        later = names[clip_at:]
        if any(n in later for n in wrong):
            raise NotYet(f"(clip after dense_{clip_at}, bound {max_norm}): you changed {wrong[0]}, which is\n"
                         "later than the clip. The backward pass visits it before the clip: its gradient is the plain one.")
        elif max_norm == 50.0:
            raise NotYet("(bound 50): the gradient at the clip point is already below the bound, so the\n"
                         "clip changes nothing. The factor is min(1, max_norm / |g|).")
        elif any(np.isclose(guess[n], max_norm) for n in wrong):
            raise NotYet(f"(clip after dense_{clip_at}, bound {max_norm}): you held {wrong[0]} to the bound.\n"
                         "The clip acts once; earlier layers receive the clipped gradient and transform it as usual.")
        else:
            raise NotYet(f"(clip after dense_{clip_at}, bound {max_norm}): for {wrong[0]} you predict "
                         f"{guess[wrong[0]]:.4f}, the backward pass gives {truth[wrong[0]]:.4f}.\n"
                         "Hint: backpropagation is linear in the gradient it starts from.")
    return (f"Your predictions match {len(settings)} real backward passes: the layers after the\n"
            "clip keep their norms, the clip point and every earlier layer share one factor min(1, bound / |g|).")


@self_check
def check_exercise_2(modify, backward) -> str:
    """Checks that ``backward(modify)`` keeps the forward pass and holds every layer's gradient norm to 0.1."""
    plain = backward()
    names = list(plain["norms"])
    bound = 0.1
    with running("backward(modify)"):
        result = backward(modify)
    if result["loss"] != plain["loss"]:
        raise NotYet("the loss changed, so the forward pass changed. Use an op that is an identity\n"
                     "in the forward pass.")
    too_big = {n: v for n, v in result["norms"].items() if v > bound * (1 + 1e-5)}
    if too_big:
        name = next(iter(too_big))
        raise NotYet(f"{name} still receives a gradient of norm {too_big[name]:.4f} > {bound}.\n"
                     "One clip acts once: which layers need a clip of their own?")
    dead = [n for n, v in result["weights"].items() if v == 0.0]
    if dead or len(result["norms"]) < len(names):
        raise NotYet("some layer gets no gradient at all. Clip the gradient, do not stop it.")
    return ("Every layer now receives a gradient of norm at most 0.1:\n  "
            + ", ".join(f"{n} {v:.4f}" for n, v in result["norms"].items())
            + "\nThe forward pass is unchanged. Clipping at every layer takes one clip per layer.")
