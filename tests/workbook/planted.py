"""Planted notebooks for the tests of CI's stricter nbval runs (the nudge, the CPU caps).

A test builds a small notebook of fragile and robust cells, stores it as one clean run, then runs
strict nbval on it in a fresh process under another environment and reads which cells failed.
"""
from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path


def code_cell(source: str, tags: tuple[str, ...] = ()) -> dict:
    """A code cell, not yet run."""
    return {"cell_type": "code", "execution_count": None, "id": f"c{abs(hash(source)) % 10**8}",
            "metadata": {"tags": list(tags)}, "outputs": [], "source": source}


def store_run(path: Path, cells: list[dict], env: dict[str, str]) -> None:
    """Writes ``cells`` as a python3 notebook at ``path`` and stores one clean run of it (nbconvert)."""
    path.write_text(json.dumps({"cells": cells, "nbformat": 4, "nbformat_minor": 5, "metadata": {
        "kernelspec": {"display_name": "Python 3", "language": "python", "name": "python3"}}}))
    done = subprocess.run([sys.executable, "-m", "jupyter", "nbconvert", "--to", "notebook", "--execute", "--inplace",
                           str(path)], capture_output=True, text=True, timeout=600, env=env)
    assert done.returncode == 0, done.stderr


def strict_nbval(path: Path, env: dict[str, str]) -> tuple[int, str]:
    """Strict nbval on ``path`` in a fresh process under ``env``: its exit code and its report."""
    done = subprocess.run([sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "-p", "no:xdist", "-q",
                           "--nbval", "--nbval-current-env", "-o", "addopts=", path.name],
                          capture_output=True, text=True, timeout=600, env=env, cwd=path.parent)
    return done.returncode, done.stdout


def failed_cells(report: str) -> list[str]:
    """The cells strict nbval named as failed ("Cell 1", ...), in order."""
    return re.findall(r"^FAILED \S+::(Cell \d+)", report, flags=re.MULTILINE)
