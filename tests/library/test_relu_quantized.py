"""with_relu_gradient on a model Keras quantized (``model.quantize("float8")``, ``"int8"``, ``"int4"``).

A quantized ``Dense`` rebuilt from its config holds the same weights as the original in another order
(float8: its scales and amax histories before its kernel; the original got them after, when it was
quantized), so the copy matches weights by path, not by position. Each model is built twice with
the same seeds: with plain ReLUs (the original, which is copied) and with a hand-written
``tf.custom_gradient`` ReLU that implements the rule (the reference); both are quantized alike and
their float8 scales set alike. The copy's weights are the original's, path for path; its forward
pass is bitwise the original's; the gradient reaching its input is the reference's, eagerly and in
a ``tf.function``. A layer whose config does not describe it is still refused in a quantized model.

Keras quantizes ``Dense``, ``EinsumDense`` and ``Embedding``, not convolutions: a ``Conv2D`` beside
them stays float32 (the mixed model below). ``model.quantize`` came with Keras 3.2 (int8), 3.3
(float8) and 3.11 (int4); older Keras skips those modes.
"""
from __future__ import annotations

import functools
import warnings
from typing import Callable, Dict, Tuple

import keras
import numpy as np
import pytest
import tensorflow as tf

from gradlab.layers import with_relu_gradient

from helpers import tape_gradient, wrap_in_mode

RULES = ("relu", "guided", "deconvnet", "leaky")
ALPHA = 0.25
#: The first Keras (major, minor) whose model.quantize accepts each mode.
QUANTIZE_SINCE = {"int8": (3, 2), "float8": (3, 3), "int4": (3, 11)}
KERAS_VERSION = tuple(int(part) for part in keras.__version__.split(".")[:2])


def _mode_param(mode: str):
    since = QUANTIZE_SINCE[mode]
    return pytest.param(mode, id=mode, marks=pytest.mark.skipif(
        KERAS_VERSION < since,
        reason=f"Keras {keras.__version__} has no model.quantize({mode!r}) (Keras {since[0]}.{since[1]} brought it)"))


QUANT_MODES = [_mode_param(mode) for mode in QUANTIZE_SINCE]


def reference_relu(rule: str) -> Callable:
    """``max(x, 0)`` whose gradient is ``rule`` by its definition (ReLUGradient's docstring), by hand."""
    @tf.custom_gradient
    def relu(x):
        def backward(dy):
            zero = tf.zeros_like(dy)
            if rule == "relu":
                return tf.where(x > 0, dy, zero)
            if rule == "guided":
                return tf.where((x > 0) & (dy > 0), dy, zero)
            if rule == "deconvnet":
                return tf.maximum(dy, zero)
            return tf.where(x > 0, dy, tf.constant(ALPHA, dy.dtype) * dy)
        return tf.nn.relu(x), backward
    return relu


def _init(seed: int) -> dict:
    """Seeded initializers: two builds of one model get the same weights (a bias that is not zero)."""
    return {"kernel_initializer": keras.initializers.GlorotUniform(seed=seed),
            "bias_initializer": keras.initializers.RandomNormal(stddev=0.5, seed=seed + 100)}


def _relu_layer(relu):
    """A ReLU layer: ``keras.layers.ReLU()`` in the original, an Activation of the reference's function."""
    return keras.layers.ReLU() if relu == "relu" else keras.layers.Activation(relu)


def dense_activation(relu) -> keras.Model:
    inputs = keras.Input((8,))
    hidden = keras.layers.Dense(16, activation=relu, **_init(1))(inputs)
    return keras.Model(inputs, keras.layers.Dense(4, **_init(2))(hidden))


def dense_relu_layer(relu) -> keras.Model:
    inputs = keras.Input((8,))
    hidden = _relu_layer(relu)(keras.layers.Dense(16, **_init(3))(inputs))
    return keras.Model(inputs, keras.layers.Dense(4, **_init(4))(hidden))


def conv_einsum_dense(relu) -> keras.Model:
    """A Conv2D (left float32 by quantize), then an EinsumDense and a Dense (quantized)."""
    inputs = keras.Input((6, 6, 2))
    h = keras.layers.Conv2D(4, 3, activation=relu, **_init(5))(inputs)
    h = keras.layers.Flatten()(h)
    h = keras.layers.EinsumDense("ab,bc->ac", output_shape=8, bias_axes="c", **_init(6))(h)
    return keras.Model(inputs, keras.layers.Dense(3, **_init(7))(_relu_layer(relu)(h)))


#: name -> (build(relu), the input's shape, the output's width)
MODELS = {"Dense(activation='relu')": (dense_activation, (8,), 4),
          "Dense, ReLU()": (dense_relu_layer, (8,), 4),
          "Conv2D, EinsumDense, ReLU(), Dense": (conv_einsum_dense, (6, 6, 2), 3)}


