"""The workbook's tests import what the notebooks import: ``notebooks/`` goes on ``sys.path``.

The exercise self-checks (``notebooks/exercises/``) and the paper code (``notebooks/papers/``) live
beside the notebooks, whose kernels run in ``notebooks/``; these tests import them the same way.
"""
from __future__ import annotations

import sys
from pathlib import Path

_NOTEBOOKS_DIR = str(Path(__file__).resolve().parents[2] / "notebooks")
if _NOTEBOOKS_DIR not in sys.path:
    sys.path.insert(0, _NOTEBOOKS_DIR)
