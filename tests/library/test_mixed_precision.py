"""gradlab under Keras mixed precision: ``mixed_float16`` and ``mixed_bfloat16``.

Under a mixed policy a layer computes in float16/bfloat16 while its variables stay float32. The
ops keep the dtype they are given, so the gradient that flows through a gradlab op or layer is in
the compute dtype, and the gradients of the (float32) variables are float32.

One interaction needs care and is asserted here: with ``mixed_float16`` Keras wraps the optimizer
in a ``LossScaleOptimizer``, which multiplies the loss by a scale ``S`` (32768 at first) before
differentiating and divides the variables' gradients by ``S`` afterwards. Every gradient *inside*
the backward pass is therefore ``S`` times too large. Linear rules (scale, reverse, surrogate,
straight-through) commute with that scaling; clipping does not: ``ClipGradient(lo, hi)`` clips
``S * dy`` to ``[lo, hi]``, which after unscaling is ``[lo / S, hi / S]``. The fix shown here
multiplies the bounds by the optimizer's current scale; ``mixed_bfloat16`` needs no loss scaling.
"""

from __future__ import annotations

import keras
import numpy as np
import pytest
import tensorflow as tf

import gradlab
from gradlab import layers

from helpers import OP_NAMES, ApplyOp, Shift, op_cases

X = np.array([[0.3, -1.75, 2.2], [-0.4, 0.6, 1e-3]], np.float32)
#: Upstream gradient (L2 norm about 0.6), small enough that the first loss scale times the
#: largest batch sum of a rule, 32768 * 2 * (0.25 + 0.3125), does not overflow float16 (65504):
#: otherwise the LossScaleOptimizer skips the step (as designed) and halves the scale.
DY = np.array([[0.25, -0.375, 0.05], [0.3125, -0.2, 0.125]], np.float32)

#: (rtol, atol) of a gradient computed in the compute dtype against the float64 definition.
TOLERANCE = {"float16": (2e-3, 2e-3), "bfloat16": (1.6e-2, 1.6e-2)}

LAYER_RULES = {
    "ScaleGradient": (lambda: layers.ScaleGradient(0.5), lambda dy: 0.5 * dy),
    "ClipGradient": (lambda: layers.ClipGradient(-0.1, 0.2), lambda dy: np.clip(dy, -0.1, 0.2)),
    "ClipGradientNorm": (
        lambda: layers.ClipGradientNorm(0.25),
        lambda dy: dy * min(1.0, 0.25 / np.linalg.norm(dy)),
    ),
    "GradientReversal": (lambda: layers.GradientReversal(2.0), lambda dy: -2.0 * dy),
}


@pytest.fixture(params=["mixed_float16", "mixed_bfloat16"])
def policy(request):
    """Sets Keras' global dtype policy for one test and restores the previous one afterwards."""
    previous = keras.mixed_precision.global_policy()
    keras.mixed_precision.set_global_policy(request.param)
    try:
        yield keras.mixed_precision.global_policy()
    finally:
        keras.mixed_precision.set_global_policy(previous)


@pytest.fixture(autouse=True)
def _policy_is_restored():
    before = keras.mixed_precision.global_policy().name
    yield
    assert keras.mixed_precision.global_policy().name == before


def layer_gradients(layer, x, dy):
    """The layer's output and the gradient with respect to its input."""
    x = tf.constant(x)
    with tf.GradientTape() as tape:
        tape.watch(x)
        y = layer(x)
    return y, tape.gradient(y, x, output_gradients=tf.cast(dy, y.dtype))


def test_every_op_in_a_mixed_precision_layer(op_case, policy, assert_bitwise):
    compute = policy.compute_dtype
    layer = ApplyOp(op_case.apply)
    assert layer.compute_dtype == compute and layer.variable_dtype == "float32"
    # A float32 input is cast to the compute dtype by Keras: the op runs in float16/bfloat16.
    x_low = tf.cast(X, compute).numpy()
    y, grad = layer_gradients(layer, x_low, DY)
    assert y.dtype == compute and grad.dtype == compute
    expected_y = x_low if op_case.identity else op_case.apply(tf.constant(x_low)).numpy()
    assert_bitwise(y, expected_y)
    dy_low = tf.cast(DY, compute).numpy().astype(np.float64)
    rtol, atol = TOLERANCE[compute]
    np.testing.assert_allclose(
        grad.numpy().astype(np.float64),
        op_case.gradient(x_low.astype(np.float64), dy_low),
        rtol=rtol,
        atol=atol,
    )
    # From a float32 input, the gradient comes back float32 (through Keras' autocast).
    y32, grad32 = layer_gradients(layer, X, DY)
    assert y32.dtype == compute and grad32.dtype == tf.float32


