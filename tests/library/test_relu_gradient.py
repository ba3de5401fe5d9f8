"""ReLUGradient and with_relu_gradient: ReLU forward bitwise, each backward rule as defined, in every
mode and for every upstream form; a model's copy with its ReLUs swapped leaves the original alone."""
from __future__ import annotations

import functools

import numpy as np
import pytest
import tensorflow as tf
import keras

import gradlab
from gradlab.layers import ReLUGradient, with_relu_gradient

from helpers import ApplyOp

X = np.array([-2.0, -0.5, 0.0, 0.5, 2.0], np.float32)
UPSTREAMS = {
    "mixed signs": np.array([1.0, -1.0, 2.0, -3.0, 0.5], np.float32),
    "ones": np.ones(5, np.float32),
    "zeros": np.zeros(5, np.float32),
}


def expected(rule: str, x: np.ndarray, dy: np.ndarray, alpha: float = 0.1) -> np.ndarray:
    """Each rule by its definition (ReLUGradient's docstring)."""
    if rule == "relu":
        return np.where(x > 0, dy, 0.0)
    if rule == "guided":
        return np.where((x > 0) & (dy > 0), dy, 0.0)
    if rule == "deconvnet":
        return np.maximum(dy, 0.0)
    return np.where(x > 0, dy, alpha * dy)


@pytest.mark.parametrize("rule", ["relu", "guided", "deconvnet", "leaky"])
@pytest.mark.parametrize("upstream", sorted(UPSTREAMS))
def test_forward_is_relu_and_backward_follows_the_rule(rule, upstream, run_in_mode):
    layer = ReLUGradient(rule, alpha=0.1)

    def value_and_gradient(x, dy):
        with tf.GradientTape() as tape:
            tape.watch(x)
            y = layer(x)
        return y, tape.gradient(y, x, output_gradients=dy)

    y, grad = run_in_mode(value_and_gradient)(tf.constant(X), tf.constant(UPSTREAMS[upstream]))
    assert np.array_equal(y.numpy().view(np.uint32), tf.nn.relu(X).numpy().view(np.uint32))
    np.testing.assert_allclose(grad.numpy(), expected(rule, X, UPSTREAMS[upstream]), rtol=0, atol=0)


@pytest.mark.parametrize("build", ["layer", "with_relu_gradient"])
def test_leaky_slope_keeps_float64_precision(build, forward_and_gradient, run_in_mode):
    """alpha = 0.1 is rounded once to a float64 gradient's dtype, not through float32 first."""
    if build == "layer":
        relu = ReLUGradient("leaky", alpha=0.1, dtype="float64")
    else:
        inputs = keras.Input((5,), dtype="float64")
        plain = keras.Model(inputs, keras.layers.Activation("relu", dtype="float64")(inputs))
        relu = with_relu_gradient(plain, "leaky", alpha=0.1)
    x, dy = X.astype(np.float64)[None], UPSTREAMS["mixed signs"].astype(np.float64)[None]
    _, grad = run_in_mode(lambda a, b: forward_and_gradient(relu, a, b))(tf.constant(x), tf.constant(dy))
    assert grad.dtype == tf.float64
    # through float32, 0.1 * dy would be off by 1.5e-8 relative: allow float64 round-off only
    np.testing.assert_allclose(grad.numpy(), expected("leaky", x, dy, 0.1), rtol=4e-16, atol=0)


def test_a_sparse_upstream_gives_the_dense_gradient():
    """ReLUGradient's output consumed by tf.gather: repeated indices sum before the rule."""
    x = tf.constant(X)
    with tf.GradientTape() as tape:
        tape.watch(x)
        loss = tf.reduce_sum(tf.gather(ReLUGradient("guided")(x), [3, 3, 4, 1]) * [1.0, -3.0, 1.0, 1.0])
    dense_dy = np.array([0.0, 1.0, 0.0, -2.0, 1.0], np.float32)
    np.testing.assert_array_equal(tf.convert_to_tensor(tape.gradient(loss, x)).numpy(), expected("guided", X, dense_dy))


