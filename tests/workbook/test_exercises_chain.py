"""The self-checks of notebook 06 (exercises/chain.py), run against a small deep network like the notebook's."""
from __future__ import annotations

import keras
import numpy as np
import pytest
import tensorflow as tf

import gradlab
from exercises.chain import check_exercise_1, check_exercise_2


@pytest.fixture(scope="module")
def backward():
    """The notebook's backward(modify): one pass through 6 tanh layers, gradient norms per layer."""
    layers = [keras.layers.Dense(8 if i < 6 else 1, activation="tanh" if i < 6 else None,
                                 kernel_initializer=keras.initializers.RandomNormal(stddev=0.7, seed=i),
                                 name=f"dense_{i}") for i in range(1, 7)]
    rng = np.random.default_rng(0)
    inputs = tf.constant(rng.normal(size=(16, 4)), tf.float32)
    targets = tf.constant(rng.normal(size=(16, 1)), tf.float32)
    probe = gradlab.GradientProbe()

    def run(modify=None):
        probe.clear()
        with tf.GradientTape() as tape:
            h = inputs
            for i, layer in enumerate(layers, start=1):
                h = probe(layer(h), name=layer.name)
                if modify is not None:
                    h = modify(h, i)
            loss = tf.reduce_mean((h - targets) ** 2)
        variables = [w for layer in layers for w in layer.trainable_variables]
        grads = tape.gradient(loss, variables)
        return dict(loss=loss.numpy(), norms=probe.norms(),
                    weights=gradlab.plots.layer_gradient_norms(grads, variables))
    return run


def _predict(plain_norms, clip_at, max_norm):
    names = list(plain_norms)
    s = min(1.0, max_norm / plain_norms[names[clip_at - 1]])
    return {n: v * s if i <= clip_at else v for i, (n, v) in enumerate(plain_norms.items(), start=1)}


def test_exercise_1_accepts_the_linear_prediction(backward, capsys):
    assert check_exercise_1(_predict, backward).passed is True
    assert capsys.readouterr().out.startswith("Correct!")


def test_exercise_1_explains_typical_mistakes(backward, capsys):
    assert check_exercise_1(lambda norms, clip_at, max_norm: dict(norms), backward).passed is False
    assert "linear" in capsys.readouterr().out

    def held(norms, clip_at, max_norm):              # clips every earlier layer to the bound
        return {n: min(v, max_norm) if i <= clip_at else v for i, (n, v) in enumerate(norms.items(), start=1)}
    assert check_exercise_1(held, backward).passed is False
    assert capsys.readouterr().out.startswith("Not yet")

    def everything(norms, clip_at, max_norm):        # scales the later layers too
        s = min(1.0, max_norm / list(norms.values())[clip_at - 1])
        return {n: v * s for n, v in norms.items()}
    assert check_exercise_1(everything, backward).passed is False
    assert "later than the clip" in capsys.readouterr().out
    assert check_exercise_1(lambda *args: 1 / 0, backward).passed is False
    assert "ZeroDivisionError" in capsys.readouterr().out


def test_exercise_2_accepts_a_clip_per_layer_and_explains_mistakes(backward, capsys):
    assert check_exercise_2(lambda h, i: gradlab.clip_gradient_norm(h, 0.1), backward).passed is True
    assert capsys.readouterr().out.startswith("Correct!")
    assert check_exercise_2(lambda h, i: gradlab.clip_gradient_norm(h, 0.1) if i == 4 else h, backward).passed is False
    assert "One clip acts once" in capsys.readouterr().out
    assert check_exercise_2(lambda h, i: 0.5 * h, backward).passed is False
    assert "forward pass changed" in capsys.readouterr().out
    assert check_exercise_2(lambda h, i: tf.stop_gradient(h), backward).passed is False
    assert "no gradient" in capsys.readouterr().out
