"""The server settings `make lab` and Binder load (jupyter/jupyter_server_config.py), as functions.

Its pre-save hook keeps a learner's clone clean: the stored ``language_info`` (tested in a real
browser by tests/project/test_browser.py) and the stored widget ``model_id`` of an explorer output
whose picture did not change, and a solution's collapsed output after Run All. These tests pin the
hook's contract on notebooks built here.
"""
from __future__ import annotations

import copy
import json
import runpy
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
SETTINGS = runpy.run_path(str(ROOT / "jupyter" / "jupyter_server_config.py"),
                          init_globals={"get_config": lambda: type("Config", (), {"FileContentsManager": type("M", (), {})()})()})
VIEW = SETTINGS["WIDGET_VIEW"]


def _explorer_notebook(model_id: str, png: str = "iVBORw0KGgo=") -> dict:
    output = {"output_type": "display_data", "metadata": {},
              "data": {VIEW: {"model_id": model_id, "version_major": 2, "version_minor": 0},
                       "image/png": png, "text/plain": "Explorer(...)"}}
    return {"cells": [{"cell_type": "code", "id": "explore", "metadata": {}, "execution_count": 3,
                       "outputs": [output], "source": "gradlab.widgets.clip_explorer()"}],
            "metadata": {"language_info": {"name": "python", "version": "3.11.7"}}, "nbformat": 4, "nbformat_minor": 5}


def _save(tmp_path: Path, stored: dict, saved: dict) -> dict:
    (tmp_path / "nb.ipynb").write_text(json.dumps(stored))
    model = {"type": "notebook", "content": copy.deepcopy(saved)}
    manager = type("ContentsManager", (), {"root_dir": str(tmp_path)})()
    SETTINGS["keep_stored_metadata"](model, "/nb.ipynb", manager)
    return model["content"]


def test_a_rerun_explorer_keeps_the_stored_model_id(tmp_path):
    saved = _explorer_notebook("new-id-from-this-run")
    saved["metadata"]["language_info"]["version"] = "3.12.1"
    content = _save(tmp_path, _explorer_notebook("stored-id"), saved)
    assert content == _explorer_notebook("stored-id")       # the file's bytes come back: nothing to commit


def test_text_stored_as_lines_matches_the_same_text_sent_as_one_string(tmp_path):
    stored = _explorer_notebook("stored-id")
    stored["cells"][0]["outputs"][0]["data"]["text/plain"] = ["Explorer(...)"]   # as nbformat writes it
    content = _save(tmp_path, stored, _explorer_notebook("new-id"))
    assert content["cells"][0]["outputs"][0]["data"][VIEW]["model_id"] == "stored-id"


def test_a_changed_picture_or_another_cell_keeps_the_new_id(tmp_path):
    changed = _save(tmp_path, _explorer_notebook("stored-id"), _explorer_notebook("new-id", png="AAAA"))
    assert changed["cells"][0]["outputs"][0]["data"][VIEW]["model_id"] == "new-id"
    other = _explorer_notebook("new-id")
    other["cells"][0]["id"] = "another-cell"
    assert _save(tmp_path, _explorer_notebook("stored-id"), other)["cells"][0]["outputs"][0]["data"][VIEW][
        "model_id"] == "new-id"


def test_a_new_or_unreadable_notebook_is_saved_as_it_is(tmp_path):
    manager = type("ContentsManager", (), {"root_dir": str(tmp_path)})()
    model = {"type": "notebook", "content": _explorer_notebook("new-id")}
    SETTINGS["keep_stored_metadata"](model, "/missing.ipynb", manager)
    (tmp_path / "broken.ipynb").write_text("{not json")
    SETTINGS["keep_stored_metadata"](model, "/broken.ipynb", manager)
    assert model["content"] == _explorer_notebook("new-id")


def _solution_notebook(**metadata) -> dict:
    cell = {"cell_type": "code", "id": "sol", "execution_count": 9, "source": "# @title Solution to exercise 1",
            "metadata": {"tags": ["solution"], "cellView": "form", **metadata},
            "outputs": [{"output_type": "stream", "name": "stdout", "text": "This solution passes check_exercise_1."}]}
    return {"cells": [cell], "metadata": {}, "nbformat": 4, "nbformat_minor": 5}


HIDDEN = {"collapsed": True, "jupyter": {"source_hidden": True, "outputs_hidden": True}}


def test_a_solution_run_by_run_all_stays_collapsed(tmp_path):
    """Running a cell deletes `collapsed` and outputs_hidden; the stored `true`s come back on save."""
    content = _save(tmp_path, _solution_notebook(**HIDDEN), _solution_notebook(jupyter={"source_hidden": True}))
    assert content == _solution_notebook(**HIDDEN)


def test_a_solution_the_learner_expanded_stays_expanded(tmp_path):
    expanded = _solution_notebook(collapsed=False, jupyter={"source_hidden": True, "outputs_hidden": False})
    assert _save(tmp_path, _solution_notebook(**HIDDEN), expanded) == expanded


def test_only_solutions_are_collapsed_again(tmp_path):
    stored, saved = _solution_notebook(**HIDDEN), _solution_notebook(jupyter={"source_hidden": True})
    for notebook in (stored, saved):
        notebook["cells"][0]["metadata"]["tags"] = ["exercise"]
    assert _save(tmp_path, stored, saved) == saved
