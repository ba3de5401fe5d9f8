"""with_relu_gradient is never silently plain (issue 30): ReLUs inside layers of yours are replaced or
refused, activations are traced on the shape they really see, each replaced ReLU keeps its dtype
policy whatever the global policy is, a model with no ReLU is refused, and a ReLU layer given as an
activation is replaced.

The models use identity kernels so the rule is visible: on x = [-2, -0.5, 0.5, 2] with upstream
dy = [1, -1, 2, -3], the plain ReLU sends dy · 1[x > 0] = [0, 0, 2, -3] back and the deconvnet rule
max(dy, 0) = [1, 0, 2, 0].
"""
from __future__ import annotations

import keras
import numpy as np
import pytest
import tensorflow as tf

from gradlab.layers import ReLUGradient, ReLUGradientActivation, with_relu_gradient

X_ROW = np.array([[-2.0, -0.5, 0.5, 2.0]], np.float32)
DY_ROW = np.array([[1.0, -1.0, 2.0, -3.0]], np.float32)
PLAIN = [[0.0, 0.0, 2.0, -3.0]]
DECONVNET = [[1.0, 0.0, 2.0, 0.0]]


def _input_gradient(model, x, dy):
    x = tf.constant(x)
    with tf.GradientTape() as tape:
        tape.watch(x)
        y = model(x)
    return tape.gradient(y, x, output_gradients=tf.cast(dy, y.dtype)).numpy()


def _same_bits(a, b) -> bool:
    a, b = np.asarray(a), np.asarray(b)
    return a.dtype == b.dtype and a.shape == b.shape and a.tobytes() == b.tobytes()


def _identity_dense(**kwargs):
    return keras.layers.Dense(4, kernel_initializer="identity", use_bias=False, **kwargs)


# ------------------------------------------------------------------------------------------------
# ReLUs inside a layer of yours: replaced in its sublayers, refused where they cannot be reached
# ------------------------------------------------------------------------------------------------

class _DenseInside(keras.layers.Layer):
    """A Dense(activation="relu") sublayer, created in __init__."""

    def __init__(self, **kwargs):
        super().__init__(**kwargs)
        self.dense = _identity_dense(activation="relu")

    def build(self, input_shape):
        self.dense.build(input_shape)

    def call(self, x):
        return self.dense(x)


class _ReLUInAList(keras.layers.Layer):
    """A keras.layers.ReLU() sublayer held in a list."""

    def __init__(self, **kwargs):
        super().__init__(**kwargs)
        self.steps = [_identity_dense(), keras.layers.ReLU()]

    def call(self, x):
        for step in self.steps:
            x = step(x)
        return x


class _CreatedInBuild(keras.layers.Layer):
    """An Activation("relu") sublayer created in build(), after the copy is rebuilt."""

    def build(self, input_shape):
        self.dense = _identity_dense()
        self.act = keras.layers.Activation("relu")

    def call(self, x):
        return self.act(self.dense(x))


class _ReLUInAnAttribute(keras.layers.Layer):
    """A keras.layers.ReLU() sublayer held in an attribute (the layer is built when it is copied)."""

    def __init__(self, **kwargs):
        super().__init__(**kwargs)
        self.dense = _identity_dense()
        self.relu = keras.layers.ReLU()

    def call(self, x):
        return self.relu(self.dense(x))


class _ReLUCreatedInBuild(keras.layers.Layer):
    """A keras.layers.ReLU() sublayer created in build()."""

    def build(self, input_shape):
        self.dense = _identity_dense()
        self.relu = keras.layers.ReLU()

    def call(self, x):
        return self.relu(self.dense(x))


class _TwoLevels(keras.layers.Layer):
    """A layer of yours inside a layer of yours."""

    def __init__(self, **kwargs):
        super().__init__(**kwargs)
        self.inner = _DenseInside(name="inner")

    def call(self, x):
        return self.inner(x)


class _GradlabInside(keras.layers.Layer):
    """A ReLUGradient("guided") sublayer: the copy gives it the rule asked for."""

    def __init__(self, **kwargs):
        super().__init__(**kwargs)
        self.relu = ReLUGradient("guided")

    def call(self, x):
        return self.relu(x)


INSIDE = {"Dense(relu) sublayer": _DenseInside, "ReLU() in a list": _ReLUInAList,
          "created in build()": _CreatedInBuild, "two levels": _TwoLevels, "ReLUGradient sublayer": _GradlabInside,
          "ReLU() in an attribute": _ReLUInAnAttribute, "ReLU() created in build()": _ReLUCreatedInBuild}


