"""One source of truth for gradlab's public API: each module's ``__all__``.

The README's API table, ``docs/api.md``, the package docstring and the subjects of the
execution-mode matrix (``docs/execution_modes.md`` and its tests) are checked against the
``__all__`` lists here, so that a public name added to a module and missing from one of them fails
a test. Inside the package, private stays private: no module uses another module's ``_name``
(helpers shared between modules have public names in a private module, e.g. ``_validation.describe``).
"""
from __future__ import annotations

import ast
import importlib
import importlib.util
import re
from pathlib import Path

import pytest

import gradlab
from gradlab import layers, ops

ROOT = Path(__file__).resolve().parents[1]
#: The package as imported (the checkout, or the installed wheel under tools/test_library.sh).
PACKAGE = Path(gradlab.__file__).resolve().parent
#: The README and docs/ are beside the package in a checkout only.
needs_docs = pytest.mark.skipif(not (ROOT / "README.md").exists() or not (ROOT / "docs").is_dir(),
                                reason="the README and docs/ are not beside the tests (wheel test run)")
#: The public submodules: loaded on first use by ``gradlab.__getattr__``.
SUBMODULES = ("layers", "plots", "widgets")


def public_names() -> dict[str, list[str]]:
    """``{module: its __all__}`` for gradlab and its public submodules (``layers`` is a module)."""
    names = {"gradlab": [n for n in gradlab.__all__ if n not in SUBMODULES]}
    for sub in SUBMODULES:
        names[f"gradlab.{sub}"] = list(importlib.import_module(f"gradlab.{sub}").__all__)
    return names


def test_the_public_submodules_are_the_lazy_ones():
    assert tuple(gradlab._LAZY_SUBMODULES) == SUBMODULES
    assert set(SUBMODULES) & set(gradlab.__all__) == {"layers"}  # as in `from gradlab import *`


def test_every_public_name_exists():
    for module, names in public_names().items():
        imported = importlib.import_module(module)
        assert len(set(names)) == len(names), module
        missing = [n for n in names if not hasattr(imported, n)]
        assert not missing, f"{module}.__all__ names {missing}, which it does not define"


# --- the lists of the public API -----------------------------------------------------------------


@needs_docs
def test_the_readme_table_names_every_public_name():
    readme = (ROOT / "README.md").read_text()
    section = readme[readme.index("## The package"):readme.index("## Where it works")]
    table = "\n".join(line for line in section.splitlines() if line.startswith("| `"))
    words = set(re.findall(r"[A-Za-z_][A-Za-z0-9_]*", table))
    missing = {module: sorted(set(names) - words) for module, names in public_names().items()}
    assert not any(missing.values()), f"public names missing from the README's API table: {missing}"
    for sub in SUBMODULES:
        assert f"`gradlab.{sub}" in table, sub


@needs_docs
def test_the_api_page_documents_every_public_module():
    page = (ROOT / "docs" / "api.md").read_text()
    documented = re.findall(r"^\.\. automodule:: (\S+)$", page, flags=re.M)
    assert documented == list(public_names()), documented
    # autodoc's :members: documents exactly a module's __all__ when it has one.
    for module in public_names():
        assert hasattr(importlib.import_module(module), "__all__"), module


def test_the_package_docstring_names_every_public_name():
    doc = gradlab.__doc__
    names = public_names()
    missing = [n for n in names["gradlab"] + names["gradlab.layers"] if not re.search(rf"\b{n}\b", doc)]
    assert not missing, f"gradlab's docstring does not name {missing}"
    for sub in SUBMODULES:
        assert f":mod:`gradlab.{sub}`" in doc, sub


def matrix_subjects() -> list[str]:
    """The names of ops and layers in the execution-mode matrix: the first column of its tables."""
    text = (ROOT / "docs" / "execution_modes.md").read_text()
    matrix = text[text.index("## 1. The matrix"):text.index("## 2.")]
    return re.findall(r"^\| `(\w+)` \|", matrix, flags=re.M)


@needs_docs
def test_the_execution_mode_matrix_has_every_op_and_layer():
    expected = list(ops.__all__) + list(layers.__all__)
    rows = matrix_subjects()
    assert sorted(set(rows)) == sorted(expected), sorted(set(rows) ^ set(expected))
    assert len(rows) == 2 * len(expected), "each subject has a row in both tables"
    text = (ROOT / "docs" / "execution_modes.md").read_text()
    subjects = text[text.index("Subjects:"):text.index("## 1. The matrix")]
    assert all(f"`{name}`" in subjects for name in expected), subjects


def test_the_execution_mode_tests_cover_every_op_and_layer():
    import test_modes
    import test_relu_modes

    tested = {name.removeprefix("op:") for name in test_modes.SUBJECTS} | set(test_relu_modes.SUBJECTS)
    assert tested == set(ops.__all__) | set(layers.__all__)


# --- private stays private -----------------------------------------------------------------------


def _is_private(name: str) -> bool:
    return name.startswith("_") and not name.startswith("__")


def _is_module(dotted: str) -> bool:
    try:
        return importlib.util.find_spec(dotted) is not None
    except (ImportError, ValueError):
        return False


def _module_name(path: Path) -> str:
    parts = path.relative_to(PACKAGE.parent).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def private_uses(path: Path) -> list[str]:
    """``module._name`` uses in ``path`` where ``module`` is another gradlab module."""
    own = _module_name(path)
    tree = ast.parse(path.read_text())
    aliases: dict[str, str] = {}  # local name -> gradlab module it refers to
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for alias in node.names:
                if alias.name.split(".")[0] == "gradlab":
                    aliases[alias.asname or "gradlab"] = alias.name if alias.asname else "gradlab"
        elif isinstance(node, ast.ImportFrom) and (node.module or "").split(".")[0] == "gradlab":
            for alias in node.names:
                dotted = f"{node.module}.{alias.name}"
                if _is_module(dotted):
                    aliases[alias.asname or alias.name] = dotted
                elif _is_private(alias.name) and node.module != own:
                    found.append(f"line {node.lineno}: from {node.module} import {alias.name}")
    for node in ast.walk(tree):
        if not isinstance(node, ast.Attribute):
            continue
        chain, base = [node.attr], node.value
        while isinstance(base, ast.Attribute):
            chain.insert(0, base.attr)
            base = base.value
        if not isinstance(base, ast.Name) or base.id not in aliases:
            continue
        module = aliases[base.id]
        for attr in chain:
            dotted = f"{module}.{attr}"
            if _is_module(dotted):
                module = dotted
                continue
            if _is_private(attr) and module != own:
                found.append(f"line {node.lineno}: {module}.{attr}")
            break
    return sorted(set(found))


def test_the_checker_sees_a_private_use(tmp_path, monkeypatch):
    """The checker itself: a private name reached through an alias is reported, a public one not."""
    source = "from gradlab import plots, _validation as v\nplots._check_figsize(1)\nv.describe(1)\n"
    path = PACKAGE / "widgets" / "_view.py"  # parsed from the string below, never written
    original = Path.read_text
    monkeypatch.setattr(Path, "read_text", lambda self, *a, **k: source if self == path else original(self, *a, **k))
    assert private_uses(path) == ["line 2: gradlab.plots._check_figsize"]


@pytest.mark.parametrize("path", sorted(PACKAGE.rglob("*.py")), ids=lambda p: p.relative_to(PACKAGE).as_posix())
def test_no_module_uses_another_modules_private_names(path):
    assert private_uses(path) == [], f"{path.relative_to(PACKAGE.parent)} reaches into private names"