def test_arguments_are_validated():
    with pytest.raises(ValueError, match="rule must be one of"):
        ReLUGradient("guidded")
    with pytest.raises(TypeError, match="rule must be one of"):
        ReLUGradient(3)
    with pytest.raises(TypeError, match="alpha"):
        ReLUGradient("leaky", alpha=tf.Variable(0.1))
    with pytest.raises(TypeError, match="model must be a Keras model"):
        with_relu_gradient(lambda x: x)


def _model():
    keras.utils.set_random_seed(0)
    inner = keras.Sequential([keras.Input((4,)), keras.layers.Dense(4), keras.layers.ReLU()], name="inner")
    inputs = keras.Input((3,))
    h = keras.layers.Dense(4, activation="relu", name="dense_string")(inputs)
    h = inner(h)
    h = keras.layers.Activation("relu", name="act")(h)
    outputs = keras.layers.Dense(2, activation=keras.activations.relu, name="dense_function")(h)
    return keras.Model(inputs, outputs)


def _input_gradient(model, x, weights):
    x = tf.constant(x)
    with tf.GradientTape() as tape:
        tape.watch(x)
        loss = tf.reduce_sum(model(x) * weights)
    return tape.gradient(loss, x).numpy()


@pytest.mark.parametrize("rule", ["relu", "guided", "deconvnet", "leaky"])
def test_swapping_keeps_the_forward_pass_bitwise_and_the_original_untouched(rule):
    model = _model()
    x = np.random.default_rng(0).standard_normal((6, 3)).astype(np.float32)
    weights_before = [w.copy() for w in model.get_weights()]
    plain_gradient = _input_gradient(model, x, [[1.0, -1.0]])

    swapped = with_relu_gradient(model, rule, alpha=0.1)

    assert np.array_equal(model(x).numpy().view(np.uint32), swapped(x).numpy().view(np.uint32))
    assert all(np.array_equal(a, b) for a, b in zip(weights_before, model.get_weights()))
    assert np.array_equal(_input_gradient(model, x, [[1.0, -1.0]]), plain_gradient)     # original unchanged
    assert not any(isinstance(layer, ReLUGradient) for layer in model.layers)
    assert isinstance(swapped.get_layer("act"), ReLUGradient)
    assert isinstance(swapped.get_layer("inner").layers[-1], ReLUGradient)
    assert swapped.get_layer("dense_string").activation is not keras.activations.relu
    assert swapped.get_layer("dense_function").activation is not keras.activations.relu
    swapped_gradient = _input_gradient(swapped, x, [[1.0, -1.0]])
    if rule == "relu":
        np.testing.assert_allclose(swapped_gradient, plain_gradient, rtol=1e-6, atol=1e-7)
    else:
        assert not np.allclose(swapped_gradient, plain_gradient)


def test_guided_backprop_on_one_dense_relu_by_hand():
    """y = relu(W x): the guided gradient w.r.t. x is W^T (dy · 1[Wx > 0] · 1[dy > 0])."""
    keras.utils.set_random_seed(1)
    inputs = keras.Input((3,))
    model = keras.Model(inputs, keras.layers.Dense(4, activation="relu", use_bias=False)(inputs))
    x = np.random.default_rng(1).standard_normal((1, 3)).astype(np.float32)
    dy = np.array([[1.0, -2.0, 0.5, -0.5]], np.float32)
    kernel = model.get_weights()[0]
    pre = x @ kernel
    by_hand = (dy * (pre > 0) * (dy > 0)) @ kernel.T
    np.testing.assert_allclose(_input_gradient(with_relu_gradient(model, "guided"), x, dy), by_hand, rtol=1e-6)


def test_unbuilt_subclassed_and_parametrised_relus_are_refused_clearly():
    with pytest.raises(ValueError, match="not built"):
        with_relu_gradient(keras.Sequential([keras.layers.Dense(2, activation="relu")]))

    class Sub(keras.Model):
        def __init__(self):
            super().__init__()
            self.dense = keras.layers.Dense(2, activation="relu")

        def call(self, x):
            return self.dense(x)

    sub = Sub()
    sub(np.ones((1, 3), np.float32))
    with pytest.raises(ValueError, match="Keras clones only functional and Sequential"):
        with_relu_gradient(sub)
    capped = keras.Sequential([keras.Input((3,)), keras.layers.ReLU(max_value=6.0)])
    with pytest.raises(ValueError, match="max_value"):
        with_relu_gradient(capped)


