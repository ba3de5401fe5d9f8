"""The self-checks of notebook 02 (exercises/straight_through.py) accept the answers and explain mistakes."""
from __future__ import annotations

import itertools

import numpy as np
import pytest
import tensorflow as tf

import gradlab
from exercises.straight_through import _OPS, _other_ops, check_exercise_1, check_exercise_2, quantize


def _gradient_of(fn, x):
    with tf.GradientTape() as tape:
        tape.watch(x)
        y = fn(x)
    return tape.gradient(y, x)


def _right_case(fn, x):
    try:
        gradient = _gradient_of(fn, x)
    except LookupError:
        return "missing"
    return "none" if gradient is None else "flows"


def _starting_point(fn, x):
    _gradient_of(fn, x)
    return "flows"


def _uncaught(fn, x):
    return "none" if _gradient_of(fn, x) is None else "flows"


def _zeros_as_none(fn, x):
    case = _right_case(fn, x)
    if case == "flows" and not tf.reduce_any(_gradient_of(fn, x) != 0):
        return "none"
    return case


def test_exercise_1_accepts_the_three_cases(capsys):
    assert check_exercise_1(_right_case).passed is True
    out = capsys.readouterr().out
    assert out.startswith("Correct!") and "missing" in out and "none" in out


def test_exercise_1_rejects_the_starting_point(refused):
    out = refused(check_exercise_1(_starting_point))
    assert out.startswith("Not yet") and "returns None" in out
    assert "for tf.math.ceil at x = [ 0.3 -1.2  2.   0.5] you return 'flows'" in out


def test_exercise_1_explains_an_uncaught_lookup_error(refused):
    out = refused(check_exercise_1(_uncaught))  # the notebook's starting point
    assert "raised LookupError: gradient registry has no entry for: ResizeArea." in out
    assert "Which of section 2's three cases is that" in out
    assert "catch it" not in out and "say 'missing'" not in out  # no solution


def test_exercise_1_says_zeros_still_flow(refused):
    out = refused(check_exercise_1(_zeros_as_none))
    assert "for tf.sign at x = [ 0.3 -1.2  2.   0.5] you return 'none'" in out
    assert "returns the tensor [0. 0. 0. 0.] for it (all zeros: a zero gradient still flows)" in out


def test_exercise_1_survives_bad_answers(refused):
    assert "ZeroDivisionError" in refused(check_exercise_1(lambda fn, x: 1 / 0))
    assert "one of" in refused(check_exercise_1(lambda fn, x: None))
    assert "one of" in refused(check_exercise_1(lambda fn, x: tf.constant("flows")))
    assert "returned 'Flows'; return exactly one of" in refused(check_exercise_1(lambda fn, x: "Flows"))


def _hard_tanh(t):
    return tf.clip_by_value(t, -1.0, 1.0)


def test_exercise_2_accepts_straight_through_with_the_hard_tanh(accepted):
    assert accepted(check_exercise_2(lambda x: gradlab.straight_through(quantize(x), _hard_tanh(x)))).startswith("Correct!")


def test_exercise_2_accepts_a_custom_gradient(accepted):
    @tf.custom_gradient
    def ste(x):
        return quantize(x), lambda dy: dy * tf.cast(tf.abs(x) <= 1.0, x.dtype)

    assert accepted(check_exercise_2(ste)).startswith("Correct!")


def test_quantize_has_2_to_the_k_levels_within_the_clip():
    grid = tf.constant(np.linspace(-3.0, 3.0, 6001), tf.float32)
    for bits in (1, 2, 3, 4, 5):
        levels = np.unique(quantize(grid, bits).numpy())
        n = 2 ** bits - 1
        assert levels.size == 2 ** bits
        assert levels.min() == -1.0 and levels.max() == 1.0
        np.testing.assert_allclose(levels, (2 * np.arange(n + 1) - n) / n, atol=1e-6)


def test_exercise_2_accepts_the_hard_tanh_trick(accepted):
    # With b = clip(x, -1, 1), b equals f = +-1 on clipped inputs, so f - b = 0 rounds nothing there;
    # inside [-1, 1] this quantizer's trick was exact on every float32 in an exhaustive check (notebook
    # 02's deep dive: its levels end in a 0 bit, so a tie goes back to f). A right answer, if not the
    # one taught.
    trick = lambda x: _hard_tanh(x) + tf.stop_gradient(quantize(x) - _hard_tanh(x))  # noqa: E731
    assert accepted(check_exercise_2(trick)).startswith("Correct!")


def test_exercise_2_counts_the_identity_tricks_lost_values(refused):
    # The starting point: for |x| > 2**24 the 1 in quantize(x) - x is rounded away.
    out = refused(check_exercise_2(lambda x: x + tf.stop_gradient(quantize(x) - x)))
    assert "different numbers (by up to 1)" in out and "zeros of the wrong sign" not in out
    assert "for instance at x = -65553408 you return 0, quantize(x) is -1." in out
    assert "The trick b + tf.stop_gradient(f - b) rounds (see the Deep dive)" in out
    assert "Which technique of\nsection 5 returns f(x) bitwise" in out
    assert "f(x) itself as the value" not in out  # no solution


def test_exercise_2_rejects_the_identity_gradient(refused):
    out = refused(check_exercise_2(tf.grad_pass_through(quantize)))
    assert "hard tanh" in out and "the identity's" in out
    assert "at x = 28275.4258 with dy = 1.11931372, x receives 1.11931372; expected 0." in out


