"""Self-checks for notebook 03 (custom gradients in Keras 3 models)."""
from __future__ import annotations

import inspect

import keras
import numpy as np
import tensorflow as tf

from exercises._harness import NotYet, first_line, gradient_rules, running, self_check
from exercises._i18n import _

__all__ = ["check_exercise_1", "check_exercise_2"]


def _held_out(seed: int, rows: tuple[int, int]) -> tuple[tf.Tensor, tf.Tensor]:
    """Other inputs and upstream gradients, drawn from ``seed``: 3 features, a number of rows in ``rows``."""
    rng = np.random.default_rng(seed)
    shape = (int(rng.integers(*rows)), 3)
    return (tf.constant(rng.normal(0.0, 2.0, shape).astype(np.float32)),
            tf.constant(rng.normal(0.0, 1.0, shape).astype(np.float32)))


@self_check
def check_exercise_1(build_model, *, seed: int | None = None) -> str:
    """Checks that build_model() returns a Keras model whose output is its input (bitwise) and
    whose gradient with respect to the input is half the upstream gradient.

    A second case, other inputs and upstream gradients, refuses an answer that returns the first
    case's numbers. With ``seed`` (the instructor edition's held-out cases) it tries inputs drawn
    from it instead.
    """
    try:
        with running(_("building the model")):
            model = build_model()
    except NotYet as not_yet:
        if isinstance(not_yet.__cause__, ValueError) and "KerasTensor" in str(not_yet.__cause__):
            raise NotYet(_("building the model raised {error}\n"
                           "A tf.custom_gradient function cannot be called on a keras.Input: where in a model\n"
                           "does it receive real tensors? (section 1)").format(
                error=first_line(not_yet.__cause__, limit=60))) from None
        raise
    if not isinstance(model, keras.Model):
        raise NotYet(_("build_model() should return a keras.Model; it returned {type}.").format(
            type=type(model).__name__))
    rng = np.random.default_rng(3)
    cases = ((tf.constant([[1.0, -2.0, 0.5], [3.0, 0.0, -1.5]]), tf.constant([[1.0, 2.0, -4.0], [0.5, -1.0, 3.0]])),
             (tf.constant(np.round(rng.uniform(-3.0, 3.0, (2, 3)), 2), tf.float32),    # copied numbers fail here
              tf.constant(np.round(rng.uniform(-4.0, 4.0, (2, 3)), 2), tf.float32)))
    if seed is not None:
        cases = (_held_out(seed, (3, 7)),)
    for case, (x, dy) in enumerate(cases):
        other = _("on other inputs, ") if case else ""
        with running(other + _("running the model")):
            with tf.GradientTape() as tape:
                tape.watch(x)
                y = model(x)
            if y.shape != x.shape or not np.array_equal(y.numpy(), x.numpy()):
                raise NotYet(other + _("the model's output should be its input, unchanged; for\n{x}\n"
                                       "it returned\n{y}").format(x=x.numpy(), y=np.asarray(y)))
            grad = tape.gradient(y, x, output_gradients=dy)
        if grad is None:
            raise NotYet(other + _("no gradient reaches the input (tape.gradient returned None)."))
        if grad.shape != x.shape:
            raise NotYet(other + _("the input has shape {shape}, but it receives a gradient of shape {got}.").format(
                shape=tuple(x.shape), got=tuple(grad.shape)))
        if not np.allclose(grad.numpy(), 0.5 * dy.numpy()):
            if case:
                hint = _("The first inputs passed: does the gradient come from the upstream gradient that "
                         "arrives,\nor from numbers fixed in advance?")
            elif np.allclose(grad.numpy(), dy.numpy()):
                hint = _("It arrives unchanged: is halve_gradient actually called in the model?")
            else:
                hint = _("Is halve_gradient the only thing between the input and the output?")
            raise NotYet(other + _("for the upstream gradient\n{dy}\nthe input receives\n{got}\n"
                                   "but it should receive half of it,\n{half}\n").format(
                dy=dy.numpy(), got=grad.numpy(), half=0.5 * dy.numpy()) + hint)
        if not case:
            shown = (dy.numpy()[0], grad.numpy()[0])          # what "Correct!" shows: the first sample
    x = cases[0][0]
    with running(_("tracing the model in a tf.function (to find its custom gradient)")):
        rules = gradient_rules(model, x)
    if not any(rule.op_type == "IdentityN" for rule in rules):
        raise NotYet(_("the output is the input and the gradient is halved, but TensorFlow derived that "
                       "gradient\nfrom ordinary ops (a tf.stop_gradient trick?): the exercise asks for the model "
                       "to call\nthe custom-gradient function halve_gradient inside a layer."))
    return _("The output is the input, and the upstream gradient {dy} (first sample)\n"
             "arrives halved, as {got}.").format(dy=shown[0], got=shown[1])


