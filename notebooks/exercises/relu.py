"""Self-checks for notebook 05 (ReLU gradients and saliency maps)."""
from __future__ import annotations

import numpy as np
import tensorflow as tf

from exercises._harness import NotYet, gradient_rules, running, self_check, shown
from exercises._i18n import _

__all__ = ["check_exercise_1", "check_exercise_2"]


def _show(values) -> str:
    return shown(values, 3, width=100)


def _where(wrong: np.ndarray, limit: int = 4) -> np.ndarray:
    """Up to ``limit`` of the positions where ``wrong`` holds: the examples a message shows."""
    return np.flatnonzero(wrong)[:limit]


@tf.custom_gradient
def _guided_relu(x):
    return tf.nn.relu(x), lambda dy: tf.nn.relu(dy) * tf.cast(x > 0, dy.dtype)


def _check_exercise_1_case(relu_fn, x, dy, other: str) -> None:
    """One draw of :func:`check_exercise_1`; ``other`` starts the second draw's messages."""
    want = (tf.nn.relu(dy) * tf.cast(x > 0, dy.dtype)).numpy()
    for mode, run in ((_("eagerly"), lambda f: f()), (_("in tf.function"), lambda f: tf.function(f)())):
        def value_and_gradient():
            with tf.GradientTape() as tape:
                tape.watch(x)
                y = tf.convert_to_tensor(relu_fn(x))
            return y, tape.gradient(y, x, output_gradients=dy)
        with running(other + _("{mode}, your function").format(mode=mode)):
            y, sent = run(value_and_gradient)
        relu_x = tf.nn.relu(x).numpy()
        if y.shape != x.shape or not np.array_equal(y.numpy(), relu_x):
            if y.shape != x.shape:
                raise NotYet(other + _("the forward value must be relu(x), of x's shape {shape}; got shape "
                                       "{got}.").format(shape=x.shape, got=y.shape))
            at = _where(y.numpy() != relu_x)
            raise NotYet(other + _("the forward value must be exactly relu(x): at x = {x}\n"
                                   "you return {y}; relu(x) is {relu}.").format(
                x=_show(x.numpy()[at]), y=_show(y.numpy()[at]), relu=_show(relu_x[at])))
        if sent is None:
            raise NotYet(other + _("no gradient reaches x. Did a tf.stop_gradient cut the path?"))
        if sent.shape != x.shape:
            raise NotYet(other + _("x has shape {shape}, but it receives a gradient of shape {got}.").format(
                shape=x.shape, got=sent.shape))
        got = sent.numpy()
        if np.allclose(got, want):
            continue
        plain = (dy * tf.cast(x > 0, dy.dtype)).numpy()
        xs, dys = x.numpy(), dy.numpy()
        if np.array_equal(got, plain):
            hint = _("this is the plain ReLU gradient: where x > 0 it passes dy < 0 too. Guided backprop also\n"
                     "drops the negative upstream gradients: which fn should gradlab.map_gradient(x, fn) "
                     "apply to dy?")
        elif np.allclose(got, np.maximum(dys, 0.0)):
            hint = _("this is the deconvnet rule, relu(dy) everywhere: guided backprop also keeps the ReLU's "
                     "own mask,\nso x receives 0 wherever x <= 0.")
        elif np.allclose(got, dys):
            hint = _("x receives dy unchanged: the ReLU's own backward pass, its mask [x > 0], is bypassed.")
        elif other:
            hint = _("the first inputs passed: is the gradient computed from the x and dy of this pass, or "
                     "fixed\nin advance?")
        else:
            hint = _("guided backprop sends relu(dy) * [x > 0]: dy where both x > 0 and dy > 0, else 0.")
        at = _where(~np.isclose(got, want))
        raise NotYet(other + _("{mode}, the backward pass differs from guided backprop at {count} of {size} "
                               "inputs, for instance\nat x        {x}\nwith dy     {dy}\n"
                               "x receives  {got};\nexpected    {expected}.\nHint: {hint}").format(
            mode=mode, count=int(np.sum(~np.isclose(got, want))), size=got.size, x=_show(xs[at]), dy=_show(dys[at]),
            got=_show(got[at]), expected=_show(want[at]), hint=hint))


@self_check
def check_exercise_1(relu_fn, *, seed: int | None = None) -> str:
    """Checks that ``relu_fn`` is a ReLU forward with the guided-backprop backward pass ``relu(dy) * [x > 0]``.

    Run on seeded random inputs and upstream gradients of both signs, eagerly and in ``tf.function``;
    a second draw (seed 6) refuses an answer that returns the first draw's numbers. With ``seed`` (the
    instructor edition's held-out cases) it tries one draw from it instead, of 150 to 250 inputs.
    """
    draws = ((5, 200, ""), (6, 200, _("on other inputs, ")))
    if seed is not None:
        draws = ((seed, int(np.random.default_rng([5, seed]).integers(150, 251)), ""),)
    for draw, size, other in draws:
        rng = np.random.default_rng(draw)
        x = tf.constant(rng.standard_normal(size).astype(np.float32))
        dy = tf.constant(rng.standard_normal(size).astype(np.float32))
        _check_exercise_1_case(relu_fn, x, dy, other)
    with running(_("tracing your function in a tf.function (to see how its gradient is built)")):
        rules = gradient_rules(relu_fn, x)
    own = [rule for rule in rules if rule.op_type == "IdentityN" and rule.origin
           and not rule.origin.startswith("gradlab")]
    if own:
        raise NotYet(_("the value and the gradient are right, but the guided rule comes from a custom gradient "
                       "of\nyour own (tf.custom_gradient): the exercise asks for it without one, from\n"
                       "gradlab.map_gradient and tf.nn.relu only."))
    return _("ReLU forward, guided backward relu(dy) * [x > 0], eagerly and in tf.function.")


