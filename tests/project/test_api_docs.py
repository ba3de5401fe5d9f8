"""The README's API table, ``docs/api.md`` and the execution-mode matrix name every public name.

The public API's one source of truth is each module's ``__all__`` (tests/library/test_public_api.py
checks the package itself); here the documents beside it in the checkout are checked against it.
"""
from __future__ import annotations

import importlib
import re
from pathlib import Path

import gradlab
from gradlab import layers, ops

ROOT = Path(__file__).resolve().parents[2]
#: The public submodules: loaded on first use by ``gradlab.__getattr__``.
SUBMODULES = ("layers", "plots", "widgets")


def public_names() -> dict[str, list[str]]:
    """``{module: its __all__}``: gradlab (less its submodules' names) and each public submodule."""
    modules = {"gradlab": gradlab, **{f"gradlab.{s}": importlib.import_module(f"gradlab.{s}") for s in SUBMODULES}}
    return {name: [n for n in module.__all__ if name != "gradlab" or n not in SUBMODULES]
            for name, module in modules.items()}


def test_the_readme_table_names_every_public_name():
    readme = (ROOT / "README.md").read_text()
    section = readme[readme.index("## The package"):readme.index("## Where it works")]
    table = "\n".join(line for line in section.splitlines() if line.startswith("| `"))
    words = set(re.findall(r"[A-Za-z_][A-Za-z0-9_]*", table))
    missing = {module: sorted(set(names) - words) for module, names in public_names().items()}
    assert not any(missing.values()), f"public names missing from the README's API table: {missing}"
    for sub in SUBMODULES:
        assert f"`gradlab.{sub}" in table, sub


def test_the_api_page_documents_every_public_module():
    page = (ROOT / "docs" / "api.md").read_text()
    documented = re.findall(r"^\.\. automodule:: (\S+)$", page, flags=re.M)
    assert documented == list(public_names()), documented
    # autodoc's :members: documents exactly a module's __all__ when it has one.
    for module in public_names():
        assert hasattr(importlib.import_module(module), "__all__"), module


def matrix_subjects() -> list[str]:
    """The names of ops and layers in the execution-mode matrix: the first column of its tables."""
    text = (ROOT / "docs" / "execution_modes.md").read_text()
    matrix = text[text.index("## 1. The matrix"):text.index("## 2.")]
    return re.findall(r"^\| `(\w+)` \|", matrix, flags=re.M)


def test_the_execution_mode_matrix_has_every_op_and_layer():
    expected = list(ops.__all__) + list(layers.__all__)
    rows = matrix_subjects()
    assert sorted(set(rows)) == sorted(expected), sorted(set(rows) ^ set(expected))
    assert len(rows) == 2 * len(expected), "each subject has a row in both tables"
    text = (ROOT / "docs" / "execution_modes.md").read_text()
    subjects = text[text.index("Subjects:"):text.index("## 1. The matrix")]
    assert all(f"`{name}`" in subjects for name in expected), subjects