@pytest.mark.parametrize("case", sorted(INSIDE))
def test_a_relu_in_a_sublayer_of_a_layer_of_yours_gets_the_rule(case):
    """Before: neither replaced nor refused; the deconvnet copy gave bitwise the plain gradient."""
    model = keras.Sequential([keras.Input((4,)), INSIDE[case](name="mine")])
    copy = with_relu_gradient(model, "deconvnet")
    assert _same_bits(model(X_ROW), copy(X_ROW))
    if case != "ReLUGradient sublayer":
        np.testing.assert_array_equal(_input_gradient(model, X_ROW, DY_ROW), PLAIN)
    np.testing.assert_array_equal(_input_gradient(copy, X_ROW, DY_ROW), DECONVNET)
    assert copy.get_layer("mine") is copy.layers[0]                          # the name is kept
    np.testing.assert_array_equal(_input_gradient(model, X_ROW, DY_ROW),      # the original untouched
                                  [[0.0, 0.0, 2.0, 0.0]] if case == "ReLUGradient sublayer" else PLAIN)


def test_a_copy_with_replaced_sublayers_refuses_to_be_saved_or_cloned(tmp_path):
    """A layer of yours is rebuilt by its own __init__ on loading: its sublayers would be plain again."""
    model = keras.Sequential([keras.Input((4,)), _DenseInside(name="mine")])
    copy = with_relu_gradient(model, "deconvnet")
    message = r"layer 'mine' \(_DenseInside\) of with_relu_gradient's copy has ReLUs replaced inside it"
    with pytest.raises(ValueError, match=message):
        copy.save(tmp_path / "copy.keras")
    with pytest.raises(ValueError, match=message):
        keras.models.clone_model(copy)
    model.save(tmp_path / "model.keras")                                      # what to do instead
    again = with_relu_gradient(keras.models.load_model(tmp_path / "model.keras", custom_objects={
        "_DenseInside": _DenseInside}), "deconvnet")
    np.testing.assert_array_equal(_input_gradient(again, X_ROW, DY_ROW), DECONVNET)
    back = with_relu_gradient(copy, "relu")                                   # a copy of the copy
    np.testing.assert_array_equal(_input_gradient(back, X_ROW, DY_ROW), PLAIN)


@keras.saving.register_keras_serializable(package="test_relu_trust")
class ActivatedLayer(keras.layers.Layer):
    """A layer of yours whose config records its activation (as Keras' own layers do)."""

    def __init__(self, activation="relu", **kwargs):
        super().__init__(**kwargs)
        self.activation = keras.activations.get(activation)

    def call(self, x):
        return self.activation(x)

    def get_config(self):
        return {**super().get_config(), "activation": keras.activations.serialize(self.activation)}


def test_a_layer_of_yours_whose_config_records_the_rule_saves_and_loads(tmp_path):
    model = keras.Sequential([keras.Input((4,)), ActivatedLayer(name="mine")])
    copy = with_relu_gradient(model, "deconvnet")
    np.testing.assert_array_equal(_input_gradient(copy, X_ROW, DY_ROW), DECONVNET)
    copy.save(tmp_path / "copy.keras")                     # no refusal: its config keeps the rule
    loaded = keras.models.load_model(tmp_path / "copy.keras")
    np.testing.assert_array_equal(_input_gradient(loaded, X_ROW, DY_ROW), DECONVNET)
    assert _same_bits(loaded(X_ROW), model(X_ROW))


class _OpsReLU(keras.layers.Layer):
    def call(self, x):
        return keras.ops.relu(x)


class _TfReLU6(keras.layers.Layer):
    def call(self, x):
        return tf.nn.relu6(x)


class _ReLUInADict(keras.layers.Layer):
    """A ReLU sublayer held where with_relu_gradient does not look (a dict)."""

    def __init__(self, **kwargs):
        super().__init__(**kwargs)
        self.parts = {"act": keras.layers.ReLU()}

    def call(self, x):
        return self.parts["act"](x)


class _ReplacedAndMore(keras.layers.Layer):
    """A sublayer it can replace, and a keras.ops.relu in call() it cannot."""

    def __init__(self, **kwargs):
        super().__init__(**kwargs)
        self.dense = _identity_dense(activation="relu")

    def call(self, x):
        return keras.ops.relu(self.dense(x) - 1.0)


class _OtherRule(keras.layers.Layer):
    """gradlab's ReLU with a fixed rule, created in call()."""

    def call(self, x):
        return ReLUGradientActivation("guided")(x)


