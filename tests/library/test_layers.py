"""gradlab.layers: identity forward, the modified gradient, in models, in fit, through save/load."""

from __future__ import annotations

import keras
import numpy as np
import pytest
import tensorflow as tf

from gradlab import layers

from helpers import tape_gradient

X = np.array([[1.0, -2.0, 3.0], [0.5, 4.0, -6.0]], np.float32)
#: An upstream gradient with elements outside [-0.1, 0.2] and an L2 norm above 1.
DY = np.array([[1.0, -2.0, 0.05], [3.0, 0.5, -0.3]], np.float32)


def clip_by_norm(dy, max_norm):
    norm = np.linalg.norm(dy)
    return dy if norm <= max_norm else dy * (max_norm / norm)


# (layer class, constructor arguments, the gradient rule on the whole upstream tensor)
LAYER_CASES = {
    # factors and bounds that float32 cannot represent: a float64 model must get them exactly
    "ScaleGradient": (layers.ScaleGradient, dict(factor=0.1), lambda dy: 0.1 * dy),
    "ClipGradient": (
        layers.ClipGradient,
        dict(clip_min=-0.1, clip_max=0.2),
        lambda dy: np.clip(dy, -0.1, 0.2),
    ),
    "ClipGradientNorm": (
        layers.ClipGradientNorm,
        dict(max_norm=1.0),
        lambda dy: clip_by_norm(dy, 1.0),
    ),
    "GradientReversal": (layers.GradientReversal, dict(factor=0.3), lambda dy: -0.3 * dy),
}


@pytest.fixture(params=list(LAYER_CASES), ids=str)
def layer_case(request):
    return LAYER_CASES[request.param]


def model_gradient(model, x=X, dy=DY):
    return tape_gradient(model, x, dy)


def sequential(layer, dtype="float32"):
    return keras.Sequential([keras.Input((3,), dtype=dtype), layer])


def functional(layer):
    inputs = keras.Input((3,))
    return keras.Model(inputs, layer(inputs))


@pytest.mark.parametrize("build", [sequential, functional], ids=["sequential", "functional"])
def test_layer_in_a_model_is_identity_forward_with_the_modified_gradient(
    layer_case, build, assert_bitwise
):
    cls, kwargs, rule = layer_case
    y, grad = model_gradient(build(cls(**kwargs)))
    assert_bitwise(y, X)
    np.testing.assert_allclose(grad.numpy(), rule(DY), rtol=1e-6)


def test_layer_in_a_compiled_tf_function(layer_case):
    cls, kwargs, rule = layer_case
    model = functional(cls(**kwargs))
    _, grad = tf.function(model_gradient, jit_compile=True)(model, X, DY)
    np.testing.assert_allclose(grad.numpy(), rule(DY), rtol=1e-6)


def test_get_config_from_config_round_trip(layer_case):
    cls, kwargs, rule = layer_case
    layer = cls(**kwargs, name="modifier")
    config = layer.get_config()
    assert {k: config[k] for k in kwargs} == kwargs and config["name"] == "modifier"
    clone = cls.from_config(config)
    assert type(clone) is cls and clone.get_config() == config
    _, grad = model_gradient(sequential(clone))
    np.testing.assert_allclose(grad.numpy(), rule(DY), rtol=1e-6)
    # and through Keras' generic (de)serialisation, which finds the class by its registered name
    revived = keras.saving.deserialize_keras_object(keras.saving.serialize_keras_object(layer))
    assert type(revived) is cls and revived.get_config() == config


def test_save_and_load_keep_the_gradient_behaviour(layer_case, tmp_path, assert_bitwise):
    cls, kwargs, rule = layer_case
    inputs = keras.Input((3,))
    model = keras.Model(inputs, keras.layers.Dense(3)(cls(**kwargs)(inputs)))
    path = tmp_path / "m.keras"
    model.save(path)
    loaded = keras.models.load_model(path)

    assert type(loaded.layers[1]) is cls
    y, grad = model_gradient(loaded)
    y_original, grad_original = model_gradient(model)
    assert_bitwise(y, y_original)
    # The gradient through Dense is dy @ W.T; the layer then applies its rule to that.
    kernel = loaded.layers[2].kernel.numpy()
    np.testing.assert_allclose(grad.numpy(), rule(DY @ kernel.T), rtol=1e-5, atol=1e-7)
    np.testing.assert_allclose(grad.numpy(), grad_original.numpy(), rtol=1e-6)


