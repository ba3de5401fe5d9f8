"""Jupyter Server settings for the workbook.

`make lab` loads this file (``JUPYTER_CONFIG_PATH=jupyter``), and Binder's postBuild installs it.

One setting, a pre-save hook, so that a learner who opens a notebook, or restarts and runs it all,
and saves it unchanged sees nothing in ``git status``:

- the notebook keeps the ``language_info`` stored in its file. JupyterLab rewrites that metadata
  from the running kernel as soon as a notebook opens, so a learner whose Python differs from the
  one that stored the outputs would see every notebook they only opened change. ``language_info``
  only describes the kernel; nothing reads it back;
- an explorer's output keeps the widget ``model_id`` stored in its file when nothing else in that
  output changed. Every run creates the widget anew under a random id, while its PNG fallback (what
  GitHub and the book show) is drawn the same. The id names a widget of the running kernel only,
  which the saved file does not hold (no widget state is stored), so the stored one serves as well;
- a solution (a code cell tagged ``solution``) whose stored version has its output collapsed
  (``collapsed`` and ``jupyter.outputs_hidden``) keeps it collapsed. Running a cell deletes both
  keys, so Restart and Run All would otherwise show every solution's output and change the file.
  Only absent keys are restored: a learner who expands a solution's output keeps it expanded.
"""
import json
import os

WIDGET_VIEW = "application/vnd.jupyter.widget-view+json"


def _without_model_id(output):
    """The output with its widget view's ``model_id`` left out (what must match to keep the stored id).

    Text is compared joined: a file stores a multi-line string as a list of lines, the browser sends one string.
    """
    data = {key: "".join(value) if isinstance(value, list) else value for key, value in output.get("data", {}).items()}
    if isinstance(data.get(WIDGET_VIEW), dict):
        data[WIDGET_VIEW] = {k: v for k, v in data[WIDGET_VIEW].items() if k != "model_id"}
    return {"output_type": output.get("output_type"), "metadata": output.get("metadata") or {}, "data": data}


def keep_stored_widget_ids(content, stored):
    """Give each widget output in ``content`` the ``model_id`` of the stored cell's equal output."""
    stored_cells = {cell.get("id"): cell for cell in stored.get("cells", []) if cell.get("id")}
    for cell in content.get("cells", []):
        old = stored_cells.get(cell.get("id"))
        new_outputs, old_outputs = cell.get("outputs") or [], (old or {}).get("outputs") or []
        if len(new_outputs) != len(old_outputs):
            continue
        for new, before in zip(new_outputs, old_outputs):
            view, stored_view = new.get("data", {}).get(WIDGET_VIEW), before.get("data", {}).get(WIDGET_VIEW)
            if (isinstance(view, dict) and isinstance(stored_view, dict) and "model_id" in stored_view
                    and _without_model_id(new) == _without_model_id(before)):
                view["model_id"] = stored_view["model_id"]


def keep_solutions_collapsed(content, stored):
    """Give each solution of ``content`` that lost ``collapsed``/``outputs_hidden`` the stored ``true``."""
    stored_cells = {cell.get("id"): cell for cell in stored.get("cells", []) if cell.get("id")}
    for cell in content.get("cells", []):
        meta = cell.get("metadata") or {}
        old = (stored_cells.get(cell.get("id")) or {}).get("metadata") or {}
        if cell.get("cell_type") != "code" or "solution" not in (meta.get("tags") or []):
            continue
        if old.get("collapsed") is True and (old.get("jupyter") or {}).get("outputs_hidden") is True:
            jupyter = meta.setdefault("jupyter", {})
            if "collapsed" not in meta and "outputs_hidden" not in jupyter:
                meta["collapsed"] = jupyter["outputs_hidden"] = True
                cell["metadata"] = meta


def keep_stored_metadata(model, path, contents_manager, **kwargs):
    """Pre-save hook: keep the stored ``language_info``, widget ids of unchanged explorer outputs and collapsed solutions."""
    if model.get("type") != "notebook" or not isinstance(model.get("content"), dict):
        return
    # Read from disk (the default contents manager is asynchronous; a hook cannot await it).
    file = os.path.join(contents_manager.root_dir, path.lstrip("/"))
    try:
        with open(file, encoding="utf-8") as stream:
            stored = json.load(stream)
    except (OSError, ValueError):  # a new notebook, or one that does not parse: nothing to keep
        return
    info = stored.get("metadata", {}).get("language_info")
    if info:
        model["content"].setdefault("metadata", {})["language_info"] = info
    keep_stored_widget_ids(model["content"], stored)
    keep_solutions_collapsed(model["content"], stored)


c = get_config()  # noqa: F821 (provided by the Jupyter config loader)
c.FileContentsManager.pre_save_hook = keep_stored_metadata
