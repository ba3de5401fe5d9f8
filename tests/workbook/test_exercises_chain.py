"""The self-checks of notebook 06 (exercises/chain.py), run against a small deep network like the notebook's."""
from __future__ import annotations

import pytest
import tensorflow as tf

import gradlab
from exercises.chain import check_exercise_1, check_exercise_2


def _predict(plain_norms, clip_at, max_norm):
    names = list(plain_norms)
    s = min(1.0, max_norm / plain_norms[names[clip_at - 1]])
    return {n: v * s if i <= clip_at else v for i, (n, v) in enumerate(plain_norms.items(), start=1)}


def test_exercise_1_accepts_the_linear_prediction(chain_backward, accepted):
    assert accepted(check_exercise_1(_predict, chain_backward)).startswith("Correct!")


def test_exercise_1_explains_typical_mistakes(chain_backward, refused):
    out = refused(check_exercise_1(lambda norms, clip_at, max_norm: dict(norms), chain_backward))  # the start
    # In this network the first setting's gradient is below its bound: the second one fails.
    assert "(clip after dense_2, bound 0.3): for dense_1 you predict" in out and "linear" in out
    plain, clipped = chain_backward()["norms"], chain_backward(
        lambda h, i: gradlab.clip_gradient_norm(h, 0.3) if i == 2 else h)["norms"]
    assert f"you predict {plain['dense_1']:.4f}, the backward pass gives {clipped['dense_1']:.4f}" in out

    def held(norms, clip_at, max_norm):              # clips every earlier layer to the bound
        return {n: min(v, max_norm) if i <= clip_at else v for i, (n, v) in enumerate(norms.items(), start=1)}
    out = refused(check_exercise_1(held, chain_backward))  # dense_2 is above the bound, dense_4 (the clip) is not
    assert "for dense_2 you predict 1.0000" in out and "already below the bound 1:" in out

    def held_when_clipped(norms, clip_at, max_norm):
        if list(norms.values())[clip_at - 1] <= max_norm:
            return dict(norms)
        return held(norms, clip_at, max_norm)
    out = refused(check_exercise_1(held_when_clipped, chain_backward))
    assert "(clip after dense_2, bound 0.3): you held dense_1 to the bound: you predict 0.3000" in out
    assert "The clip acts once" in out

    def everything(norms, clip_at, max_norm):        # scales the later layers too
        s = min(1.0, max_norm / list(norms.values())[clip_at - 1])
        return {n: v * s for n, v in norms.items()}
    out = refused(check_exercise_1(everything, chain_backward))
    assert "you changed dense_3, which is later than the clip" in out
    assert f"the backward pass gives {plain['dense_3']:.4f}, its plain norm" in out
    assert "ZeroDivisionError" in refused(check_exercise_1(lambda *args: 1 / 0, chain_backward))


def test_exercise_1_explains_a_bound_above_the_gradient_without_the_formula(chain_backward, refused):
    def always_scales(norms, clip_at, max_norm):     # forgets the min(1, ...): scales up under a large bound
        s = max_norm / list(norms.values())[clip_at - 1]
        return {n: v * s if i <= clip_at else v for i, (n, v) in enumerate(norms.items(), start=1)}
    out = refused(check_exercise_1(always_scales, chain_backward))
    at_clip = chain_backward()["norms"]["dense_4"]
    assert "(clip after dense_4, bound 1.0)" in out and f"has norm {at_clip:.4f}, already below the bound 1:" in out
    assert "min(1" not in out                         # the message does not print the solution's formula


def test_exercise_1_refuses_a_prediction_that_runs_the_backward_pass(chain_backward, refused):
    def runs_it(plain_norms, clip_at, max_norm):     # matches every real pass, predicts nothing
        return chain_backward(lambda h, i: gradlab.clip_gradient_norm(h, max_norm) if i == clip_at else h)["norms"]
    out = refused(check_exercise_1(runs_it, chain_backward))
    assert "not the plain norms they are given" in out and "without running a backward pass" in out
    assert "For made-up plain norms\n  dense_1 " in out and "clip after dense_3, bound " in out


def test_exercise_2_accepts_a_clip_per_layer_and_explains_mistakes(chain_backward, refused, accepted):
    assert accepted(check_exercise_2(lambda h, i: gradlab.clip_gradient_norm(h, 0.1), chain_backward)).startswith("Correct!")
    out = refused(check_exercise_2(lambda h, i: gradlab.clip_gradient_norm(h, 0.1) if i == 4 else h, chain_backward))
    assert "One clip acts once" in out and "dense_1 still receives a gradient of norm" in out
    out = refused(check_exercise_2(lambda h, i: 0.5 * h, chain_backward))
    loss = chain_backward()["loss"]
    assert "forward pass changed" in out and f"the loss changed from {loss:.7g} to " in out
    assert "dense_1 gets no gradient" in refused(check_exercise_2(lambda h, i: tf.stop_gradient(h), chain_backward))


def test_exercise_2_accepts_a_clip_of_ones_own(chain_backward):
    assert check_exercise_2(lambda h, i: gradlab.map_gradient(h, lambda g: tf.clip_by_norm(g, 0.1)),
                            chain_backward).passed is True


@pytest.mark.parametrize("modify, label", [
    (lambda h, i: gradlab.scale_gradient(h, 1e-3), "scale"),
    (lambda h, i: gradlab.clip_gradient_norm(h, 0.01), "smaller bound"),
])
def test_exercise_2_refuses_shrinking_more_than_a_clip(modify, label, chain_backward, refused):
    # Every norm is below 0.1 either way, but neither is a clip to 0.1 at every layer.
    out = refused(check_exercise_2(modify, chain_backward))
    clipped = chain_backward(lambda h, i: gradlab.clip_gradient_norm(h, 0.1))["norms"]
    assert "shrinks the gradient more than a clip" in out
    assert "dense_6 receives" in out and f"leaves {clipped['dense_6']:.4f}" in out