HIDDEN = {"keras.ops.relu in call()": _OpsReLU, "tf.nn.relu6 in call()": _TfReLU6,
          "ReLU in a dict": _ReLUInADict, "replaced and more": _ReplacedAndMore,
          "ReLUGradientActivation with another rule": _OtherRule}


@pytest.mark.parametrize("case", sorted(HIDDEN))
def test_a_relu_op_built_in_a_call_of_yours_is_refused_naming_the_layer(case):
    model = keras.Sequential([keras.Input((4,)), _identity_dense(activation="relu"), HIDDEN[case](name="hidden")])
    with pytest.raises(ValueError, match=r"layer 'hidden' \(_\w+\) builds a ReLU op in its call\(\) that it could not "
                                         r"replace \(graph nodes hidden.*\).*put gradlab\.layers\.ReLUGradient\(rule\)"):
        with_relu_gradient(model, "deconvnet")


def test_gradlab_relus_of_the_rule_asked_for_count_as_replaced():
    model = keras.Sequential([keras.Input((4,)), _OtherRule(name="guided_inside")])
    copy = with_relu_gradient(model, "guided")          # no error: its ReLU already follows the rule
    assert _same_bits(model(X_ROW), copy(X_ROW))


class _EagerOnly(keras.layers.Layer):
    """A call() that cannot run in a tf.function (it reads values), with a declared output shape."""

    def call(self, x):
        return x * float(np.asarray(x).max())

    def compute_output_shape(self, input_shape):
        return input_shape


def test_a_layer_of_yours_that_cannot_be_traced_is_refused():
    model = keras.Sequential([keras.Input((4,)), _identity_dense(activation="relu"), _EagerOnly(name="eager")])
    with pytest.raises(ValueError, match=r"layer 'eager' \(_EagerOnly\) cannot be traced on its input .*so "
                                         "with_relu_gradient cannot tell whether it builds a ReLU op"):
        with_relu_gradient(model, "guided")


# ------------------------------------------------------------------------------------------------
# An activation of yours is traced on the shape it sees, not on a fixed [2, 2] matrix
# ------------------------------------------------------------------------------------------------

@keras.saving.register_keras_serializable(package="test_relu_trust")
def rectify_blocks(x):
    """A registered rank-4 activation whose name does not say ReLU, but which builds a Relu op."""
    return tf.nn.depth_to_space(tf.nn.relu(tf.nn.space_to_depth(x, 2)), 2)


@pytest.mark.parametrize("make", [lambda: keras.layers.Conv2D(4, 1, activation=rectify_blocks, name="conv"),
                                  lambda: keras.layers.Activation(rectify_blocks, name="act")],
                         ids=["Conv2D activation", "Activation layer"])
def test_a_rank_4_activation_that_builds_a_relu_is_refused(make):
    """Before: traced on a [2, 2] input, it failed, and was taken for no ReLU (left plain)."""
    layer = make()
    model = keras.Sequential([keras.Input((4, 4, 4)), keras.layers.Conv2D(4, 1, activation="relu"), layer])
    with pytest.raises(ValueError, match=rf"layer '{layer.name}' \({type(layer).__name__}\) has activation=.*"
                                         r"rectify_blocks, which builds a ReLU op"):
        with_relu_gradient(model, "deconvnet")


@keras.saving.register_keras_serializable(package="test_relu_trust")
def through_four(t):
    """A cell activation that runs only on 4 features (not on a [2, 2] matrix), with a ReLU."""
    return tf.nn.relu(tf.matmul(t, tf.eye(4)))


def test_a_cell_activation_whose_shape_is_not_known_is_caught_by_tracing_the_layer():
    """A cell's activation is not traced alone (its input's shape is not known there): the RNN layer
    is traced on its input, and the ReLU op it builds is refused."""
    rnn = keras.layers.SimpleRNN(4, activation=through_four, name="rnn")
    model = keras.Sequential([keras.Input((3, 4)), rnn, keras.layers.Dense(2, activation="relu")])
    with pytest.raises(ValueError, match=r"layer 'rnn' \(SimpleRNN\) builds a ReLU op in its call\(\) that it could "
                                         r"not replace \(graph nodes .*simple_rnn_cell.*/Relu"):
        with_relu_gradient(model, "guided")


@keras.saving.register_keras_serializable(package="test_relu_trust")
def shuffle_blocks(x):
    """A registered rank-4 activation that builds no ReLU op."""
    return tf.nn.depth_to_space(tf.nn.space_to_depth(x, 2), 2)


