"""exercises/_harness.py: every self-check runs the learner's code, reports and confirms one way."""
from __future__ import annotations

import doctest

import pytest
import tensorflow as tf

import exercises._harness as report
from exercises._harness import NotYet, custom_gradient_ops, first_hint, first_line, running, self_check, shown


def test_first_line_names_the_type_and_the_first_or_last_line():
    error = ValueError("  \nthe shape is wrong\n\nraised from here  \n")
    assert first_line(error) == "ValueError: the shape is wrong"
    assert first_line(error, last=True) == "ValueError: raised from here"
    assert first_line(RuntimeError("x" * 500), limit=10) == "RuntimeError: " + "x" * 10 + "..."
    assert first_line(RuntimeError("a TensorFlow function"), limit=15) == "RuntimeError: a TensorFlow..."


def test_an_empty_message_gives_the_type_alone_instead_of_crashing_the_check():
    assert first_line(ValueError()) == "ValueError"
    assert first_line(ZeroDivisionError("")) == "ZeroDivisionError"


def test_first_hint_takes_the_first_mistake_shown_in_the_order_given():
    assert first_hint((False, "a"), (True, "b"), (True, "c"), otherwise="d") == "b"
    assert first_hint((0, "a"), (None, "b"), otherwise="d") == "d"       # any falsy value: not shown
    assert first_hint(otherwise="d") == "d"


def test_shown_prints_no_negative_zero_and_keeps_nan_and_the_precision():
    assert shown([-0.0, 1.0]) == shown([0.0, 1.0]) == "[0., 1.]"
    assert shown([float("nan"), -0.25, 1 / 3], 3) == "[   nan, -0.25 ,  0.333]"
    assert "\n" in shown(list(range(40)), width=40) and "\n" not in shown(list(range(20)), width=100)


def test_docstring_example_runs():
    assert doctest.testmod(report).failed == 0


@self_check
def check_exercise_1(answer):
    """Checks that answer(2) is 4."""
    with running("answer(2)"):
        value = answer(2)
    if value != 4:
        raise NotYet(f"answer(2) is {value}; it should be 4.")
    return "answer(2) is 4."


def test_a_check_prints_one_verdict_and_returns_a_quiet_truth_value(capsys):
    verdict = check_exercise_1(lambda x: x * 2)
    assert verdict.passed is True and bool(verdict) is True
    assert capsys.readouterr().out == "Correct! answer(2) is 4.\n"
    verdict = check_exercise_1(lambda x: x + 1)
    assert verdict.passed is False and verdict.message == "Not yet: answer(2) is 3; it should be 4."
    assert capsys.readouterr().out == "Not yet: answer(2) is 3; it should be 4.\n"
    assert verdict._ipython_display_() is None  # nothing is echoed under the cell: no bare True/False
    assert repr(verdict) == "Verdict(passed=False)"


def test_an_error_in_the_learners_code_becomes_one_not_yet_line(capsys):
    verdict = check_exercise_1(lambda x: x / 0)
    assert verdict.passed is False
    assert capsys.readouterr().out == "Not yet: answer(2) raised ZeroDivisionError: division by zero\n"


def test_running_adds_a_hint_after_the_error():
    with pytest.raises(NotYet, match=r"^f raised KeyError: 'k'\. Return a dict\.$"):
        with running("f", hint="Return a dict."):
            {}["k"]
    with pytest.raises(NotYet, match=r"^f raised KeyError: 'k'\.\nHint$"):
        with running("f", hint="\nHint"):
            {}["k"]


def test_a_bug_in_the_check_itself_is_not_hidden_as_a_not_yet():
    @self_check
    def broken(answer):
        return 1 / 0
    with pytest.raises(ZeroDivisionError):
        broken(None)


def test_confirm_says_only_that_a_solution_passes(capsys):
    def noisy(x):
        print("the answer is 4")
        return x * 2
    assert check_exercise_1.confirm(noisy) is None
    assert capsys.readouterr().out == "This solution passes check_exercise_1.\n"
    with pytest.raises(AssertionError, match="the solution fails check_exercise_1: Not yet: answer"):
        check_exercise_1.confirm(lambda x: x)
    assert capsys.readouterr().out == ""


def test_custom_gradient_ops_tells_the_technique_from_the_same_numbers():
    @tf.custom_gradient
    def by_hand(x):
        return -tf.nn.softplus(-x), lambda dy: dy * tf.sigmoid(-x)

    x = tf.constant([0.0, 1.0])
    assert len(custom_gradient_ops(by_hand, x)) == 1
    assert custom_gradient_ops(lambda t: -tf.nn.softplus(-t), x) == []


def test_gradient_rules_finds_nested_functions_overrides_and_where_a_grad_comes_from():
    import gradlab
    from exercises._harness import gradient_rules

    @tf.custom_gradient
    def by_hand(x):
        return -tf.nn.softplus(-x), lambda dy: dy * tf.sigmoid(-x)

    x = tf.constant([0.0, 1.0])
    # A @tf.function answer builds its ops in a nested function graph: both find it there.
    assert len(custom_gradient_ops(tf.function(by_hand), x)) == 1
    (rule,) = gradient_rules(tf.function(by_hand), x)
    assert rule.op_type == "IdentityN" and rule.origin == __name__
    (rule,) = gradient_rules(lambda t: gradlab.map_gradient(t, tf.nn.relu), x)
    assert rule.op_type == "IdentityN" and rule.origin == "gradlab.ops"
    assert gradient_rules(lambda t: tf.cond(t[0] > 0, lambda: gradlab.scale_gradient(t, 2.0), lambda: t), x)
    assert gradient_rules(lambda t: -tf.nn.softplus(-t), x) == []

    name = gradlab.register_gradient(lambda op, g: g, "HarnessTestRelu")

    @tf.function
    def overridden(t):
        with gradlab.gradient_override({"Relu": name}):
            return tf.nn.relu(t)
    assert [(r.op_type, r.name) for r in gradient_rules(overridden, x)] == [("Relu", "HarnessTestRelu")]