def test_relu_gradient_layer_survives_keras_saving(tmp_path):
    inputs = keras.Input((5,))
    model = keras.Model(inputs, ReLUGradient("leaky", alpha=0.25)(inputs))
    path = tmp_path / "m.keras"
    model.save(path)
    loaded = keras.saving.load_model(path)
    layer = loaded.layers[-1]
    assert isinstance(layer, ReLUGradient) and (layer.rule, layer.alpha) == ("leaky", 0.25)
    np.testing.assert_array_equal(_input_gradient(loaded, X[None], UPSTREAMS["mixed signs"][None]),
                                  expected("leaky", X, UPSTREAMS["mixed signs"], 0.25)[None])


def test_the_public_api_lists_them():
    assert {"ReLUGradient", "ReLUGradientActivation", "with_relu_gradient"} <= set(gradlab.layers.__all__)


# ------------------------------------------------------------------------------------------------
# Every spelling of a plain ReLU is replaced; a ReLU that cannot be is refused, never left plain
# ------------------------------------------------------------------------------------------------

X_ROW = np.array([[-2.0, -0.5, 0.5, 2.0]], np.float32)
DY_ROW = np.array([[1.0, -1.0, 2.0, -3.0]], np.float32)
PLAIN_SPELLINGS = {
    "Dense tf.nn.relu": lambda: keras.layers.Dense(4, activation=tf.nn.relu, kernel_initializer="identity"),
    "Dense keras.ops.relu": lambda: keras.layers.Dense(4, activation=keras.ops.relu, kernel_initializer="identity"),
    "Dense keras.ops.nn.relu": lambda: keras.layers.Dense(4, activation=keras.ops.nn.relu, kernel_initializer="identity"),
    "Dense tf.keras.activations.relu": lambda: keras.layers.Dense(
        4, activation=tf.keras.activations.relu, kernel_initializer="identity"),
    "Dense 'relu'": lambda: keras.layers.Dense(4, activation="relu", kernel_initializer="identity"),
    "Activation(tf.nn.relu)": lambda: keras.layers.Activation(tf.nn.relu),
    "Activation(keras.ops.relu)": lambda: keras.layers.Activation(keras.ops.relu),
    "Activation('relu')": lambda: keras.layers.Activation("relu"),
    "ReLU()": lambda: keras.layers.ReLU(),
    "Lambda(tf.nn.relu)": lambda: keras.layers.Lambda(tf.nn.relu),
    "TimeDistributed(Dense tf.nn.relu)": lambda: keras.Sequential(
        [keras.layers.Reshape((1, 4)),
         keras.layers.TimeDistributed(keras.layers.Dense(4, activation=tf.nn.relu, kernel_initializer="identity"))]),
    "SimpleRNN 'relu'": lambda: keras.Sequential(
        [keras.layers.Reshape((1, 4)),
         keras.layers.SimpleRNN(4, activation="relu", kernel_initializer="identity", use_bias=False)]),
}


@pytest.mark.parametrize("spelling", sorted(PLAIN_SPELLINGS))
def test_every_spelling_of_a_plain_relu_gets_the_rule(spelling):
    """Deconvnet sends max(dy, 0) back whatever x was; the plain ReLU sends dy · 1[x > 0]."""
    model = keras.Sequential([keras.Input((4,)), PLAIN_SPELLINGS[spelling]()])
    copy = with_relu_gradient(model, "deconvnet")
    np.testing.assert_array_equal(_input_gradient(model, X_ROW, DY_ROW), [[0.0, 0.0, 2.0, -3.0]])
    np.testing.assert_array_equal(_input_gradient(copy, X_ROW, DY_ROW), [[1.0, 0.0, 2.0, 0.0]])
    assert np.array_equal(model(X_ROW), copy(X_ROW))


def _capped(x):  # its name does not say ReLU, its graph does
    return keras.activations.relu(x, max_value=6.0)