def test_a_rank_4_activation_without_relu_and_a_nested_model_without_relu_are_copied():
    """Traced on its real shape, an activation without a ReLU is no ReLU; a nested model without one is
    fine when the model has ReLUs elsewhere."""
    keras.utils.set_random_seed(3)
    inner = keras.Sequential([keras.Input((4, 4, 4)), keras.layers.Conv2D(4, 1, activation="tanh")], name="inner")
    inputs = keras.Input((4, 4, 4))
    h = keras.layers.Conv2D(4, 1, activation=shuffle_blocks)(inner(inputs))
    model = keras.Model(inputs, keras.layers.Conv2D(4, 1, activation="relu")(h))
    copy = with_relu_gradient(model, "deconvnet")
    x = np.random.default_rng(3).standard_normal((2, 4, 4, 4)).astype(np.float32)
    assert _same_bits(model(x), copy(x))
    assert isinstance(copy.layers[-1].activation, ReLUGradientActivation)


def test_keras_ops_relu_in_a_functional_model_gets_the_rule():
    """keras.ops.relu called on a Keras tensor is an op of the model, not a layer."""
    inputs = keras.Input((4,))
    model = keras.Model(inputs, keras.ops.relu(_identity_dense()(inputs)))
    copy = with_relu_gradient(model, "deconvnet")
    assert _same_bits(model(X_ROW), copy(X_ROW))
    np.testing.assert_array_equal(_input_gradient(model, X_ROW, DY_ROW), PLAIN)
    np.testing.assert_array_equal(_input_gradient(copy, X_ROW, DY_ROW), DECONVNET)
    six = keras.Model(inputs, keras.ops.relu6(_identity_dense()(inputs)))
    with pytest.raises(ValueError, match=r"\(Relu6\) is a keras\.ops call \(Relu6\), a ReLU variant: gradlab's rules"):
        with_relu_gradient(six, "deconvnet")


# ------------------------------------------------------------------------------------------------
# A plain ReLU layer given as an activation is replaced
# ------------------------------------------------------------------------------------------------

@pytest.mark.parametrize("dtype", [None, "float64"])
def test_a_plain_relu_layer_given_as_activation_is_replaced(dtype, tmp_path):
    """Before: refused as 'a ReLU variant or a ReLU with arguments'. Its dtype policy (the layer casts
    to it) is kept: a float64 ReLU layer in a float32 Dense gives float64, so its replacement is a
    float64 ReLUGradient; one in the Dense's dtype becomes a ReLUGradientActivation."""
    model = keras.Sequential([keras.Input((4,)), keras.layers.Dense(4, activation=keras.layers.ReLU(dtype=dtype),
                                                                    use_bias=False)])
    model.set_weights([np.eye(4, dtype=np.float32)])    # Keras 3.3 cannot load kernel_initializer="identity"
    copy = with_relu_gradient(model, "deconvnet")
    assert isinstance(copy.layers[0].activation, ReLUGradient if dtype else ReLUGradientActivation)
    assert _same_bits(model(X_ROW), copy(X_ROW))
    np.testing.assert_array_equal(_input_gradient(copy, X_ROW, DY_ROW), DECONVNET)
    copy.save(tmp_path / "m.keras")
    loaded = keras.models.load_model(tmp_path / "m.keras")
    assert loaded.layers[0].activation.rule == "deconvnet"
    np.testing.assert_array_equal(_input_gradient(loaded, X_ROW, DY_ROW), DECONVNET)
    assert _same_bits(loaded(X_ROW), model(X_ROW))


# ------------------------------------------------------------------------------------------------
# Each replaced ReLU keeps its dtype policy, whatever the global policy is at copy time
# ------------------------------------------------------------------------------------------------

@pytest.fixture
def global_policy():
    """Sets Keras' global dtype policy in a test; restores float32 after it."""
    yield keras.config.set_dtype_policy
    keras.config.set_dtype_policy("float32")


class _Block(keras.layers.Layer):
    """A layer of yours whose sublayers take the global policy (no dtype given)."""

    def __init__(self, **kwargs):
        super().__init__(**kwargs)
        self.dense = keras.layers.Dense(6, activation="relu")

    def call(self, x):
        return self.dense(x)


def _every_kind_of_relu():
    keras.utils.set_random_seed(0)
    inputs = keras.Input((5,))
    h = keras.layers.ReLU()(keras.layers.Dense(6)(inputs))
    h = keras.layers.Activation("relu")(keras.layers.Dense(6)(h))
    h = keras.layers.Dense(6, activation=keras.layers.ReLU())(h)
    h = keras.ops.relu(keras.layers.Dense(6)(h))
    h = _Block(name="block")(keras.layers.Dense(6, activation="relu")(h))
    return keras.Model(inputs, keras.layers.Dense(3)(h))


