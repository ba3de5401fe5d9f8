"""Self-checks for notebook 06 (how a gradient modification propagates down the chain).

Both checks run real backward passes through the notebook's model: the notebook passes its own
``backward(modify)`` function (one forward and backward pass; ``modify(h, i)`` may change the
gradient at the output of layer ``i``), which returns ``loss``, per-layer ``norms`` and ``weights``.
"""
from __future__ import annotations

import numpy as np

import gradlab
from exercises._harness import NotYet, running, self_check
from exercises._i18n import _

__all__ = ["check_exercise_1", "check_exercise_2"]


def _linear_prediction(plain_norms: dict, clip_at: int, max_norm: float) -> dict:
    """What a clip after ``dense_{clip_at}`` does to the norms (the reference for made-up norms)."""
    names = list(plain_norms)
    s = min(1.0, max_norm / plain_norms[names[clip_at - 1]])
    return {n: v * s if i <= clip_at else v for i, (n, v) in enumerate(plain_norms.items(), start=1)}


def _predict(predict_norms, norms: dict, clip_at: int, max_norm: float, names) -> dict:
    with running(f"predict_norms(plain_norms, {clip_at}, {max_norm:g})", hint=_("Return a dict {layer name: norm}.")):
        guess = predict_norms(dict(norms), clip_at, max_norm)
        return {name: float(guess[name]) for name in names}


def _held_out_settings(seed: int, plain_norms: dict) -> tuple[list, tuple, int, float]:
    """The held-out cases (the instructor edition's ``seed``): four (clip_at, max_norm) settings, the first one
    a clip that acts after the second layer or later; the made-up norms' factors, clip point and bound fraction."""
    rng = np.random.default_rng(seed)
    norms = list(plain_norms.values())
    depth = len(norms)
    settings = []
    for setting in range(4):
        clip_at = int(rng.integers(min(2, depth), depth + 1)) if setting == 0 else int(rng.integers(1, depth + 1))
        ratio = rng.uniform(0.1, 0.6) if setting == 0 else 10.0 ** rng.uniform(-1.0, 0.5)
        settings.append((clip_at, float(f"{ratio * norms[clip_at - 1]:.3g}")))
    factors = tuple(np.round(rng.uniform(0.25, 4.0, 6), 2).tolist())
    return settings, factors, int(rng.integers(min(2, depth), depth + 1)), round(float(rng.uniform(0.2, 0.8)), 2)