def _saliency(forward, weights, images, labels, relus):
    images = tf.convert_to_tensor(images)
    with tf.GradientTape() as tape:
        tape.watch(images)
        score = tf.reduce_sum(forward(weights, images, relus) * tf.one_hot(labels, 10, dtype=images.dtype))
    return tape.gradient(score, images).numpy()[..., 0]


def _check_exercise_2_case(saliency_fn, images, labels, forward, weights, other: str) -> None:
    """One case of :func:`check_exercise_2`; ``other`` starts the second case's messages."""
    relu = tf.nn.relu
    with running(other + _("your function")):
        got = np.asarray(saliency_fn(tf.constant(images), tf.constant(labels)))
    got = got[..., 0] if got.ndim == 4 else got
    want = _saliency(forward, weights, images, labels, (relu, relu, _guided_relu))
    if got.shape != want.shape:
        raise NotYet(other + _("expected maps of shape {shape}; got {got}.").format(shape=want.shape, got=got.shape))
    plain = _saliency(forward, weights, images, labels, (relu,) * 3)
    full = _saliency(forward, weights, images, labels, (_guided_relu,) * 3)

    def pixel(locate: np.ndarray, other_map: np.ndarray, name: str) -> str:
        """Your map, ``other_map`` and the expected map at the pixel where ``locate`` and the expected differ most."""
        i = np.unravel_index(int(np.argmax(np.abs(locate - want))), want.shape)
        return _("At image {image}, pixel {pixel} your map has {got:.4g}, the {name} map {other:.4g},\n"
                 "and the map with the guided rule in the top ReLU only {want:.4g}.").format(
            image=i[0], pixel=tuple(int(k) for k in i[1:]), got=got[i], name=name, other=other_map[i], want=want[i])

    if np.allclose(got, plain, rtol=1e-5, atol=1e-6):
        raise NotYet(other + _("these are plain-gradient maps: no ReLU got the guided gradient.\n{pixel}\n"
                               "Is top_relu's ReLU created inside an override's with block? Section 3 shows how to "
                               "open one.").format(pixel=pixel(plain, plain, _("plain-gradient"))))
    if np.allclose(got, full, rtol=1e-5, atol=1e-6):
        raise NotYet(other + _("these are full guided-backprop maps: all three ReLUs were overridden.\n{pixel}\n"
                               "Only the ReLU created inside the with block gets the override; wrap just the top "
                               "one.").format(pixel=pixel(full, full, _("full guided"))))
    if not np.allclose(got, want, rtol=1e-5, atol=1e-6):
        hint = (_("The first images passed: are these maps computed from the images and labels your function\n"
                  "receives, or fixed in advance?") if other
                else _("Is the override's rule the guided one, relu(dy) * [x > 0]?"))
        raise NotYet(other + _("the maps are neither plain, nor guided, nor guided-in-the-top-layer-only.\n"
                               "{pixel}\n{hint}").format(pixel=pixel(got, plain, _("plain-gradient")), hint=hint))


def _held_out_images(seed: int, images: np.ndarray, labels: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The held-out cases (the instructor edition's ``seed``): the notebook's images in a drawn order, upside
    down, perhaps mirrored, with drawn noise, and labels drawn from ``seed``."""
    rng = np.random.default_rng(seed)
    held = images[rng.permutation(len(images))][:, ::-1]
    if rng.integers(2):
        held = held[:, :, ::-1]
    held = held + rng.normal(0.0, 0.1 * float(np.std(images)) + 1e-3, held.shape)
    return np.ascontiguousarray(held, images.dtype), rng.integers(0, 10, labels.shape).astype(labels.dtype)


@self_check
def check_exercise_2(saliency_fn, images, labels, forward, weights, *, seed: int | None = None) -> str:
    """Checks ``saliency_fn(images, labels)``: guided backprop in the top (dense) ReLU only, plain elsewhere.

    ``forward(weights, images, relus)`` is the notebook's network; the reference maps are computed
    with a ``tf.custom_gradient`` guided ReLU in the top position only. A second case, the same
    images mirrored left to right with other (seeded) labels, refuses an answer that returns the
    first case's maps. With ``seed`` (the instructor edition's held-out cases) it tries the images
    in a drawn order, upside down, with drawn noise and labels instead.
    """
    images, labels = np.asarray(images), np.asarray(labels)
    if seed is not None:
        images, labels = _held_out_images(seed, images, labels)
    _check_exercise_2_case(saliency_fn, images, labels, forward, weights, "")
    mirrored = np.ascontiguousarray(images[:, :, ::-1])
    others = np.random.default_rng(9).integers(0, 10, labels.shape).astype(labels.dtype)
    _check_exercise_2_case(saliency_fn, mirrored, others, forward, weights,
                           _("on other images (the same ones mirrored, other labels), "))
    with running(_("tracing your saliency function (to find its override)")):
        rules = gradient_rules(saliency_fn, tf.constant(images), tf.constant(labels))
    if not any(rule.op_type == "Relu" for rule in rules):
        raise NotYet(_("the maps are right, but no Relu op in your saliency function carries an override: the\n"
                       "guided gradient comes from somewhere else (a custom gradient?). The exercise asks for\n"
                       "the top ReLU to be built under gradlab.gradient_override."))
    return _("Only the Relu op built inside the override block got the guided gradient:\n"
             "an override map applies to ops *created* in the block, not to every op of the type.")