POLICIES = [("mixed_float16", "float32"), ("float32", "mixed_float16"), ("mixed_bfloat16", "float32"),
            ("float64", "float32")]


@pytest.mark.parametrize("built_under, copied_under", POLICIES, ids=[f"{a}-copied-under-{b}" for a, b in POLICIES])
def test_each_replaced_relu_keeps_its_dtype_policy(built_under, copied_under, global_policy):
    """Before: mixed_float16 ReLUs copied under float32 returned float32; float32 ReLUs copied under
    mixed_float16 computed in float16 (forward off by 1.7e-3)."""
    global_policy(built_under)
    model = _every_kind_of_relu()
    global_policy(copied_under)
    copy = with_relu_gradient(model, "guided")
    global_policy("float32")
    x = np.random.default_rng(0).standard_normal((4, 5)).astype(np.float32)
    assert _same_bits(model(x), copy(x))
    for layer in model.layers[1:]:
        assert copy.get_layer(layer.name).dtype_policy.name == layer.dtype_policy.name, layer.name
    assert copy.get_layer("block").dense.dtype_policy.name == model.get_layer("block").dense.dtype_policy.name
    computes_in = model.layers[-1].compute_dtype         # the keras.ops.relu op computes in its input's dtype
    assert [layer.compute_dtype for layer in copy.layers if isinstance(layer, ReLUGradient)] == [computes_in] * 3


def test_a_float64_relu_layer_stays_float64():
    """Before: ReLU(dtype="float64") became float32 (output off by about 1e-8)."""
    inputs = keras.Input((4,), dtype="float64")
    model = keras.Model(inputs, keras.layers.ReLU(dtype="float64")(keras.layers.Dense(4, dtype="float64")(inputs)))
    copy = with_relu_gradient(model, "guided")
    x = np.random.default_rng(1).standard_normal((3, 4)) * np.pi
    assert copy.layers[-1].dtype_policy.name == "float64"
    assert _same_bits(model(x), copy(x)) and copy(x).dtype == tf.float64


class _ForgetsItsSublayerDtype(keras.layers.Layer):
    """Its sublayer's dtype is an __init__ argument its config does not record."""

    def __init__(self, inner_dtype=None, **kwargs):
        super().__init__(**kwargs)
        self.dense = keras.layers.Dense(4, activation="relu", dtype=inner_dtype)

    def call(self, x):
        return self.dense(x)

    def get_config(self):
        return {"name": self.name, "trainable": self.trainable}


_SHARED_DENSE = _identity_dense(activation="relu", name="shared_dense")


class _SharesASublayer(keras.layers.Layer):
    """Every instance holds the same Dense (as its attribute ``HELD_AS``): a copy would share it with the original."""

    HELD_AS = "dense"

    def __init__(self, **kwargs):
        super().__init__(**kwargs)
        setattr(self, self.HELD_AS, _SHARED_DENSE)

    def call(self, x):
        return getattr(self, self.HELD_AS)(x)


class _WrapsASharedLayer(_SharesASublayer):
    """A wrapper (its .layer is read like TimeDistributed's) holding the same Dense in every instance."""

    HELD_AS = "layer"


@pytest.mark.parametrize("make", [lambda: _SharesASublayer(name="shares"), lambda: _WrapsASharedLayer(name="shares")],
                         ids=["sublayer", "wrapped layer"])
def test_a_sublayer_shared_with_the_original_is_refused_and_the_original_untouched(make):
    layer = make()
    model = keras.Sequential([keras.Input((4,)), layer])
    with pytest.raises(ValueError, match=rf"layer 'shares' \({type(layer).__name__}\) cannot be copied: rebuilt from its "
                                         r"config it still holds the original's sublayer 'shared_dense' \(Dense\)"):
        with_relu_gradient(model, "deconvnet")
    assert _SHARED_DENSE.activation is keras.activations.relu
    np.testing.assert_array_equal(_input_gradient(model, X_ROW, DY_ROW), PLAIN)


def test_a_layer_whose_rebuilt_sublayers_get_another_policy_is_refused():
    model = keras.Sequential([keras.Input((4,)), _ForgetsItsSublayerDtype("float64", name="forgets")])
    with pytest.raises(ValueError, match=r"layer 'forgets' \(_ForgetsItsSublayerDtype\) cannot be copied: rebuilt "
                                         r"from its config, its sublayer .* has the dtype policy 'float32' where the "
                                         r"original's .* has 'float64'"):
        with_relu_gradient(model, "guided")
