"""The self-checks of notebook 09 (exercises/performance.py) accept the answers and explain mistakes."""
from __future__ import annotations

import numpy as np
import pytest
import tensorflow as tf

import gradlab
from exercises.performance import check_exercise_1, check_exercise_2, quantize_numpy


def _per_round(log, technique, baseline="none", warm_up=False):
    by_round = {}
    for record in log:
        if warm_up or record["round"] >= 1:
            by_round.setdefault(record["round"], {})[record["technique"]] = record["seconds"]
    return [r[technique] / r[baseline] for r in by_round.values()]


def _fair(log, technique, baseline="none"):
    return float(np.median(_per_round(log, technique, baseline)))


def test_exercise_1_accepts_the_paired_median(accepted):
    assert accepted(check_exercise_1(_fair)).startswith("Correct!")


def test_exercise_1_explains_the_starting_point_with_both_numbers(refused):
    def mean_ratio(log, technique, baseline="none"):            # the starting point
        def mean(name):
            return np.mean([r["seconds"] for r in log if r["technique"] == name])
        return mean(technique) / mean(baseline)
    out = refused(check_exercise_1(mean_ratio))
    assert 'fair_ratio(log, "scale") is 0.4092' in out and "scale / none is 1.0315" in out and "warm-up" in out


def test_exercise_1_names_each_unfair_summary(refused):
    def unpaired(log, technique, baseline="none"):              # warm-up out, but not paired
        def median(name):
            return np.median([r["seconds"] for r in log if r["technique"] == name and r["round"] >= 1])
        return median(technique) / median(baseline)
    assert "Divide within each round" in refused(check_exercise_1(unpaired))
    out = refused(check_exercise_1(lambda log, technique: float(np.mean(_per_round(log, technique)))))
    assert "is 1.0333" in out and "mean of the per-round ratios" in out
    out = refused(check_exercise_1(lambda log, technique: float(np.median(_per_round(log, technique, warm_up=True)))))
    assert "is 1.0292" in out and "includes the warm-up" in out
    out = refused(check_exercise_1(lambda log, technique: 1.0 / _fair(log, technique)))
    assert "is 0.9694" in out and "upside down" in out


def test_exercise_1_refuses_a_fixed_technique_name(refused):
    """The second log's technique is "clip": an answer must use its technique argument."""
    out = refused(check_exercise_1(lambda log, technique: _fair(log, "scale")))
    assert 'fair_ratio(log, "clip") raised KeyError' in out and "use its technique argument" in out


def test_exercise_1_reports_none_strings_and_raising_answers(refused):
    assert "returned None: return the ratio" in refused(check_exercise_1(lambda log, technique: None))
    assert "should return one number; it returned str '1.03x'" in refused(check_exercise_1(lambda log, technique: "1.03x"))
    assert "ZeroDivisionError" in refused(check_exercise_1(lambda log, technique: 1 / 0))


def test_exercise_2_accepts_tensorflow_ops(accepted):
    assert accepted(check_exercise_2(lambda x: gradlab.straight_through(tf.round(x * 4.0) / 4.0, x))).startswith("Correct!")
    assert check_exercise_2(lambda x: x + tf.stop_gradient(tf.round(x * 4.0) / 4.0 - x)).passed is True


def test_exercise_2_refuses_python_in_the_step(refused):
    out = refused(check_exercise_2(quantize_numpy))  # the starting point
    assert "XLA cannot compile it" in out and "PyFuncStateless" in out
    assert "XLA cannot compile it" in refused(check_exercise_2(lambda x: tf.py_function(lambda a: a, [x], tf.float32)))


def test_exercise_2_refuses_rounding_halves_up(refused):
    """floor(4x + 0.5) / 4 agrees everywhere except at halves, which np.round and tf.round send to even."""
    out = refused(check_exercise_2(lambda x: gradlab.straight_through(tf.floor(x * 4.0 + 0.5) / 4.0, x)))
    assert "at 1 of 41 points" in out and "at x = 0.125 (4x is a half" in out and "you return 0.25, expected 0" in out