def _float8_state(model) -> list:
    """The scales and amax histories of the model's float8 layers (the order of model.weights)."""
    return [weight for layer in model.layers for weight in layer.weights
            if _mode_of(layer) == "float8" and weight.path.rsplit("/", 1)[-1] not in ("kernel", "bias")]


def _mode_of(layer):
    """The quantization mode of ``layer``'s dtype policy (None: not quantized)."""
    return getattr(layer.dtype_policy, "quantization_mode", None)


def quantize(model, mode: str) -> None:
    """``model.quantize(mode)`` without its warnings about the layers Keras does not quantize (ReLU, Conv2D...)."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)
        model.quantize(mode)


def _quantized(build: Callable, relu, mode: str) -> keras.Model:
    """``build(relu)`` quantized in ``mode``; float8 scales and amax histories set from a seed, not 1 and 0
    (a copy with them swapped or left at their defaults would then compute another forward pass)."""
    model = build(relu)
    quantize(model, mode)
    rng = np.random.default_rng(0)
    for weight in _float8_state(model):
        weight.assign(rng.uniform(0.5, 2.0, tuple(weight.shape)).astype(np.float32))
    return model


@functools.lru_cache(maxsize=None)
def models(model_name: str, mode: str) -> Tuple[keras.Model, Dict[str, keras.Model], Dict[str, keras.Model]]:
    """(the quantized original, {rule: its copy}, {rule: the quantized reference}), built once per module."""
    build, _, _ = MODELS[model_name]
    original = _quantized(build, "relu", mode)
    copies = {rule: with_relu_gradient(original, rule, alpha=ALPHA) for rule in RULES}
    references = {rule: _quantized(build, reference_relu(rule), mode) for rule in RULES}
    return original, copies, references


def _inputs(model_name: str, seed: int) -> Tuple[np.ndarray, np.ndarray]:
    """A random batch for the model and a random upstream gradient of its output."""
    _, shape, width = MODELS[model_name]
    rng = np.random.default_rng(seed)
    x = rng.normal(size=(5, *shape)).astype(np.float32)
    dy = rng.normal(size=(5, width)).astype(np.float32)
    return x, dy


def _values_by_path(model) -> Dict[str, np.ndarray]:
    return {weight.path: keras.ops.convert_to_numpy(weight.value) for weight in model.weights}


def _same_bits(a, b) -> bool:
    a, b = np.asarray(a), np.asarray(b)
    return a.dtype == b.dtype and a.shape == b.shape and a.tobytes() == b.tobytes()


def _case(model_name: str, mode: str):
    return pytest.param(model_name, mode, id=f"{mode}-{model_name}", marks=_mode_param(mode).marks)


#: (model, quantization mode): float8 on every model; int8 and int4, which Keras' configs already
#: rebuilt in the original order, on one.
CASES = [*(_case(name, "float8") for name in sorted(MODELS)),
         _case("Dense(activation='relu')", "int8"), _case("Dense(activation='relu')", "int4")]


@pytest.mark.parametrize(("model_name", "mode"), CASES)
def test_the_copy_holds_the_originals_weights_path_for_path(model_name, mode):
    original, copies, _ = models(model_name, mode)
    before = _values_by_path(original)
    quantized = [layer for layer in original.layers if _mode_of(layer) == mode]
    assert quantized, "the model has a layer quantized in this mode"
    for rule, copy in copies.items():
        after = _values_by_path(copy)
        assert sorted(after) == sorted(before), rule
        assert all(_same_bits(after[path], before[path]) for path in before), rule
        assert [layer.dtype_policy.name for layer in copy.layers] == [layer.dtype_policy.name for layer in original.layers]


def _forward_and_gradient(model, x, dy, execution: str):
    """(output, gradient reaching x) of ``model``, or (output, the error's text) where Keras cannot
    differentiate it (a float8 layer on an eager tape in Keras 3.15: "too many values to unpack")."""
    y = model(tf.constant(x))
    try:
        _, gradient = wrap_in_mode(lambda a, b: tape_gradient(model, a, b), execution)(tf.constant(x), tf.constant(dy))
    except ValueError as error:      # Keras' own float8 custom gradient, raised by the original as well
        return y, f"ValueError: {error}"
    return y, gradient.numpy()


@pytest.mark.parametrize(("model_name", "mode"), CASES)
@pytest.mark.parametrize("execution", ["eager", "function"])
def test_forward_is_bitwise_the_originals_and_the_gradient_the_rules(model_name, mode, execution):
    original, copies, references = models(model_name, mode)
    x, dy = _inputs(model_name, seed=1)
    y_original, g_original = _forward_and_gradient(original, x, dy, execution)
    for rule in RULES:
        y_copy, g_copy = _forward_and_gradient(copies[rule], x, dy, execution)
        y_reference, g_reference = _forward_and_gradient(references[rule], x, dy, execution)
        assert _same_bits(y_copy, y_original), rule
        assert _same_bits(y_reference, y_original), rule   # the reference is the same quantized model
        if isinstance(g_original, str):                    # Keras cannot differentiate the original here:
            assert g_copy == g_reference == g_original, rule   # nor the copy, nor the reference, alike
            assert mode == "float8" and execution == "eager", g_original
            continue
        np.testing.assert_array_equal(g_copy, g_reference, err_msg=rule)
        if rule != "relu":                                 # the rule is visible: not the plain gradient
            assert not np.array_equal(g_copy, g_original), rule
        else:
            np.testing.assert_array_equal(g_copy, g_original)


# --- what still cannot be copied, in a quantized model -----------------------------------------------

class _ForgetsItsScale(keras.layers.Layer):
    """A layer whose get_config() forgets its argument ``scaled``: rebuilt, it has no weight 'scale'."""

    def __init__(self, scaled=False, **kwargs):
        super().__init__(**kwargs)
        self.scaled = scaled

    def build(self, input_shape):
        self.shift = self.add_weight(name="shift", shape=(input_shape[-1],), initializer="zeros")
        if self.scaled:
            self.scale = self.add_weight(name="scale", shape=(input_shape[-1],), initializer="ones")

    def call(self, x):
        return (x * self.scale if self.scaled else x) + self.shift

    def get_config(self):
        return {"name": self.name}


class _ForgetsItsWidth(keras.layers.Layer):
    """A layer whose get_config() forgets its argument ``width``: rebuilt, its weight has another shape."""

    def __init__(self, width=3, **kwargs):
        super().__init__(**kwargs)
        self.width = width

    def build(self, input_shape):
        self.w = self.add_weight(name="w", shape=(self.width,), initializer="ones")

    def call(self, x):
        return x * keras.ops.sum(self.w)

    def get_config(self):
        return {"name": self.name}


UNDESCRIBED = {
    "a weight missing": (lambda: _ForgetsItsScale(scaled=True, name="forgets"),
                         r"layer 'forgets' \(_ForgetsItsScale\) cannot be copied: rebuilt from its config it has the "
                         r"weights \['shift'\], the original \['scale', 'shift'\], so its get_config\(\) does not "
                         r"describe it\. Give it a get_config\(\) that returns every argument of its __init__\."),
    "a weight of another shape": (lambda: _ForgetsItsWidth(4, name="forgets"),
                                  r"layer 'forgets' \(_ForgetsItsWidth\) cannot be copied: rebuilt from its config it "
                                  r"has weights of shapes \[\(3,\)\], the original \[\(4,\)\], so its get_config\(\) "
                                  r"does not describe it\. Give it a get_config\(\) that returns every argument"),
}


@pytest.mark.parametrize("mode", [param for param in QUANT_MODES if param.values[0] == "float8"])
@pytest.mark.parametrize("case", sorted(UNDESCRIBED))
def test_a_layer_its_config_does_not_describe_is_still_refused_naming_it(case, mode):
    make, message = UNDESCRIBED[case]
    inputs = keras.Input((8,))
    hidden = keras.layers.Dense(8, activation="relu", **_init(8))(inputs)
    model = keras.Model(inputs, make()(hidden), name="outer")
    quantize(model, mode)                             # the Dense is quantized, the layer of yours is not
    assert _mode_of(model.layers[1]) == mode
    with pytest.raises(ValueError, match=message):
        with_relu_gradient(model, "guided")


class _Unnamed(keras.layers.Layer):
    """Two weights created without a name: Keras names them variable_<n>, counted across the process."""

    def build(self, input_shape):
        self.scale = self.add_weight(shape=(input_shape[-1],), initializer=keras.initializers.RandomNormal(seed=9))
        self.shift = self.add_weight(shape=(input_shape[-1],), initializer=keras.initializers.RandomNormal(seed=10))

    def call(self, x):
        return x * self.scale + self.shift


@pytest.mark.parametrize("mode", [_mode_param("float8")])
def test_weights_keras_named_are_matched_in_their_order(mode):
    """The copy's unnamed weights get other made-up names (variable_7 for variable_3): still copied, in order."""
    inputs = keras.Input((8,))
    hidden = keras.layers.Dense(8, activation="relu", **_init(9))(inputs)
    model = keras.Model(inputs, _Unnamed(name="unnamed")(hidden))
    quantize(model, mode)
    copy = with_relu_gradient(model, "deconvnet")
    old, new = model.get_layer("unnamed"), copy.get_layer("unnamed")
    assert [w.path for w in old.weights] != [w.path for w in new.weights]     # the made-up names differ
    assert all(_same_bits(a, b) for a, b in zip(old.get_weights(), new.get_weights()))
    x = _inputs("Dense, ReLU()", seed=2)[0]
    assert _same_bits(copy(x), model(x))
