"""Higher-order derivatives through every gradlab op: defined, documented results, never a crash.

Every op is a ``tf.custom_gradient`` whose gradient function is built from ordinary,
differentiable TensorFlow ops, so an outer tape differentiates the *modified* first derivative.
For ``y = g(op(x))`` with an elementwise ``g`` (``g = t**3`` here), write ``v = op(x)`` (the
forward value), ``d = g'(v)`` and ``h = g''(v)``. The first derivative is ``R(d)`` where ``R`` is
the op's rule; differentiating it again sends ``R'(d) * h`` back *through the op a second time*,
so the rule applies again::

    map_gradient(fn)        d2 = fn(fn'(d) * h)
    scale_gradient(a)       d2 = a**2 * h           (a applied at each order)
    reverse_gradient(a)     d2 = a**2 * h           (two reversals: the curvature is NOT reversed)
    clip_gradient(lo, hi)   d2 = clip(1[lo <= d <= hi] * h, lo, hi)
    clip_gradient_norm(m)   d2 = clip_by_norm(J(d)^T 1 * h, m), J = Jacobian of clip_by_norm at d
    straight_through(f, b)  d2 = g''(f)             (f = round(x), b = x here)
    surrogate_step(w)       d2 = g''(s) * tri(x)**2 + g'(s) * tri'(x),
                            s = step(x), tri = max(0, 1 - |x|/w), tri' = -sign(x)/w inside (-w, w)

Forward mode (``tf.autodiff.ForwardAccumulator``) is a TensorFlow limitation: it does not use
``tf.custom_gradient``'s gradient in general (asserted below), so forward-over-reverse
Hessian-vector products differ from reverse-over-reverse ones.
"""

from __future__ import annotations

import numpy as np
import pytest
import tensorflow as tf

import gradlab

from helpers import CLIP_MAX, CLIP_MIN, IDENTITY_OP_NAMES, MAX_NORM, REVERSE, SCALE, WIDTH

X = np.array([0.3, -0.7, 1.2, -0.2])  # float64; no ties with the clip bounds or round's halves


def g(t):
    return t**3


def g1(t):
    return 3 * t**2


def g2(t):
    return 6 * t


def tri(x):
    return np.maximum(0.0, 1 - np.abs(x) / WIDTH)


def tri_prime(x):
    return np.where(np.abs(x) < WIDTH, -np.sign(x) / WIDTH, 0.0)


def clip_by_norm(d, m):
    n = np.linalg.norm(d)
    return d if n <= m else d * (m / n)


def clip_by_norm_vjp(d, m, v):
    """J(d)^T v for clip_by_norm at d (J is symmetric)."""
    n = np.linalg.norm(d)
    if n <= m:
        return v
    return (m / n) * (v - d * (d @ v) / n**2)


def step(x):
    return (x > 0).astype(np.float64)


# name: (op, first derivative, second derivative), both as functions of x (NumPy, float64)
CASES = {
    "map_gradient": (
        lambda t: gradlab.map_gradient(t, lambda dy: dy * dy),
        lambda x: g1(x) ** 2,
        lambda x: (2 * g1(x) * g2(x)) ** 2,
    ),
    "scale_gradient": (
        lambda t: gradlab.scale_gradient(t, SCALE),
        lambda x: SCALE * g1(x),
        lambda x: SCALE**2 * g2(x),
    ),
    "clip_gradient": (
        lambda t: gradlab.clip_gradient(t, CLIP_MIN, CLIP_MAX),
        lambda x: np.clip(g1(x), CLIP_MIN, CLIP_MAX),
        lambda x: np.clip(
            ((g1(x) >= CLIP_MIN) & (g1(x) <= CLIP_MAX)) * g2(x), CLIP_MIN, CLIP_MAX
        ),
    ),
    "clip_gradient_norm": (
        lambda t: gradlab.clip_gradient_norm(t, MAX_NORM),
        lambda x: clip_by_norm(g1(x), MAX_NORM),
        lambda x: clip_by_norm(
            clip_by_norm_vjp(g1(x), MAX_NORM, np.ones_like(x)) * g2(x), MAX_NORM
        ),
    ),
    "reverse_gradient": (
        lambda t: gradlab.reverse_gradient(t, REVERSE),
        lambda x: -REVERSE * g1(x),
        lambda x: REVERSE**2 * g2(x),
    ),
    "straight_through": (
        lambda t: gradlab.straight_through(tf.round(t), t),
        lambda x: g1(np.round(x)),
        lambda x: g2(np.round(x)),
    ),
    "surrogate_step": (
        lambda t: gradlab.surrogate_step(t, WIDTH),
        lambda x: g1(step(x)) * tri(x),
        lambda x: g2(step(x)) * tri(x) ** 2 + g1(step(x)) * tri_prime(x),
    ),
}


