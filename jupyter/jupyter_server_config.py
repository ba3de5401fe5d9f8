"""Jupyter Server settings for the workbook.

`make lab` loads this file (``JUPYTER_CONFIG_PATH=jupyter``), and Binder's postBuild installs it.

One setting: a notebook saved from JupyterLab keeps the ``language_info`` stored in its file.
JupyterLab rewrites that metadata from the running kernel as soon as a notebook opens, so a learner
whose Python differs from the one that stored the outputs would see every notebook they only opened
change in ``git status``. ``language_info`` only describes the kernel; nothing reads it back.
"""
import json
import os


def keep_stored_language_info(model, path, contents_manager, **kwargs):
    """Pre-save hook: put back the ``language_info`` of the notebook already on disk, if it has one."""
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


c = get_config()  # noqa: F821 (provided by the Jupyter config loader)
c.FileContentsManager.pre_save_hook = keep_stored_language_info
