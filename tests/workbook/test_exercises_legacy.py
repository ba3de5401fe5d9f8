"""The self-checks of notebook 10 (exercises/legacy.py) accept the answers and explain mistakes."""
from __future__ import annotations

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


def test_exercise_1_accepts_the_override_and_tensorflows_own_map(capsys):
    assert check_exercise_1(_overriding(_leaky)).passed is True
    assert capsys.readouterr().out.startswith("Correct!")

    def raw_map(x):
        with tf.compat.v1.get_default_graph().gradient_override_map({"Relu": "TestLegacyLeakyRelu"}):
            return tf.nn.relu(x)
    assert check_exercise_1(raw_map).passed is True


def test_exercise_1_refuses_a_custom_gradient_and_a_stop_gradient_trick(capsys):
    """Both give the leaky gradient behind an exact ReLU, without the override map the exercise asks for."""
    @tf.custom_gradient
    def custom(x):
        return tf.nn.relu(x), lambda dy: dy * tf.where(x > 0, 1.0, 0.1)
    assert check_exercise_1(custom).passed is False
    out = capsys.readouterr().out
    assert "the gradient is right, but no Relu op in your function has its gradient overridden" in out
    assert "it comes from a tf.custom_gradient" in out and "gradlab.gradient_override" in out

    def trick(x):
        leaky = tf.nn.leaky_relu(x, 0.1)
        return leaky + tf.stop_gradient(tf.nn.relu(x) - leaky)
    assert check_exercise_1(trick).passed is False
    assert "a stop_gradient trick?" in capsys.readouterr().out


def test_exercise_1_explains_the_starting_point_and_a_wrong_forward_value(capsys):
    assert check_exercise_1(tf.nn.relu).passed is False                       # the starting point
    out = capsys.readouterr().out
    assert "x receives [0.  0.  0.5 4. ], ReLU's own gradient" in out and "spelled 'Relu'" in out
    assert check_exercise_1(lambda x: tf.nn.leaky_relu(x, 0.1)).passed is False
    assert "forward value must stay relu" in capsys.readouterr().out
    assert check_exercise_1(lambda x: 1 / 0).passed is False
    assert "ZeroDivisionError" in capsys.readouterr().out


def test_exercise_1_names_a_rule_that_ignores_grad_passes_it_unchanged_or_swaps_the_slopes(capsys):
    """tf.gradients runs with grad_ys [2, -3, 0.5, 4], so a rule that ignores grad shows."""
    assert check_exercise_1(_overriding(lambda op, grad: tf.where(op.inputs[0] > 0, 1.0, 0.1))).passed is False
    out = capsys.readouterr().out
    assert "x receives [0.1 0.1 1.  1. ]; expected [ 0.2 -0.3  0.5  4. ]" in out and "Your fn ignores grad" in out
    assert check_exercise_1(_overriding(lambda op, grad: grad)).passed is False
    assert "returns grad unchanged" in capsys.readouterr().out
    assert check_exercise_1(_overriding(lambda op, grad: grad * tf.where(op.inputs[0] > 0, 0.1, 1.0))).passed is False
    assert "slopes are swapped" in capsys.readouterr().out


@tf.RegisterGradient("TestLegacyClip")
def _registered_clip(op, grad):
    return tf.clip_by_value(grad, -0.1, 0.1)


def test_exercise_2_accepts_a_custom_gradient_and_gradlab(capsys):
    assert check_exercise_2(lambda x: gradlab.clip_gradient(x, -0.1, 0.1)).passed is True
    assert capsys.readouterr().out.startswith("Correct!")

    @tf.custom_gradient
    def clip_identity(x):
        return tf.identity(x), lambda dy: tf.clip_by_value(dy, -0.1, 0.1)
    assert check_exercise_2(clip_identity).passed is True


def test_exercise_2_explains_the_ignored_map(capsys):
    def legacy(x):
        with tf.compat.v1.get_default_graph().gradient_override_map({"Identity": "CustomClipGrad"}):
            return tf.identity(x)
    assert check_exercise_2(legacy).passed is False
    out = capsys.readouterr().out
    assert "you send back [ 1.   -0.05 -4.    0.07]" in out and "silently ignored" in out


def test_exercise_2_refuses_the_map_wrapped_in_a_tf_function(capsys):
    """A tape outside the tf.function honours the map: right numbers eagerly, still the legacy route."""
    @tf.function
    def wrapped(x):
        with tf.compat.v1.get_default_graph().gradient_override_map({"Identity": "TestLegacyClip"}):
            return tf.identity(x)
    assert check_exercise_2(wrapped).passed is False
    out = capsys.readouterr().out
    assert "still overrides the gradient of Identity with a map" in out and "Keras' fit" in out


def test_exercise_2_explains_wrong_rules_and_values(capsys):
    assert check_exercise_2(lambda x: gradlab.clip_gradient(x, -0.2, 0.2)).passed is False
    out = capsys.readouterr().out
    assert "you send back [ 0.2  -0.05 -0.2   0.07]" in out and "clip_by_value(dy, -0.1, 0.1) is [ 0.1  -0.05 -0.1   0.07]" in out

    @tf.custom_gradient
    def ignores_dy(x):
        return tf.identity(x), lambda dy: tf.fill(tf.shape(dy), 0.1)
    assert check_exercise_2(ignores_dy).passed is False
    assert "Your grad ignores dy" in capsys.readouterr().out
    assert check_exercise_2(lambda x: gradlab.scale_gradient(x, 0.1)).passed is False
    assert "That scales dy by 0.1" in capsys.readouterr().out
    assert check_exercise_2(lambda x: tf.clip_by_value(x, -0.1, 0.1)).passed is False
    out = capsys.readouterr().out
    assert "forward value" in out and "Clip the gradient, not the value" in out
    assert check_exercise_2(lambda x: x + 1.0).passed is False
    assert "forward value" in capsys.readouterr().out