VARIANT = r"gradlab's rules \(guided, deconvnet, leaky\) are defined for the plain ReLU max\(x, 0\), and it has none"
FUNCTION = r"Use one of those in the model, or put gradlab\.layers\.ReLUGradient\(rule\)"
IRREPLACEABLE = {
    "ReLU(max_value=6)": (lambda: keras.layers.ReLU(max_value=6.0), r"is a ReLU with max_value=6\.0", VARIANT),
    "ReLU(negative_slope)": (lambda: keras.layers.ReLU(negative_slope=0.1), r"is a ReLU with negative_slope=0\.1",
                             VARIANT),
    "ReLU(threshold)": (lambda: keras.layers.ReLU(threshold=0.5), r"is a ReLU with threshold=0\.5", VARIANT),
    "ReLU(max_value=0)": (lambda: keras.layers.ReLU(max_value=0.0), r"is a ReLU with max_value=0\.0", VARIANT),
    "LeakyReLU": (lambda: keras.layers.LeakyReLU(), r"is a LeakyReLU layer", VARIANT),
    "PReLU": (lambda: keras.layers.PReLU(), r"is a PReLU layer", VARIANT),
    "partial": (lambda: keras.layers.Activation(functools.partial(tf.keras.activations.relu, max_value=6.0)),
                r"has activation=functools\.partial\(.*relu, max_value=6\.0\), a ReLU variant", VARIANT),
    "lambda": (lambda: keras.layers.Activation(lambda t: tf.nn.relu(t)), r"has activation=.*<lambda>, which builds a ReLU op",
               FUNCTION),
    "Lambda doing more": (lambda: keras.layers.Lambda(lambda t: 2.0 * tf.nn.relu(t)),
                          r"has function=.*<lambda>, which builds a ReLU op", FUNCTION),
    "a function of yours": (lambda: keras.layers.Dense(4, activation=_capped),
                            r"has activation=.*_capped, which builds a ReLU op", FUNCTION),
    "relu6": (lambda: keras.layers.Dense(4, activation="relu6"), r"has activation=.*relu6, a ReLU variant", VARIANT),
    "leaky_relu": (lambda: keras.layers.Activation("leaky_relu"), r"has activation=.*\.leaky_relu, a ReLU variant",
                   VARIANT),
    "tf.nn.relu6": (lambda: keras.layers.Activation(tf.nn.relu6), r"has activation=.*\.relu6, a ReLU variant", VARIANT),
    "ReLU6 layer as activation": (lambda: keras.layers.Dense(4, activation=keras.layers.ReLU(max_value=6.0, name="six")),
                                  r"has activation=a ReLU layer 'six', a ReLU with max_value=6\.0", VARIANT),
    "PReLU as activation": (lambda: keras.layers.Dense(4, activation=keras.layers.PReLU(name="p")),
                            r"has activation=a PReLU layer 'p', a ReLU variant", VARIANT),
}


@pytest.mark.parametrize("case", sorted(IRREPLACEABLE))
def test_a_relu_that_cannot_be_replaced_is_refused_naming_the_layer(case):
    """A variant is refused saying gradlab has no rule for it; a ReLU in a function of yours, what to use."""
    make, message, advice = IRREPLACEABLE[case]
    layer = make()
    model = keras.Sequential([keras.Input((4,)), layer])
    with pytest.raises(ValueError, match=rf"layer '{layer.name}' \({type(layer).__name__}\) {message}.*{advice}"):
        with_relu_gradient(model, "guided")


@pytest.mark.parametrize("initializer", ["identity", "orthogonal", "ones"])
def test_the_copy_keeps_the_weights_whatever_their_initializer(initializer):
    """Keras 3.3 cannot rebuild kernel_initializer="identity" from its own config (gradlab helps)."""
    model = keras.Sequential([keras.Input((4,)), keras.layers.Dense(4, activation="relu", kernel_initializer=initializer)])
    trained = [np.random.default_rng(1).standard_normal(w.shape).astype(np.float32) for w in model.get_weights()]
    model.set_weights(trained)
    copy = with_relu_gradient(model, "guided")
    assert all(np.array_equal(a, b) for a, b in zip(copy.get_weights(), trained))
    assert np.array_equal(copy(X_ROW), model(X_ROW))


