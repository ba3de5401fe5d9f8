"""exercises/_report.py: the one line a self-check prints for an error, whatever the error holds."""
from __future__ import annotations

import doctest

import exercises._report as report
from exercises._report import first_line


def test_first_line_names_the_type_and_the_first_or_last_line():
    error = ValueError("  \nthe shape is wrong\n\nraised from here  \n")
    assert first_line(error) == "ValueError: the shape is wrong"
    assert first_line(error, last=True) == "ValueError: raised from here"
    assert first_line(RuntimeError("x" * 500), limit=10) == "RuntimeError: " + "x" * 10 + "..."
    assert first_line(RuntimeError("a TensorFlow function"), limit=15) == "RuntimeError: a TensorFlow..."


def test_an_empty_message_gives_the_type_alone_instead_of_crashing_the_check():
    assert first_line(ValueError()) == "ValueError"
    assert first_line(ZeroDivisionError("")) == "ZeroDivisionError"


def test_docstring_example_runs():
    assert doctest.testmod(report).failed == 0