def nested(op, then=g):
    """``x -> (dy/dx, d(dy/dx)/dx)`` for ``y = then(op(x))``, by two nested tapes (reverse over reverse)."""
    def derivatives(x):
        with tf.GradientTape() as outer:
            outer.watch(x)
            with tf.GradientTape() as inner:
                inner.watch(x)
                y = then(op(x))
            first = inner.gradient(y, x)
        return first, outer.gradient(first, x)

    return derivatives


@pytest.mark.parametrize("name", list(CASES))
def test_second_derivative_applies_the_rule_again(name, run_in_mode):
    op, first_expected, second_expected = CASES[name]
    first, second = run_in_mode(nested(op))(tf.constant(X))
    np.testing.assert_allclose(first.numpy(), first_expected(X), rtol=1e-12, atol=1e-12)
    np.testing.assert_allclose(second.numpy(), second_expected(X), rtol=1e-12, atol=1e-12)


def test_the_documented_formulas_are_not_the_naive_ones():
    """The table is not vacuous: reversal's curvature is +a**2 g'', not -a g''; a clipped second
    derivative is clipped again."""
    _, second = nested(CASES["reverse_gradient"][0])(tf.constant(X))
    assert np.all(np.sign(second.numpy()) == np.sign(g2(X)))
    _, second = nested(CASES["clip_gradient"][0])(tf.constant(X))
    assert np.max(second.numpy()) <= CLIP_MAX and np.min(second.numpy()) >= CLIP_MIN
    assert second.numpy()[0] == CLIP_MAX  # g''(0.3) = 1.8, clipped to 0.5


@pytest.mark.parametrize("name", list(CASES))
def test_second_derivative_of_the_bare_op(name):
    """``y = op(x)`` with a constant upstream: the first derivative does not depend on x, except
    for surrogate_step, whose rule reads x (its second derivative is ``dy * tri'(x)``)."""
    _, second = nested(CASES[name][0], then=lambda y: y)(tf.constant(X))
    if name == "surrogate_step":
        np.testing.assert_allclose(second.numpy(), tri_prime(X), rtol=1e-12)
    else:
        assert second is None  # unconnected: no second-order term at all


JACOBIAN_MODES = {  # (execution mode, vectorised with pfor?)
    "eager-pfor": ("eager", True),
    "eager-while_loop": ("eager", False),
    "function-pfor": ("function", True),
    "xla-pfor": ("xla", True),
}


