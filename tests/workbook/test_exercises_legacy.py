"""The self-checks of notebook 10 (exercises/legacy.py) accept the answers and explain mistakes."""
from __future__ import annotations

import pytest
import tensorflow as tf

import gradlab
from exercises.legacy import check_exercise_1, check_exercise_2


def _leaky(op, grad):
    return grad * tf.where(op.inputs[0] > 0, 1.0, 0.1)


def _overriding(rule):
    """A ReLU created inside gradlab.gradient_override({"Relu": rule})."""
    def answer(x):
        with gradlab.gradient_override({"Relu": rule}):
            return tf.nn.relu(x)
    return answer


@tf.RegisterGradient("TestLegacyLeakyRelu")
def _registered_leaky(op, grad):
    return _leaky(op, grad)


def test_exercise_1_accepts_the_override_and_tensorflows_own_map(accepted):
    assert accepted(check_exercise_1(_overriding(_leaky))).startswith("Correct!")

    def raw_map(x):
        with tf.compat.v1.get_default_graph().gradient_override_map({"Relu": "TestLegacyLeakyRelu"}):
            return tf.nn.relu(x)
    assert check_exercise_1(raw_map).passed is True


def test_exercise_1_refuses_a_custom_gradient_and_a_stop_gradient_trick(refused):
    """Both give the leaky gradient behind an exact ReLU, without the override map the exercise asks for."""
    @tf.custom_gradient
    def custom(x):
        return tf.nn.relu(x), lambda dy: dy * tf.where(x > 0, 1.0, 0.1)
    out = refused(check_exercise_1(custom))
    assert "the gradient is right, but no Relu op in your function has its gradient overridden" in out
    assert "it comes from a tf.custom_gradient" in out and "gradlab.gradient_override" in out

    def trick(x):
        leaky = tf.nn.leaky_relu(x, 0.1)
        return leaky + tf.stop_gradient(tf.nn.relu(x) - leaky)
    assert "a stop_gradient trick?" in refused(check_exercise_1(trick))


def test_exercise_1_explains_the_starting_point_and_a_wrong_forward_value(refused):
    out = refused(check_exercise_1(tf.nn.relu))  # the starting point
    assert "x receives [0.  0.  0.5 4. ], ReLU's own gradient" in out and "spelled 'Relu'" in out
    assert "forward value must stay relu" in refused(check_exercise_1(lambda x: tf.nn.leaky_relu(x, 0.1)))
    assert "ZeroDivisionError" in refused(check_exercise_1(lambda x: 1 / 0))


def test_exercise_1_names_a_rule_that_ignores_grad_passes_it_unchanged_or_swaps_the_slopes(refused):
    """tf.gradients runs with grad_ys [2, -3, 0.5, 4], so a rule that ignores grad shows."""
    out = refused(check_exercise_1(_overriding(lambda op, grad: tf.where(op.inputs[0] > 0, 1.0, 0.1))))
    assert "x receives [0.1 0.1 1.  1. ]; expected [ 0.2 -0.3  0.5  4. ]" in out and "Your fn ignores grad" in out
    assert "returns grad unchanged" in refused(check_exercise_1(_overriding(lambda op, grad: grad)))
    assert "slopes are swapped" in refused(
        check_exercise_1(_overriding(lambda op, grad: grad * tf.where(op.inputs[0] > 0, 0.1, 1.0)))
    )


@tf.RegisterGradient("TestLegacyClip")
def _registered_clip(op, grad):
    return tf.clip_by_value(grad, -0.1, 0.1)


def test_exercise_2_accepts_a_custom_gradient_and_gradlab(accepted):
    assert accepted(check_exercise_2(lambda x: gradlab.clip_gradient(x, -0.1, 0.1))).startswith("Correct!")

    @tf.custom_gradient
    def clip_identity(x):
        return tf.identity(x), lambda dy: tf.clip_by_value(dy, -0.1, 0.1)
    assert check_exercise_2(clip_identity).passed is True


def _identity_mapped_to(gradient_name):
    """An answer to exercise 2: tf.identity whose gradient the legacy override map sends to ``gradient_name``."""
    def legacy(x):
        with tf.compat.v1.get_default_graph().gradient_override_map({"Identity": gradient_name}):
            return tf.identity(x)
    return legacy


