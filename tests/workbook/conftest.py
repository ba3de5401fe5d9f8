"""The workbook's tests import what the notebooks import: ``notebooks/`` goes on ``sys.path``.

The exercise self-checks (``notebooks/exercises/``) and the paper code (``notebooks/papers/``) live
beside the notebooks, whose kernels run in ``notebooks/``; these tests import them the same way.
"""
from __future__ import annotations

import sys
from pathlib import Path

import pytest

_NOTEBOOKS_DIR = str(Path(__file__).resolve().parents[2] / "notebooks")
if _NOTEBOOKS_DIR not in sys.path:
    sys.path.insert(0, _NOTEBOOKS_DIR)


@pytest.fixture
def refused(capsys):
    """Read what a self-check printed for an answer it must refuse.

    ``out = refused(check_exercise_1(answer))`` asserts the verdict is not a pass and returns the
    printed text (everything printed since the last read), which starts with "Not yet".
    """
    def read(verdict) -> str:
        out = capsys.readouterr().out
        assert verdict.passed is False, out
        assert out.startswith("Not yet"), out
        return out
    return read


@pytest.fixture
def accepted(capsys):
    """Read what a self-check printed for an answer it must accept (see :func:`refused`)."""
    def read(verdict) -> str:
        out = capsys.readouterr().out
        assert verdict.passed is True, out
        return out
    return read