class _Weighted(keras.layers.Layer):
    """A layer whose get_config() forgets its argument n: rebuilt, it gets n=3 weights."""

    def __init__(self, n=3, **kwargs):
        super().__init__(**kwargs)
        self.n = n

    def build(self, input_shape):
        self.w = self.add_weight(shape=(self.n,), initializer="ones")

    def call(self, x):
        return x * keras.ops.sum(self.w)

    def get_config(self):
        return {"name": self.name}


class _Subclassed(keras.Model):
    def __init__(self, **kwargs):
        super().__init__(**kwargs)
        self.dense = keras.layers.Dense(4, activation="relu")

    def call(self, x):
        return self.dense(x)


UNCOPYABLE = {
    "no config": (lambda: ApplyOp(lambda t: 2.0 * t, name="doubles"),  # a function Keras cannot put in a config
                  r"layer 'doubles' \(ApplyOp\) cannot be copied: Keras .* cannot rebuild it from its config"),
    "config forgets an argument": (lambda: _Weighted(4, name="weighted"),
                                   r"layer 'weighted' \(_Weighted\) cannot be copied: rebuilt from its config it "
                                   r"has weights of shapes \[\(3,\)\], the original \[\(4,\)\]"),
    "nested subclassed model": (lambda: _Subclassed(name="inner"),
                                r"model 'inner' \(_Subclassed\) cannot be cloned: Keras clones only functional"),
}


@pytest.mark.parametrize("case", sorted(UNCOPYABLE))
def test_a_layer_that_cannot_be_copied_is_refused_naming_it(case):
    make, message = UNCOPYABLE[case]
    inputs = keras.Input((4,))
    model = keras.Model(inputs, make()(keras.layers.Dense(4, activation="relu")(inputs)), name="outer")
    with pytest.raises(ValueError, match=message):
        with_relu_gradient(model)


def test_other_activations_are_left_alone_beside_a_relu():
    model = keras.Sequential([keras.Input((4,)), keras.layers.Dense(4, activation="tanh"),
                              keras.layers.Activation("sigmoid"), keras.layers.Dense(2, activation="relu")])
    copy = with_relu_gradient(model, "deconvnet")
    assert [layer.activation for layer in copy.layers[:2]] == [layer.activation for layer in model.layers[:2]]
    assert isinstance(copy.layers[2].activation, gradlab.layers.ReLUGradientActivation)


def _efficientnet_like():
    """EfficientNet's activations (swish in convolutions, a sigmoid gate), no ReLU."""
    inputs = keras.Input((8, 8, 3))
    h = keras.layers.Conv2D(4, 3, padding="same", activation="swish")(inputs)
    gate = keras.layers.Dense(4, activation="sigmoid")(keras.layers.GlobalAveragePooling2D()(h))
    h = keras.layers.Multiply()([h, keras.layers.Reshape((1, 1, 4))(gate)])
    return keras.Model(inputs, keras.layers.Dense(2)(keras.layers.GlobalAveragePooling2D()(h)), name="effnet_like")


def _convnext_like():
    """ConvNeXt's block (depthwise convolution, LayerNormalization, a GELU layer), no ReLU; nested."""
    block = keras.Sequential([keras.Input((8, 8, 4)), keras.layers.DepthwiseConv2D(3, padding="same"),
                              keras.layers.LayerNormalization(), keras.layers.Dense(8),
                              keras.layers.Activation("gelu"), keras.layers.Dense(4)], name="block")
    inputs = keras.Input((8, 8, 4))
    return keras.Model(inputs, keras.layers.Add()([inputs, block(inputs)]), name="convnext_like")


@pytest.mark.parametrize("make, found", [(_efficientnet_like, r"'sigmoid', '(silu|swish)'"), (_convnext_like, r"'gelu'"),
                                         (lambda: keras.Sequential([keras.Input((4,)), keras.layers.Dense(2)],
                                                                   name="linear_net"), None)],
                         ids=["EfficientNet-like", "ConvNeXt-like", "no activation"])
@pytest.mark.parametrize("rule", ["guided", "deconvnet", "relu"])
def test_a_model_without_relu_is_refused_naming_its_activations(make, found, rule):
    """Before: copied without a word, so 'guided' saliency silently equalled the plain gradient."""
    model = make()
    what = f"its activations are {found}" if found else "it has no activation function"
    with pytest.raises(ValueError, match=rf"model '{model.name}' has no ReLU for with_relu_gradient to change "
                                         rf"\({what}; none is a plain ReLU\), so a copy with rule '{rule}' would give "
                                         "exactly the model's plain gradient"):
        with_relu_gradient(model, rule)