@pytest.mark.parametrize("name", list(LAYER_RULES))
def test_every_layer_under_a_mixed_policy(name, policy, assert_bitwise):
    make, rule = LAYER_RULES[name]
    compute = policy.compute_dtype
    layer = make()
    x_low = tf.cast(X, compute).numpy()
    y, grad = layer_gradients(layer, x_low, DY)
    assert y.dtype == compute and grad.dtype == compute
    assert_bitwise(y, x_low)
    rtol, atol = TOLERANCE[compute]
    dy_low = tf.cast(DY, compute).numpy().astype(np.float64)
    np.testing.assert_allclose(grad.numpy().astype(np.float64), rule(dy_low), rtol=rtol, atol=atol)


# ------------------------------------------------------------------------------------------------
# fit() under a mixed policy: one SGD step of a trainable shift in front of the layer
# ------------------------------------------------------------------------------------------------


def dot_loss(y_true, y_pred):
    return tf.reduce_sum(tf.cast(y_true, "float32") * tf.cast(y_pred, "float32"), axis=-1)


def _op_subject(name):
    case = op_cases()[name]
    homogeneous = name not in ("clip_gradient", "clip_gradient_norm", "map_gradient")
    return (lambda: ApplyOp(case.apply)), case.gradient, homogeneous


def _layer_subject(name):
    make, rule = LAYER_RULES[name]
    return make, (lambda x, dy: rule(dy)), name in ("ScaleGradient", "GradientReversal")


#: Every subject: name -> (layer factory, rule(x, dy) by definition, positively homogeneous?).
#: A rule r with r(S * dy) = S * r(dy) for S > 0 is unaffected by loss scaling; clipping is not.
SUBJECTS = {
    **{f"op:{name}": _op_subject(name) for name in OP_NAMES},
    **{name: _layer_subject(name) for name in LAYER_RULES},
}


def one_step_updates(policy_name, names):
    """One fit step (SGD, lr 1) of a model with one branch ``subject(x + b_i)`` per subject under
    the policy; returns {name: -(change of b_i)} (the summed gradient reaching b_i) and the model."""
    previous = keras.mixed_precision.global_policy()
    keras.mixed_precision.set_global_policy(policy_name)
    try:
        inputs = keras.Input((3,))
        shifts = [Shift(name=f"shift_{i}") for i in range(len(names))]
        outputs = [SUBJECTS[n][0]()(shift(inputs)) for n, shift in zip(names, shifts)]
        model = keras.Model(inputs, outputs)
        model.compile(keras.optimizers.SGD(1.0), loss=[dot_loss] * len(names))
        model.fit(X, [len(X) * DY] * len(names), batch_size=len(X), epochs=1, shuffle=False,
                  verbose=0)
    finally:
        keras.mixed_precision.set_global_policy(previous)
    assert all(shift.b.dtype == "float32" for shift in shifts)  # variables stay float32
    return {n: -shift.b.numpy() for n, shift in zip(names, shifts)}, model


def expected_update(name, dtype, scale=1.0):
    """The rule on the upstream gradient as the layer sees it (scale * DY, rounded to dtype),
    in true gradient units (divided by the scale again), summed over the batch."""
    _, rule, _ = SUBJECTS[name]
    x = tf.cast(X, dtype).numpy().astype(np.float64)
    dy = tf.cast(scale * DY, dtype).numpy().astype(np.float64)
    return rule(x, dy).sum(axis=0) / scale