def test_exercise_2_explains_wrong_values_and_gradients(refused):
    assert "no gradient reaches x" in refused(check_exercise_2(lambda x: tf.round(x * 4.0) / 4.0))
    out = refused(check_exercise_2(lambda x: tf.round(x * 4.0) / 4.0 + 0.0 * x))
    assert "x receives [0. 0. 0. 0.]" in out and "The gradient is zero" in out

    @tf.custom_gradient
    def ignores_dy(x):
        return tf.round(x * 4.0) / 4.0, lambda dy: tf.ones_like(dy)
    out = refused(check_exercise_2(ignores_dy))
    assert "dy = [1. 2. 3. 4.]... x receives [1. 1. 1. 1.]" in out and "does it pass dy on" in out
    out = refused(check_exercise_2(lambda x: gradlab.straight_through(tf.round(x * 2.0) / 2.0, x)))
    assert "values differ" in out and "you return -2, expected -1.75" in out


def test_exercise_1_refuses_a_hard_coded_ratio(refused):
    """The first log's ratio, returned for any log: the second log ("clip") refuses it."""
    from exercises.performance import _fair_ratio_reference, _made_up_log
    ratio = _fair_ratio_reference(_made_up_log(1, "scale"), "scale")
    assert 'fair_ratio(log, "clip") is' in refused(check_exercise_1(lambda log, technique: ratio))


def test_exercise_2_refuses_hard_coded_values_and_gradient(refused):
    """Issue 39: the first case's quarters (and its upstream gradient 1, 2, ..., 41), returned whatever x and dy
    are: they compile and pass the first case; the second case's other points refuse them."""
    x = np.concatenate([np.linspace(-2.0, 2.0, 37, dtype=np.float32) + np.float32(0.01),
                        np.array([0.125, 0.375, -0.125, -0.625], np.float32)])
    quarters, first_dy = tf.constant(np.round(x * 4) / 4), tf.constant(np.arange(1, 42, dtype=np.float32))
    out = refused(check_exercise_2(lambda t: gradlab.straight_through(quarters, t)))
    assert out.startswith("Not yet: on other points, it compiles, but the values differ from np.round(4x)/4 at ")
    assert "The first points passed: does quantize compute from the x (and the dy) it receives" in out

    @tf.custom_gradient
    def hard_coded_gradient(t):
        return tf.round(t * 4.0) / 4.0, lambda dy: first_dy
    out = refused(check_exercise_2(hard_coded_gradient))
    assert out.startswith("Not yet: on other points, the values are right, but the gradient is not passed straight")
    assert "x receives [1. 2. 3. 4.]..." in out and "numbers fixed in advance?" in out


def _halves_up(x):
    return gradlab.straight_through(tf.floor(x * 4.0 + 0.5) / 4.0, x)


@pytest.mark.parametrize("seed", [0, 1, 2024])
def test_held_out_cases_decide_as_the_public_ones(seed):
    """The instructor edition's held-out cases (check_exercise_N(..., seed=...)): other inputs, same verdicts."""
    def unpaired(log, technique):
        def median(name):
            return np.median([r["seconds"] for r in log if r["technique"] == name and r["round"] >= 1])
        return median(technique) / median("none")
    assert check_exercise_1.verdict(_fair, seed=seed).passed
    for wrong in (unpaired, lambda log, technique: _fair(log, "scale" if technique != "scale" else "clip"),
                  lambda log, technique: float(np.mean(_per_round(log, technique)))):
        assert not check_exercise_1.verdict(wrong, seed=seed).passed
    assert check_exercise_2.verdict(lambda x: gradlab.straight_through(tf.round(x * 4.0) / 4.0, x), seed=seed).passed
    for wrong in (quantize_numpy, _halves_up, lambda x: tf.round(x * 4.0) / 4.0 + 0.0 * x):
        assert not check_exercise_2.verdict(wrong, seed=seed).passed


def test_held_out_cases_refuse_answers_fitted_to_the_public_ones():
    """Fitted to the public cases: the public logs' ratios by technique; halves rounded right for 41 points only."""
    from exercises.performance import _fair_ratio_reference, _made_up_log
    table = {technique: _fair_ratio_reference(_made_up_log(draw, technique), technique)
             for draw, technique in ((1, "scale"), (2, "clip"))}

    def fitted_1(log, technique):
        return table.get(technique, 1.0)
    assert check_exercise_1.verdict(fitted_1).passed
    assert not check_exercise_1.verdict(fitted_1, seed=7).passed

    def fitted_2(x):                                     # the shape is static: XLA compiles either branch
        return gradlab.straight_through(tf.round(x * 4.0) / 4.0, x) if x.shape[0] == 41 else _halves_up(x)
    assert check_exercise_2.verdict(fitted_2).passed
    assert "(4x is a half: np.round rounds it to even)" in check_exercise_2.verdict(fitted_2, seed=7).message