@pytest.mark.parametrize("name", list(CASES))
@pytest.mark.parametrize("how", list(JACOBIAN_MODES))
def test_full_hessians_by_jacobian_and_batch_jacobian(name, how):
    """``tape.jacobian`` / ``batch_jacobian`` of the first derivative (vectorised with pfor, or a
    while loop) give the whole Hessian, consistent with the table."""
    mode, use_pfor = JACOBIAN_MODES[how]
    op, first_expected, second_expected = CASES[name]

    def hessians(x):  # x: a batch of one row
        with tf.GradientTape(persistent=True) as outer:
            outer.watch(x)
            with tf.GradientTape() as inner:
                inner.watch(x)
                y = g(op(x))
            first = inner.gradient(y, x)
        full = outer.jacobian(first, x, experimental_use_pfor=use_pfor)
        per_row = outer.batch_jacobian(first, x, experimental_use_pfor=use_pfor)
        return first, full, per_row

    run = hessians if mode == "eager" else tf.function(hessians, jit_compile=(mode == "xla"))
    first, full, per_row = run(tf.constant(X[np.newaxis]))
    np.testing.assert_allclose(first.numpy()[0], first_expected(X), rtol=1e-12, atol=1e-12)
    full, per_row = full.numpy()[0, :, 0, :], per_row.numpy()[0]
    if name == "clip_gradient_norm":  # row i: clip_by_norm(J^T e_i * g'', m)
        d, h = g1(X), g2(X)
        expected = np.array(
            [clip_by_norm(clip_by_norm_vjp(d, MAX_NORM, e) * h, MAX_NORM) for e in np.eye(len(X))]
        )
    else:  # elementwise rules: a diagonal Hessian holding the table's second derivative
        expected = np.diag(second_expected(X))
    np.testing.assert_allclose(full, expected, rtol=1e-12, atol=1e-12)
    np.testing.assert_allclose(per_row, expected, rtol=1e-12, atol=1e-12)


# ------------------------------------------------------------------------------------------------
# Forward mode: a TensorFlow limitation, asserted
# ------------------------------------------------------------------------------------------------


def jvp(op, x):
    with tf.autodiff.ForwardAccumulator(x, tf.ones_like(x)) as accumulator:
        y = op(x)
    result = accumulator.jvp(y)
    return tf.zeros_like(x) if result is None else result


@pytest.mark.parametrize("name", IDENTITY_OP_NAMES)
@pytest.mark.parametrize("in_function", [False, True], ids=["eager", "function"])
def test_forward_mode_ignores_the_gradient_of_identity_ops(name, in_function):
    """LIMITATION: ForwardAccumulator differentiates the forward computation (the identity) and
    ignores the custom gradient: the JVP of scale_gradient(x, a) is the tangent, not a * tangent."""
    op = CASES[name][0]
    run = tf.function(lambda x: jvp(op, x)) if in_function else (lambda x: jvp(op, x))
    np.testing.assert_array_equal(run(tf.constant(X)).numpy(), np.ones_like(X))


@pytest.mark.parametrize("name", ["straight_through", "surrogate_step"])
def test_forward_mode_uses_the_custom_gradient_only_eagerly_for_flat_forwards(name):
    """LIMITATION: where the forward computation has no derivative (round, step), eager forward
    mode falls back to the custom gradient, but inside tf.function it gives 0."""
    op = CASES[name][0]
    eager = jvp(op, tf.constant(X)).numpy()
    in_function = tf.function(lambda x: jvp(op, x))(tf.constant(X)).numpy()
    custom = np.ones_like(X) if name == "straight_through" else tri(X)
    np.testing.assert_allclose(eager, custom, rtol=1e-12)
    np.testing.assert_array_equal(in_function, np.zeros_like(X))


def test_forward_over_reverse_differs_from_reverse_over_reverse():
    """LIMITATION: a Hessian-vector product computed forward-over-reverse applies the rule once
    (a * g''), reverse-over-reverse applies it twice (a**2 * g'')."""
    op = CASES["scale_gradient"][0]
    x = tf.constant(X)
    with tf.autodiff.ForwardAccumulator(x, tf.ones_like(x)) as accumulator:
        with tf.GradientTape() as tape:
            tape.watch(x)
            y = g(op(x))
        first = tape.gradient(y, x)
    np.testing.assert_allclose(accumulator.jvp(first).numpy(), SCALE * g2(X), rtol=1e-12)
    _, second = nested(op)(x)
    np.testing.assert_allclose(second.numpy(), SCALE**2 * g2(X), rtol=1e-12)