def test_fit_with_mixed_bfloat16_matches_the_definition():
    """No loss scaling under mixed_bfloat16: every rule means what it says."""
    updates, model = one_step_updates("mixed_bfloat16", list(SUBJECTS))
    assert not isinstance(model.optimizer, keras.optimizers.LossScaleOptimizer)
    expected = {name: expected_update(name, "bfloat16") for name in updates}
    # bfloat16 keeps 8 bits: 2 % of each update, plus 2 % of the largest one for elements near 0
    # (relative, so a wrong sign or a zero update fails whatever the size of the gradients).
    failures = {
        name: (update, expected[name])
        for name, update in updates.items()
        if not np.allclose(update, expected[name], rtol=2e-2, atol=2e-2 * np.abs(expected[name]).max())
    }
    assert not failures, failures


def test_fit_with_mixed_float16_homogeneous_rules_ignore_loss_scaling_clips_do_not():
    """LIMITATION (loss scaling, by design): a clipping rule sees ``S * dy``, not ``dy``: after
    unscaling it clipped to ``[lo / S, hi / S]`` (or a norm of ``max_norm / S``)."""
    names = [n for n in SUBJECTS if n != "op:map_gradient"]  # see the next test
    updates, model = one_step_updates("mixed_float16", names)
    assert isinstance(model.optimizer, keras.optimizers.LossScaleOptimizer)
    scale = float(model.optimizer.initial_scale)  # the scale of the first step
    assert scale == 32768.0
    for name in names:
        homogeneous = SUBJECTS[name][2]
        intended = expected_update(name, "float16")
        if homogeneous:
            np.testing.assert_allclose(updates[name], intended, rtol=2e-3, atol=2e-3, err_msg=name)
        else:
            seen = expected_update(name, "float16", scale)  # what the rule did, in true units
            np.testing.assert_allclose(updates[name], seen, rtol=2e-3, atol=1e-9, err_msg=name)
            assert np.max(np.abs(updates[name] - intended)) > 0.05, name  # far from the meaning


def test_fit_with_mixed_float16_a_squaring_map_gradient_overflows_and_the_step_is_skipped():
    """LIMITATION (loss scaling): map_gradient(x, lambda dy: dy * dy) sees S * dy, squares it to
    S**2 * dy**2, which overflows float16; the LossScaleOptimizer then skips the step (b stays
    0) and halves its scale, as it does for any overflow."""
    updates, model = one_step_updates("mixed_float16", ["op:map_gradient"])
    np.testing.assert_array_equal(updates["op:map_gradient"], np.zeros(3, np.float32))
    assert float(model.optimizer.dynamic_scale.numpy()) == 32768.0 / 2


class LossScaledClip(keras.layers.Layer):
    """The fix: bounds in true gradient units, multiplied by the optimizer's current loss scale."""

    def __init__(self, clip_min, clip_max, **kwargs):
        super().__init__(**kwargs)
        self.clip_min, self.clip_max = clip_min, clip_max
        self.optimizer = None  # set after compile()

    def call(self, inputs):
        opt = self.optimizer
        if opt is None or not isinstance(opt, keras.optimizers.LossScaleOptimizer):
            return gradlab.clip_gradient(inputs, self.clip_min, self.clip_max)
        scale = opt.dynamic_scale if opt.built else opt.initial_scale  # as opt.scale_loss does
        scale = tf.cast(scale, tf.float32)
        return gradlab.clip_gradient(inputs, self.clip_min * scale, self.clip_max * scale)

    def compute_output_shape(self, input_shape):
        return input_shape


def test_scaling_the_bounds_by_the_loss_scale_restores_the_meaning():
    previous = keras.mixed_precision.global_policy()
    keras.mixed_precision.set_global_policy("mixed_float16")
    try:
        layer = LossScaledClip(-0.1, 0.2)
        shift = Shift()
        model = keras.Sequential([keras.Input((3,)), shift, layer])
        model.compile(keras.optimizers.SGD(1.0), loss=dot_loss)
        layer.optimizer = model.optimizer
        model.fit(X, len(X) * DY, batch_size=len(X), epochs=1, shuffle=False, verbose=0)
    finally:
        keras.mixed_precision.set_global_policy(previous)
    dy16 = DY.astype(np.float16).astype(np.float64)
    np.testing.assert_allclose(
        -shift.b.numpy(), np.clip(dy16, -0.1, 0.2).sum(axis=0), rtol=2e-3, atol=2e-3
    )