def _check_exercise_2_case(clipped_backward, x, dy, other: str) -> np.ndarray:
    """One case of :func:`check_exercise_2`; ``other`` starts the second case's messages. Returns the
    expected gradient."""
    expected = np.clip(dy.numpy(), -0.1, 0.1)
    try:
        value, grad = clipped_backward(x)
        value = keras.ops.convert_to_numpy(value)
    except Exception as exc:  # a learner's answer may raise anything; report it, never crash
        try:
            uses_identity = "ops.identity(" in inspect.getsource(clipped_backward)
        except (OSError, TypeError):
            uses_identity = False
        if uses_identity:
            hint = _("\nHint: keras.ops.identity(n) builds an n x n identity matrix from an integer n; it "
                     "does not\nreturn its input. Section 2 names the keras.ops function that does.")
        elif "unpack" in str(exc):
            hint = _("\nHint: return two things, the value and the function grad.")
        else:
            hint = ""
        # TensorFlow's kernel errors start with a long node name: the first 80 characters say enough.
        raise NotYet(other + _("clipped_backward(x) raised {error}").format(error=first_line(exc, limit=80))
                     + hint) from exc
    if value.shape != tuple(x.shape) or not np.array_equal(value, x.numpy()):
        raise NotYet(other + _("the forward value should be x unchanged, {x}; got {value}.").format(
            x=x.numpy(), value=value))
    conventions = ((_("grad(upstream), as TensorFlow and JAX call it"), lambda: grad(dy)),
                   (_("grad(x, upstream=upstream), as PyTorch calls it"), lambda: grad(x, upstream=dy)))
    for convention, call in conventions:
        with running(other + convention,
                     hint=_("\nHint: PyTorch passes the inputs first and upstream as a keyword; section 2 shows\n"
                            "one grad that accepts both calls.")):
            result = keras.ops.convert_to_numpy(call())
        if result.shape == expected.shape and np.allclose(result, expected):
            continue
        if result.shape == expected.shape and np.allclose(result, np.clip(x.numpy(), -0.1, 0.1)):
            hint = _("you clipped x, the first positional argument of PyTorch's call: when upstream is "
                     "given\nas a keyword, clip that.")
        elif result.shape == expected.shape and np.allclose(result, dy.numpy()):
            hint = _("grad returns the upstream gradient unchanged: clip it to [-0.1, 0.1].")
        elif other:
            hint = _("the first inputs passed: does grad clip the upstream gradient it receives, or return\n"
                     "numbers fixed in advance?")
        else:
            hint = _("grad must clip the upstream gradient elementwise to [-0.1, 0.1] (keras.ops.clip).")
        raise NotYet(other + _("{convention}, returned {result} for upstream {dy};\n"
                               "expected clip(upstream, -0.1, 0.1) = {expected}.\nHint: {hint}").format(
            convention=convention, result=result, dy=dy.numpy(), expected=expected, hint=hint))
    with running(other + _("building a Keras model around your function")):
        inputs = keras.Input(shape=(3,))
        model = keras.Model(inputs, keras.layers.Lambda(keras.ops.custom_gradient(clipped_backward))(inputs))
    with running(other + _("inside a Keras model your function")):
        with tf.GradientTape() as tape:
            tape.watch(x)
            y = model(x)
        g = tape.gradient(y, x, output_gradients=dy)
    g = None if g is None else g.numpy()
    if g is None or not (np.array_equal(y.numpy(), x.numpy()) and np.allclose(g, expected)):
        raise NotYet(other + _("in a Keras model the output is {y} and the gradient {g};\n"
                               "expected the output x = {x} and the gradient {expected}.").format(
            y=y.numpy(), g=g, x=x.numpy(), expected=expected))
    return expected


@self_check
def check_exercise_2(clipped_backward, *, seed: int | None = None) -> str:
    """Checks a keras.ops.custom_gradient body: forward x, backward clip(upstream, -0.1, 0.1),
    with a grad function that accepts both grad(upstream) and grad(*args, upstream=...).

    A second case, other inputs and upstream gradients, refuses an answer that returns the first
    case's numbers. With ``seed`` (the instructor edition's held-out cases) it tries inputs drawn
    from it instead.
    """
    if seed is not None:
        x, dy = _held_out(seed, (2, 5))
        dy = tf.tensor_scatter_nd_update(0.3 * dy, [[0, 0], [0, 1]], [0.04, -0.5])   # one inside the clip, one out
        expected = _check_exercise_2_case(clipped_backward, x, dy, "")
        return _("Both calling conventions return {expected}, and inside a Keras model the\n"
                 "output is x and the gradient is the clipped upstream gradient.").format(expected=expected)
    expected = _check_exercise_2_case(clipped_backward, tf.constant([[0.3, -1.2, 2.0]]),
                                      tf.constant([[0.05, -0.4, 2.0]]), "")
    rng = np.random.default_rng(6)                                      # copied numbers fail here
    _check_exercise_2_case(clipped_backward, tf.constant(np.round(rng.uniform(-2.0, 2.0, (1, 3)), 2), tf.float32),
                           tf.constant(np.round(rng.uniform(-0.3, 0.3, (1, 3)), 2), tf.float32), _("on other inputs, "))
    return _("Both calling conventions return {expected}, and inside a Keras model the\n"
             "output is x and the gradient is the clipped upstream gradient.").format(expected=expected)