def test_exercise_2_shows_a_wrong_backward_function_with_numbers(refused):
    out = refused(check_exercise_2(lambda x: gradlab.straight_through(quantize(x), tf.tanh(x))))
    assert "the gradient is wrong at 32,491 of 100,000 inputs" in out
    assert "at x = -0.0183191188 with dy = 0.90166688, x receives 0.901364386; expected 0.90166688." in out


def test_exercise_2_catches_a_grad_that_forgets_dy(refused):
    @tf.custom_gradient
    def ste(x):
        return quantize(x), lambda dy: tf.cast(tf.abs(x) <= 1.0, x.dtype)

    out = refused(check_exercise_2(ste))
    assert "multiply by dy" in out and "x receives 1; expected 0.90166688" in out


def test_exercise_2_reports_no_gradient_and_bad_answers(refused):
    assert "no gradient" in refused(check_exercise_2(quantize))  # tf.round's gradient is None
    assert "shape" in refused(check_exercise_2(lambda x: None))
    assert "ZeroDivisionError" in refused(check_exercise_2(lambda x: 1 / 0))


_FIRST_CASES = {name: _right_case(fn, tf.constant(values)) for name, fn, values in _OPS}


def test_exercise_1_refuses_a_lookup_by_op(refused):
    """Issue 39: the first case's answers looked up by the op: the second case's other ops miss the table."""
    table = {fn: _FIRST_CASES[name] for name, fn, values in _OPS}
    out = refused(check_exercise_1(lambda fn, x: table[fn]))
    assert "for tf.unique(x)[0] your function raised KeyError: tf.unique(x)[0]." in out
    assert "does gradient_case look the case up in a table?" in out
    out = refused(check_exercise_1(lambda fn, x: table.get(fn, "flows")))
    assert "for tf.unique(x)[0] at x = [ 1.12  0.42  0.84 -1.64  0.52  1.92] you return 'flows'," in out
    assert "its op registers no gradient at all" in out


def test_exercise_1_refuses_a_lookup_by_call_order(refused):
    """The first case's answers in the order of the calls: the second case's cases come in another order."""
    answers = itertools.cycle([_FIRST_CASES[name] for name, fn, values in _OPS])
    out = refused(check_exercise_1(lambda fn, x: next(answers)))
    assert "for tf.unique(x)[0] at x = [ 1.12  0.42  0.84 -1.64  0.52  1.92] you return 'flows'" in out


def _first_case_of_exercise_2(seed=2):
    """The first case's inputs, upstream gradients and expected gradient, as the check draws them (seed 2)."""
    rng = np.random.default_rng(seed)
    signs = rng.choice(np.array([-1.0, 1.0]), 100_000)
    x = (signs * 10.0 ** rng.uniform(-3.0, 9.0, 100_000)).astype(np.float32)
    dy = rng.uniform(0.5, 2.0, 100_000).astype(np.float32)
    return x, np.where(np.abs(x) <= 1.0, dy, 0.0).astype(np.float32)


def test_exercise_2_refuses_a_hard_coded_answer(refused):
    """Issue 39: the first case's values and gradient, returned whatever x and dy are: the second set refuses them."""
    x, gradient = _first_case_of_exercise_2()
    values, sent = tf.constant(quantize(tf.constant(x)).numpy()), tf.constant(gradient)

    @tf.custom_gradient
    def hard_coded(t):
        return values, lambda upstream: sent
    out = refused(check_exercise_2(hard_coded))
    assert out.startswith("Not yet: on 100,000 other inputs, ") and "bit patterns differ from quantize(x)" in out
    assert "The first 100,000 inputs passed: does your answer compute from the x and dy it receives" in out
    assert "The trick b + tf.stop_gradient" not in out

    @tf.custom_gradient
    def hard_coded_gradient(t):                          # the right value, the first case's gradient
        return quantize(t), lambda upstream: sent
    out = refused(check_exercise_2(hard_coded_gradient))
    assert out.startswith("Not yet: on 100,000 other inputs, the gradient is wrong at ")
    assert "or return numbers fixed in advance?" in out


@pytest.mark.parametrize("seed", [0, 1, 2024])
def test_held_out_cases_decide_as_the_public_ones(seed):
    """The instructor edition's held-out cases (check_exercise_N(..., seed=...)): other inputs, same verdicts."""
    assert check_exercise_1.verdict(_right_case, seed=seed).passed
    for wrong in (_starting_point, _uncaught, _zeros_as_none):
        assert not check_exercise_1.verdict(wrong, seed=seed).passed
    assert check_exercise_2.verdict(lambda x: gradlab.straight_through(quantize(x), _hard_tanh(x)), seed=seed).passed
    assert not check_exercise_2.verdict(lambda x: gradlab.straight_through(quantize(x), x), seed=seed).passed


def test_held_out_cases_refuse_answers_fitted_to_the_public_ones():
    """Answers fitted to the public cases: the cases in the order of the calls, a gradient only for the public x."""
    public = [_right_case(fn, tf.constant(values, tf.float32)) for _, fn, values in _OPS + _other_ops()]
    calls = itertools.count()

    def by_order(fn, x):
        return public[next(calls) % len(public)]
    assert check_exercise_1.verdict(by_order).passed
    assert not check_exercise_1.verdict(by_order, seed=7).passed

    seen = [_first_case_of_exercise_2()[0][:5]] + [_first_case_of_exercise_2(3)[0][:5]]

    @tf.custom_gradient
    def fitted(t):
        known = any(np.array_equal(t.numpy()[:5], x) for x in seen)
        return quantize(t), lambda dy: dy * tf.cast(tf.abs(t) <= 1.0, t.dtype) if known else dy
    assert check_exercise_2.verdict(fitted).passed
    assert "the gradient is dy everywhere" in check_exercise_2.verdict(fitted, seed=7).message