@self_check
def check_exercise_1(predict_norms, backward, *, seed: int | None = None) -> str:
    """Compares ``predict_norms(plain_norms, clip_at, max_norm)`` with real backward passes.

    The right answer multiplies the norms of the clip point and every earlier layer by
    ``s = min(1, max_norm / |g_clip_at|)`` and keeps the later layers' norms. It is a prediction
    from ``plain_norms``: an answer that runs the notebook's ``backward`` itself matches the real
    passes, so it is also given made-up plain norms, where only a prediction from them is right.
    With ``seed`` (the instructor edition's held-out cases) the settings, the made-up norms and their
    clip are drawn from it instead.
    """
    plain = backward()
    names = list(plain["norms"])
    depth = len(names)
    settings = [(min(4, depth), 1.0), (2, 0.3), (depth, 0.1), (3, 50.0)]
    factors, made_up_clip, fraction = (2.0, 0.5, 3.0, 0.25, 1.5, 4.0), min(3, depth), 0.5
    if seed is not None:
        settings, factors, made_up_clip, fraction = _held_out_settings(seed, plain["norms"])
    for clip_at, max_norm in settings:
        truth = backward(lambda h, i: gradlab.clip_gradient_norm(h, max_norm) if i == clip_at else h)["norms"]
        guess = _predict(predict_norms, plain["norms"], clip_at, max_norm, truth)
        wrong = [n for n in truth if not np.isclose(guess[n], truth[n], rtol=1e-4)]
        if not wrong:
            continue
        setting = _("(clip after dense_{clip_at}, bound {max_norm})").format(clip_at=clip_at, max_norm=max_norm)
        later = [n for n in wrong if n in names[clip_at:]]
        held = [n for n in wrong if np.isclose(guess[n], max_norm) and n != names[clip_at - 1]]
        if later:
            n = later[0]
            raise NotYet(_("{setting}: you changed {n}, which is later than the clip: you predict {guess:.4f},\n"
                           "the backward pass gives {truth:.4f}, its plain norm. The backward pass visits it before "
                           "the clip: its gradient is the plain one.").format(
                setting=setting, n=n, guess=guess[n], truth=truth[n]))
        n = wrong[0]
        said = _("for {n} you predict {guess:.4f}, the backward pass gives {truth:.4f}").format(
            n=n, guess=guess[n], truth=truth[n])
        at_clip = plain["norms"][names[clip_at - 1]]
        if at_clip <= max_norm:
            raise NotYet(_("{setting}: {said}.\nThe gradient at the clip point has norm {at_clip:.4f}, "
                           "already below the bound {max_norm:g}: what does the clip do to it?").format(
                setting=setting, said=said, at_clip=at_clip, max_norm=max_norm))
        elif held:
            n = held[0]
            raise NotYet(_("{setting}: you held {n} to the bound: you predict {guess:.4f}, the backward pass "
                           "gives {truth:.4f}.\nThe clip acts once; earlier layers receive the clipped gradient "
                           "and transform it as usual.").format(setting=setting, n=n, guess=guess[n], truth=truth[n]))
        else:
            raise NotYet(_("{setting}: {said}.\nHint: backpropagation is linear in the gradient it starts "
                           "from.").format(setting=setting, said=said))
    made_up = {n: v * factors[i % len(factors)] for i, (n, v) in enumerate(plain["norms"].items())}
    clip_at = made_up_clip
    max_norm = fraction * made_up[names[clip_at - 1]]
    expected = _linear_prediction(made_up, clip_at, max_norm)
    guess = _predict(predict_norms, made_up, clip_at, max_norm, names)
    wrong = [n for n in names if not np.isclose(guess[n], expected[n], rtol=1e-4)]
    if wrong:
        n = wrong[0]
        given = ", ".join(f"{name} {value:.4f}" for name, value in made_up.items())
        raise NotYet(_("your predictions match the real backward passes, but not the plain norms they are given.\n"
                       "For made-up plain norms\n  {given},\nclip after dense_{clip_at}, bound {max_norm:.4f}: "
                       "for {n} you predict {guess:.4f}; from these norms it is {expected:.4f}.\n"
                       "Predict from plain_norms alone, without running a backward pass.").format(
            given=given, clip_at=clip_at, max_norm=max_norm, n=n, guess=guess[n], expected=expected[n]))
    return _("Your predictions match {count} real backward passes: the layers after the\n"
             "clip keep their norms, the clip point and every earlier layer share one factor "
             "min(1, bound / |g|).").format(count=len(settings))