@pytest.mark.parametrize("jit_compile", [False, True], ids=["graph", "xla"])
def test_fit_trains_with_the_modified_gradient(layer_case, jit_compile):
    """One SGD step of fit() moves the first Dense by -lr * (its gradient under the rule)."""
    cls, kwargs, rule = layer_case
    keras.utils.set_random_seed(0)
    first, second = keras.layers.Dense(4), keras.layers.Dense(1)
    model = keras.Sequential([keras.Input((3,)), first, cls(**kwargs), second])
    x = X
    target = np.array([[1.0], [-1.0]], np.float32)
    w1, b1 = (v.numpy() for v in first.weights)
    w2, b2 = (v.numpy() for v in second.weights)

    # The expected step, from the upstream gradient at the layer's output and the rule:
    hidden = tf.constant(x @ w1 + b1)
    with tf.GradientTape() as tape:
        tape.watch(hidden)
        loss = keras.losses.MeanSquaredError()(target, tf.matmul(hidden, w2) + b2)
    upstream = rule(tape.gradient(loss, hidden).numpy())
    learning_rate = 0.1
    expected_w1 = w1 - learning_rate * x.T @ upstream
    expected_b1 = b1 - learning_rate * upstream.sum(axis=0)

    model.compile(keras.optimizers.SGD(learning_rate), "mse", jit_compile=jit_compile)
    model.fit(x, target, batch_size=len(x), epochs=1, shuffle=False, verbose=0)
    np.testing.assert_allclose(first.kernel.numpy(), expected_w1, rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(first.bias.numpy(), expected_b1, rtol=1e-5, atol=1e-6)


def test_gradient_reversal_flips_the_update_of_the_layers_before_it():
    def first_step_delta(middle):
        keras.utils.set_random_seed(1)
        first = keras.layers.Dense(2)
        model = keras.Sequential([keras.Input((3,)), first, middle, keras.layers.Dense(1)])
        model.compile(keras.optimizers.SGD(0.05), "mse")
        before = first.kernel.numpy()
        model.fit(X, np.ones((2, 1), np.float32), batch_size=2, epochs=1, shuffle=False, verbose=0)
        return first.kernel.numpy() - before

    plain = first_step_delta(layers.ScaleGradient(1.0))
    reversed_ = first_step_delta(layers.GradientReversal(1.0))
    frozen = first_step_delta(layers.ScaleGradient(0.0))
    assert np.abs(plain).max() > 1e-4
    np.testing.assert_allclose(reversed_, -plain, rtol=1e-5, atol=1e-8)
    np.testing.assert_array_equal(frozen, np.zeros_like(frozen))


class _RampFactor(keras.callbacks.Callback):
    """Sets the reversal factor before every batch, as a domain-adversarial schedule does."""

    def __init__(self, layer, values):
        super().__init__()
        self.layer, self.values, self.seen = layer, list(values), []

    def on_train_batch_begin(self, batch, logs=None):
        self.layer.factor = self.values[batch]
        self.seen.append(self.layer.factor)


def test_gradient_reversal_factor_can_change_between_calls_without_retracing():
    layer = layers.GradientReversal(0.0)
    model = functional(layer)
    step = tf.function(model_gradient)
    for factor in (0.0, 0.25, 2.0, -1.0):
        layer.factor = factor
        _, grad = step(model, X, DY)
        np.testing.assert_allclose(grad.numpy(), -factor * DY, rtol=1e-6)
        assert layer.factor == factor and layer.get_config()["factor"] == factor
    assert step.experimental_get_tracing_count() == 1


def test_gradient_reversal_factor_set_before_build_is_used():
    layer = layers.GradientReversal(1.0)
    layer.factor = 3.0
    _, grad = model_gradient(functional(layer))
    np.testing.assert_allclose(grad.numpy(), -3.0 * DY, rtol=1e-6)


@pytest.mark.parametrize("jit_compile", [False, True], ids=["graph", "xla"])
def test_gradient_reversal_factor_ramped_by_a_callback_during_fit(jit_compile):
    """Two batches, factor 0 then 1: the first step leaves the Dense before the layer unchanged."""
    keras.utils.set_random_seed(0)
    first, reversal = keras.layers.Dense(2), layers.GradientReversal(5.0)
    model = keras.Sequential([keras.Input((3,)), first, reversal, keras.layers.Dense(1)])
    model.compile(keras.optimizers.SGD(0.1), "mse", jit_compile=jit_compile)
    ramp = _RampFactor(reversal, [0.0, 1.0])
    kernels = []
    record = keras.callbacks.LambdaCallback(on_train_batch_end=lambda b, logs: kernels.append(first.kernel.numpy()))
    before = first.kernel.numpy()
    model.fit(X, np.ones((2, 1), np.float32), batch_size=1, epochs=1, shuffle=False, verbose=0,
              callbacks=[ramp, record])
    assert ramp.seen == [0.0, 1.0]
    np.testing.assert_array_equal(kernels[0], before)          # factor 0: nothing reaches it
    assert np.abs(kernels[1] - kernels[0]).max() > 1e-4         # factor 1: it moves


def test_gradient_reversal_factor_survives_save_and_load(tmp_path):
    layer = layers.GradientReversal(0.0)
    model = functional(layer)
    layer.factor = 0.75
    model.save(tmp_path / "m.keras")
    loaded = keras.models.load_model(tmp_path / "m.keras")
    assert loaded.layers[-1].factor == 0.75
    _, grad = model_gradient(loaded)
    np.testing.assert_allclose(grad.numpy(), -0.75 * DY, rtol=1e-6)


@pytest.mark.parametrize("bad, error", [("1", TypeError), (float("nan"), ValueError), (tf.Variable(1.0), TypeError)])
def test_gradient_reversal_factor_setter_rejects_bad_values(bad, error):
    layer = layers.GradientReversal(0.5)
    functional(layer)
    with pytest.raises(error, match="factor"):
        layer.factor = bad
    assert layer.factor == 0.5


def test_layers_pass_masks_and_shapes_through(layer_case):
    cls, kwargs, _ = layer_case
    layer = cls(**kwargs)
    assert layer.compute_output_shape((None, 5, 3)) == (None, 5, 3)
    tokens = keras.Input((4,), dtype="int32")
    embedding = keras.layers.Embedding(10, 3, mask_zero=True)
    model = keras.Model(tokens, keras.layers.GlobalAveragePooling1D()(layer(embedding(tokens))))
    pooled = model(np.array([[1, 2, 0, 0]])).numpy()
    table = embedding.embeddings.numpy()
    # the padding (token 0) is masked out downstream: the mean is over the first two steps only
    np.testing.assert_allclose(pooled, [(table[1] + table[2]) / 2], rtol=1e-6)


def test_layer_keeps_float64(layer_case, assert_bitwise):
    cls, kwargs, rule = layer_case
    x = X.astype(np.float64)
    y, grad = model_gradient(
        sequential(cls(**kwargs, dtype="float64"), "float64"), x, DY.astype(np.float64)
    )
    assert_bitwise(y, x)
    np.testing.assert_allclose(grad.numpy(), rule(DY.astype(np.float64)), rtol=1e-12)


def test_gradient_reversal_factor_set_later_is_exact_in_float64():
    # The factor lives in a weight of the layer's variable dtype: float64 keeps 0.1's bits (a
    # float32 weight sent back -0.10000000149 * dy, silently).
    layer = layers.GradientReversal(0.0, dtype="float64")
    model = sequential(layer, "float64")
    layer.factor = 0.1
    _, grad = model_gradient(model, X.astype(np.float64), DY.astype(np.float64))
    assert layer.factor == 0.1
    np.testing.assert_array_equal(grad.numpy(), -0.1 * DY.astype(np.float64))


@pytest.mark.parametrize("policy", ["float64", "mixed_float16", "float32"])
def test_every_layer_keeps_its_dtype_policy_through_config_and_file(layer_case, policy, tmp_path):
    """The search of issue 30 for dtype policies dropped in rebuilt layers: from get_config and from a
    .keras file loaded under another global policy, each layer (and ReLUGradient) keeps its own."""
    cls, kwargs, _ = layer_case
    for layer in (cls(**kwargs, dtype=policy), layers.ReLUGradient("leaky", alpha=0.1, dtype=policy)):
        again = type(layer).from_config(layer.get_config())
        assert again.dtype_policy.name == policy
        model = sequential(layer)
        model.save(tmp_path / "m.keras")
        other = "float32" if policy != "float32" else "mixed_float16"
        keras.config.set_dtype_policy(other)
        try:
            loaded = keras.models.load_model(tmp_path / "m.keras")
        finally:
            keras.config.set_dtype_policy("float32")
        assert loaded.layers[-1].dtype_policy.name == policy
        assert loaded(X).dtype == model(X).dtype


def test_a_float16_gradient_reversal_keeps_a_small_factor_in_float32():
    """A float16 layer's factor 1e-6 is not first rounded to a float16 subnormal: -3 * 1e-6 rounds once."""
    layer = layers.GradientReversal(1e-6, dtype="float16")
    x = tf.constant([1.0, 2.0], tf.float16)
    with tf.GradientTape() as tape:
        tape.watch(x)
        y = layer(x)
    g = tape.gradient(y, x, output_gradients=tf.constant([3.0, 3.0], tf.float16))
    assert layer.factor == pytest.approx(1e-6, rel=1e-7)
    np.testing.assert_array_equal(g.numpy(), np.float16(-3e-6))
