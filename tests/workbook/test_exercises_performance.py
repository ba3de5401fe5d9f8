"""The self-checks of notebook 09 (exercises/performance.py) accept the answers and explain mistakes."""
from __future__ import annotations

import numpy as np
import tensorflow as tf

import gradlab
from exercises.performance import check_exercise_1, check_exercise_2, quantize_numpy


def _fair(log, technique, baseline="none"):
    by_round = {}
    for record in log:
        if record["round"] >= 1:
            by_round.setdefault(record["round"], {})[record["technique"]] = record["seconds"]
    return float(np.median([r[technique] / r[baseline] for r in by_round.values()]))


def test_exercise_1_accepts_the_paired_median_and_explains_mistakes(capsys):
    assert check_exercise_1(_fair).passed is True
    assert capsys.readouterr().out.startswith("Correct!")

    def mean_ratio(log, technique, baseline="none"):            # the starting point
        def mean(name):
            return np.mean([r["seconds"] for r in log if r["technique"] == name])
        return mean(technique) / mean(baseline)
    assert check_exercise_1(mean_ratio).passed is False
    assert "warm-up" in capsys.readouterr().out

    def unpaired(log, technique, baseline="none"):              # warm-up out, but not paired
        def median(name):
            return np.median([r["seconds"] for r in log if r["technique"] == name and r["round"] >= 1])
        return median(technique) / median(baseline)
    assert check_exercise_1(unpaired).passed is False
    assert "Divide within each round" in capsys.readouterr().out
    assert check_exercise_1(lambda log, technique: 1 / 0).passed is False
    assert "ZeroDivisionError" in capsys.readouterr().out


def test_exercise_2_accepts_tensorflow_ops_and_explains_mistakes(capsys):
    assert check_exercise_2(lambda x: gradlab.straight_through(tf.round(x * 4.0) / 4.0, x)).passed is True
    assert capsys.readouterr().out.startswith("Correct!")
    assert check_exercise_2(quantize_numpy).passed is False                   # the starting point
    assert "XLA cannot compile it" in capsys.readouterr().out
    assert check_exercise_2(lambda x: tf.round(x * 4.0) / 4.0).passed is False
    assert "not passed straight" in capsys.readouterr().out
    assert check_exercise_2(lambda x: gradlab.straight_through(tf.round(x * 2.0) / 2.0, x)).passed is False
    assert "values differ" in capsys.readouterr().out