@self_check
def check_exercise_2(modify, backward, *, seed: int | None = None) -> str:
    """Checks that ``backward(modify)`` keeps the forward pass and clips every layer's gradient to norm 0.1.

    Every norm must be at most 0.1, and none smaller than a clip to 0.1 at every layer leaves it: a
    modify that scales every gradient down (``scale_gradient(h, 1e-3)``) also keeps the norms below
    0.1, but it is not a clip. A second pass, with the gradient that reaches the top layer made 4 times
    larger, refuses a modify that scales each layer by a factor fixed in advance (which can match the
    first pass's clipped norms exactly). With ``seed`` (the instructor edition's held-out cases) the
    second pass makes the gradient that reaches a layer below the top one, drawn from it, 3 to 10
    times larger (a factor drawn from it too): a modify that clips the top layer only and scales the
    others by factors fixed in advance passes the public passes, not this one.
    """
    plain = backward()
    names = list(plain["norms"])
    bound = 0.1
    with running("backward(modify)"):
        result = backward(modify)
    if result["loss"] != plain["loss"]:
        raise NotYet(_("the loss changed from {before:.7g} to {after:.7g}, so the forward pass changed.\n"
                       "Use an op that is an identity in the forward pass.").format(
            before=plain["loss"], after=result["loss"]))
    too_big = {n: v for n, v in result["norms"].items() if v > bound * (1 + 1e-5)}
    if too_big:
        name = next(iter(too_big))
        elementwise = backward(lambda h, i: gradlab.clip_gradient(h, -bound, bound))["norms"]
        if all(np.isclose(result["norms"][n], elementwise[n], rtol=1e-5) for n in names):
            hint = _("That is an elementwise clip at every layer: each element is within ±0.1, but the\n"
                     "norm of the whole gradient is not. Clip the norm: gradlab.clip_gradient_norm.")
        else:
            hint = _("One clip acts once: which layers need a clip of their own?")
        raise NotYet(_("{name} still receives a gradient of norm {norm:.4f} > {bound}.\n{hint}").format(
            name=name, norm=too_big[name], bound=bound, hint=hint))
    dead = [n for n, v in result["weights"].items() if v == 0.0]
    missing = [n for n in names if n not in result["norms"]]
    if dead or missing:
        raise NotYet(_("{name} gets no gradient at all. Clip the gradient, do not stop it.").format(
            name=(missing + dead)[0]))
    clipped = backward(lambda h, i: gradlab.clip_gradient_norm(h, bound))["norms"]
    shrunk = [n for n in names if result["norms"][n] < clipped[n] * (1 - 1e-4)]
    if shrunk:
        n = shrunk[-1]  # the top-most: the backward pass reaches it first
        raise NotYet(_("every norm is at most {bound}, but {n} receives {got:.4f} where a clip to {bound} at every "
                       "layer\nleaves {clipped:.4f}: your modify shrinks the gradient more than a clip (a scale, "
                       "or a smaller bound?).\nA clip to norm {bound} leaves a gradient that is already within "
                       "the bound as it is.").format(bound=bound, n=n, got=result["norms"][n], clipped=clipped[n]))
    # The second case: the gradient that reaches the top layer (held out: a layer below) is made 4 times larger
    # (scale_gradient on its output, above modify). A clip at every layer bounds whatever arrives; factors fixed
    # in advance do not.
    at, factor = len(names), 4.0
    if seed is not None and len(names) > 1:
        rng = np.random.default_rng(seed)
        at, factor = int(rng.integers(1, len(names))), round(float(rng.uniform(3.0, 10.0)), 1)

    def scaled(inner):
        return lambda h, i: gradlab.scale_gradient(inner(h, i), factor) if i == at else inner(h, i)
    with running(_("backward(modify), with the gradient reaching the top layer scaled") if at == len(names)
                 else _("backward(modify), with the gradient reaching {layer} scaled").format(layer=names[at - 1])):
        again = backward(scaled(modify))["norms"]
    reference = backward(scaled(lambda h, i: gradlab.clip_gradient_norm(h, bound)))["norms"]
    off = [n for n in names if not np.isclose(again.get(n, 0.0), reference[n], rtol=1e-4)]
    if off:
        n = off[-1]  # the top-most: the backward pass reaches it first
        raise NotYet(_("in a second pass, where the gradient that reaches {layer} is {factor:g} times larger "
                       "(scale_gradient\non its output), {n} receives a gradient of norm {got:.4f}, where a clip "
                       "to {bound} at every\nlayer leaves {reference:.4f}. The first pass passed: does your modify "
                       "clip the gradient it receives,\nor scale it by factors fixed in advance?").format(
            layer=names[at - 1], factor=factor, n=n, got=again.get(n, 0.0), bound=bound, reference=reference[n]))
    return _("Every layer now receives a gradient of norm at most 0.1:\n  {norms}\n"
             "The forward pass is unchanged. Clipping at every layer takes one clip per layer.").format(
        norms=", ".join(f"{n} {v:.4f}" for n, v in result["norms"].items()))