def test_exercise_2_explains_the_ignored_map(refused):
    out = refused(check_exercise_2(_identity_mapped_to("CustomClipGrad")))
    assert "you send back [ 1.   -0.05 -4.    0.07]" in out and "silently ignored" in out
    assert "Section 6 lists a replacement for each legacy recipe" in out
    assert "tf.custom_gradient or gradlab" not in out  # no solution


def test_exercise_2_refuses_the_map_wrapped_in_a_tf_function(refused):
    """A tape outside the tf.function honours the map: right numbers eagerly, still the legacy route."""
    out = refused(check_exercise_2(tf.function(_identity_mapped_to("TestLegacyClip"))))
    assert "still overrides the gradient of Identity with a map" in out and "Keras' fit" in out


def test_exercise_2_explains_wrong_rules_and_values(refused):
    out = refused(check_exercise_2(lambda x: gradlab.clip_gradient(x, -0.2, 0.2)))
    assert "you send back [ 0.2  -0.05 -0.2   0.07]" in out and "clip_by_value(dy, -0.1, 0.1) is [ 0.1  -0.05 -0.1   0.07]" in out

    @tf.custom_gradient
    def ignores_dy(x):
        return tf.identity(x), lambda dy: tf.fill(tf.shape(dy), 0.1)
    assert "Your grad ignores dy" in refused(check_exercise_2(ignores_dy))
    assert "That scales dy by 0.1" in refused(check_exercise_2(lambda x: gradlab.scale_gradient(x, 0.1)))
    out = refused(check_exercise_2(lambda x: tf.clip_by_value(x, -0.1, 0.1)))
    assert "forward value" in out and "Clip the gradient, not the value" in out
    assert "forward value" in refused(check_exercise_2(lambda x: x + 1.0))


def test_exercise_1_refuses_a_hard_coded_gradient(refused):
    """The first case's gradient, sent whatever the upstream gradient: the second case refuses it."""
    out = refused(check_exercise_1(_overriding(lambda op, grad: tf.constant([0.2, -0.3, 0.5, 4.0]))))
    assert out.startswith("Not yet")


def test_exercise_2_refuses_a_hard_coded_gradient(refused):
    @tf.custom_gradient
    def hard_coded(x):
        return tf.identity(x), lambda dy: tf.constant([0.1, -0.05, -0.1, 0.07])
    out = refused(check_exercise_2(hard_coded))
    assert out.startswith("Not yet")


@pytest.mark.parametrize("seed", [0, 1, 2024])
def test_held_out_cases_decide_as_the_public_ones(seed):
    """The instructor edition's held-out cases (check_exercise_N(..., seed=...)): other inputs, same verdicts."""
    assert check_exercise_1.verdict(_overriding(_leaky), seed=seed).passed
    for wrong in (lambda op, grad: tf.where(op.inputs[0] > 0, 1.0, 0.1), lambda op, grad: grad,
                  lambda op, grad: grad * tf.where(op.inputs[0] > 0, 0.1, 1.0)):
        assert not check_exercise_1.verdict(_overriding(wrong), seed=seed).passed
    assert not check_exercise_1.verdict(tf.nn.relu, seed=seed).passed
    assert check_exercise_2.verdict(lambda x: gradlab.clip_gradient(x, -0.1, 0.1), seed=seed).passed
    for wrong in (_identity_mapped_to("CustomClipGrad"), lambda x: gradlab.clip_gradient(x, -0.2, 0.2),
                  lambda x: gradlab.scale_gradient(x, 0.1), tf.function(_identity_mapped_to("TestLegacyClip"))):
        assert not check_exercise_2.verdict(wrong, seed=seed).passed


def test_held_out_cases_refuse_answers_fitted_to_the_public_ones():
    """Fitted to the public cases (4 and 5 inputs): the right rule there, another elsewhere."""
    def fitted_1(op, grad):
        return _leaky(op, grad) if op.inputs[0].shape[0] in (4, 5) else grad
    assert check_exercise_1.verdict(_overriding(fitted_1)).passed
    assert "Your fn returns grad unchanged" in check_exercise_1.verdict(_overriding(fitted_1), seed=7).message

    @tf.custom_gradient
    def fitted_2(x):
        return tf.identity(x), lambda dy: tf.clip_by_value(dy, -0.1, 0.1) if x.shape[0] in (4, 5) else 0.1 * dy
    assert check_exercise_2.verdict(fitted_2).passed
    assert "That scales dy by 0.1" in check_exercise_2.verdict(fitted_2, seed=7).message