def test_a_copy_can_be_given_another_rule():
    model = keras.Sequential([keras.Input((4,)), keras.layers.Dense(4, activation="relu", kernel_initializer="identity"),
                              keras.layers.ReLU()])
    back = with_relu_gradient(with_relu_gradient(model, "deconvnet"), "relu")
    np.testing.assert_array_equal(_input_gradient(back, X_ROW, DY_ROW), _input_gradient(model, X_ROW, DY_ROW))


# ------------------------------------------------------------------------------------------------
# The copy keeps its rule through a .keras file
# ------------------------------------------------------------------------------------------------

RULES = [("relu", 0.01), ("guided", 0.01), ("deconvnet", 0.01), ("leaky", 0.25)]


@pytest.mark.parametrize("rule, alpha", RULES, ids=[rule for rule, _ in RULES])
def test_the_copy_keeps_its_rule_through_a_keras_file(rule, alpha, tmp_path):
    """Before: deconvnet gave [[2, 2, 2]] before saving and [[0, 0, 0]] after loading, silently."""
    model = _model()
    x = np.random.default_rng(2).standard_normal((6, 3)).astype(np.float32)
    copy = with_relu_gradient(model, rule, alpha=alpha)
    before = _input_gradient(copy, x, [[1.0, -1.0]])
    copy.save(tmp_path / "m.keras")
    loaded = keras.models.load_model(tmp_path / "m.keras")
    activation = loaded.get_layer("dense_string").activation
    assert isinstance(activation, gradlab.layers.ReLUGradientActivation)
    assert (activation.rule, activation.alpha) == (rule, alpha)
    np.testing.assert_array_equal(_input_gradient(loaded, x, [[1.0, -1.0]]), before)
    assert np.array_equal(loaded(x), copy(x))


def test_the_deconvnet_measurement_of_the_review(tmp_path):
    inputs = keras.Input((3,))
    model = keras.Model(inputs, keras.layers.Dense(3, activation="relu", use_bias=False)(inputs))
    model.set_weights([np.eye(3)])       # not kernel_initializer="identity": Keras 3.3 cannot load that back
    copy = with_relu_gradient(model, "deconvnet")
    x = -np.ones((1, 3), np.float32)
    np.testing.assert_array_equal(_input_gradient(copy, x, [[2.0, 2.0, 2.0]]), [[2.0, 2.0, 2.0]])
    copy.save(tmp_path / "m.keras")
    loaded = keras.models.load_model(tmp_path / "m.keras")
    np.testing.assert_array_equal(_input_gradient(loaded, x, [[2.0, 2.0, 2.0]]), [[2.0, 2.0, 2.0]])


@pytest.mark.parametrize("rule, alpha", RULES, ids=[rule for rule, _ in RULES])
def test_relu_gradient_layer_round_trips_every_rule(rule, alpha, tmp_path):
    inputs = keras.Input((5,))
    model = keras.Model(inputs, ReLUGradient(rule, alpha=alpha)(inputs))
    model.save(tmp_path / "m.keras")
    loaded = keras.saving.load_model(tmp_path / "m.keras")
    assert (loaded.layers[-1].rule, loaded.layers[-1].alpha) == (rule, alpha)
    dy = UPSTREAMS["mixed signs"][None]
    np.testing.assert_array_equal(_input_gradient(loaded, X[None], dy), expected(rule, X, dy[0], alpha)[None])


def test_relu_gradient_activation_validates_and_serialises():
    relu = gradlab.layers.ReLUGradientActivation("leaky", alpha=0.5)
    assert relu.get_config() == {"rule": "leaky", "alpha": 0.5}
    again = keras.saving.deserialize_keras_object(keras.saving.serialize_keras_object(relu))
    assert isinstance(again, gradlab.layers.ReLUGradientActivation) and again.get_config() == relu.get_config()
    with pytest.raises(ValueError, match="rule must be one of"):
        gradlab.layers.ReLUGradientActivation("guidded")
