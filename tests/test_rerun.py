"""Every notebook cell can be run again: a learner edits a cell and re-runs it, or runs everything twice.

Each notebook runs top to bottom in one kernel, then every code cell runs a second time, in order,
in the same kernel. Only cells tagged ``raises-exception`` may raise (nbclient allows exactly
those), on either pass. A cell that registers a gradient under a fixed name, for example, fails on
the second pass with ``KeyError: Registering two gradient with name ...``.
"""
from __future__ import annotations

import os
import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
NOTEBOOKS = sorted((ROOT / "notebooks").glob("*.ipynb"))


def _run_twice(path: Path) -> None:
    import nbformat
    from nbclient import NotebookClient
    from nbclient.exceptions import CellExecutionError

    notebook = nbformat.read(path, as_version=4)
    client = NotebookClient(
        notebook, timeout=300, kernel_name="python3", record_timing=False,
        resources={"metadata": {"path": str(path.parent)}},  # the kernel runs beside the notebook
    )
    env = {**os.environ, "TF_CPP_MIN_LOG_LEVEL": "2", "TF_ENABLE_ONEDNN_OPTS": "0", "MPLBACKEND": "agg"}
    code = [(index, cell) for index, cell in enumerate(notebook.cells) if cell.cell_type == "code"]
    with client.setup_kernel(env=env):
        for run in ("first run", "second run"):
            for number, (index, cell) in enumerate(code, 1):
                try:
                    client.execute_cell(cell, index)
                except CellExecutionError as error:
                    last_line = re.sub(r"\x1b\[[0-9;]*m", "", str(error).strip().splitlines()[-1])[:300]
                    pytest.fail(f"{path.name}, code cell [{number}] failed on the {run}: {last_line}",
                                pytrace=False)


def _rerun_test(path: Path):
    @pytest.mark.slow
    def test_every_code_cell_runs_again_in_the_same_kernel(self):
        _run_twice(path)

    return test_every_code_cell_runs_again_in_the_same_kernel


# One class per notebook: `make test` distributes the suite with pytest-xdist's `--dist loadscope`,
# which keeps a class together and spreads classes over the workers, so the notebooks re-run side by
# side instead of one after another on a single worker.
for _path in NOTEBOOKS:
    _name = "TestRerun_" + _path.stem
    globals()[_name] = type(_name, (), {"test_every_code_cell_runs_again_in_the_same_kernel": _rerun_test(_path)})