def test_exercise_2_names_an_elementwise_clip_at_every_layer(chain_backward, refused):
    elementwise = lambda h, i: gradlab.clip_gradient(h, -0.1, 0.1)  # noqa: E731
    out = refused(check_exercise_2(elementwise, chain_backward))
    assert "elementwise clip at every layer" in out and "clip_gradient_norm" in out


def test_exercise_1_refuses_a_lookup_of_the_real_passes(chain_backward, refused):
    """Issue 39: the norms of the check's four real passes, looked up by (clip_at, max_norm): the made-up
    plain norms refuse them, since the lookup ignores the norms it is given."""
    depth = len(chain_backward()["norms"])
    table = {(clip_at, max_norm): chain_backward(lambda h, i, c=clip_at, m=max_norm:
                                           gradlab.clip_gradient_norm(h, m) if i == c else h)["norms"]
             for clip_at, max_norm in [(min(4, depth), 1.0), (2, 0.3), (depth, 0.1), (3, 50.0)]}

    def lookup(plain_norms, clip_at, max_norm):
        return table.get((clip_at, max_norm), plain_norms)
    out = refused(check_exercise_1(lookup, chain_backward))
    assert out.startswith("Not yet: your predictions match the real backward passes, but not the plain norms")
    assert "Predict from plain_norms alone, without running a backward pass." in out


def test_exercise_2_refuses_factors_fixed_in_advance(chain_backward, refused):
    """One scale per layer, computed from the plain pass so that it equals a clip to 0.1 at every layer there:
    the first pass accepts its norms; the second, with a 4 times larger gradient at the top, refuses them."""
    plain = list(chain_backward()["norms"].values())
    factors, above = {}, 1.0
    for i in range(len(plain), 0, -1):                  # the backward pass visits the top layer first
        factors[i] = min(1.0, 0.1 / (above * plain[i - 1]))
        above *= factors[i]
    out = refused(check_exercise_2(lambda h, i: gradlab.scale_gradient(h, factors[i]), chain_backward))
    assert out.startswith("Not yet: in a second pass, where the gradient that reaches dense_6 is 4 times larger")
    assert "dense_6 receives a gradient of norm 0.4000, where a clip to 0.1 at every\nlayer leaves 0.1000." in out
    assert "or scale it by factors fixed in advance?" in out


@pytest.mark.parametrize("seed", [0, 1, 2024])
def test_held_out_cases_decide_as_the_public_ones(seed, chain_backward):
    """The instructor edition's held-out cases (check_exercise_N(..., seed=...)): other inputs, same verdicts."""
    assert check_exercise_1.verdict(_predict, chain_backward, seed=seed).passed
    for wrong in (lambda norms, clip_at, max_norm: dict(norms),
                  lambda norms, clip_at, max_norm: {n: min(v, max_norm) if i <= clip_at else v
                                                    for i, (n, v) in enumerate(norms.items(), start=1)}):
        assert not check_exercise_1.verdict(wrong, chain_backward, seed=seed).passed
    assert check_exercise_2.verdict(lambda h, i: gradlab.clip_gradient_norm(h, 0.1), chain_backward, seed=seed).passed
    for wrong in (lambda h, i: gradlab.clip_gradient_norm(h, 0.1) if i == 4 else h,
                  lambda h, i: gradlab.scale_gradient(h, 1e-3), lambda h, i: gradlab.clip_gradient(h, -0.1, 0.1)):
        assert not check_exercise_2.verdict(wrong, chain_backward, seed=seed).passed


def test_held_out_cases_refuse_answers_fitted_to_the_public_ones(chain_backward):
    """Fitted to the public cases: a prediction right only for the public settings; a clip at the top layer and
    factors fixed in advance below it (right in both public passes, which differ only above the top clip)."""
    depth = len(chain_backward()["norms"])
    public = {(min(4, depth), 1.0), (2, 0.3), (depth, 0.1), (3, 50.0)}

    def fitted_1(plain_norms, clip_at, max_norm):
        return _predict(plain_norms, clip_at, max_norm) if (clip_at, max_norm) in public or clip_at == 3 else dict(
            plain_norms)
    assert check_exercise_1.verdict(fitted_1, chain_backward).passed
    assert not check_exercise_1.verdict(fitted_1, chain_backward, seed=7).passed

    clipped = list(chain_backward(lambda h, i: gradlab.clip_gradient_norm(h, 0.1))["norms"].values())
    arriving = list(chain_backward(lambda h, i: gradlab.clip_gradient_norm(h, 0.1) if i == depth else h)["norms"].values())
    factors, above = {}, 1.0
    for i in range(depth - 1, 0, -1):                   # below the top clip, what a clip to 0.1 did in the public pass
        factors[i] = clipped[i - 1] / (above * arriving[i - 1])
        above *= factors[i]

    def fitted_2(h, i):
        return gradlab.clip_gradient_norm(h, 0.1) if i == depth else gradlab.scale_gradient(h, factors[i])
    assert check_exercise_2.verdict(fitted_2, chain_backward).passed
    message = check_exercise_2.verdict(fitted_2, chain_backward, seed=7).message
    assert "in a second pass, where the gradient that reaches dense_" in message
    assert "or scale it by factors fixed in advance?" in message
