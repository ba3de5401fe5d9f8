"""One source of truth for gradlab's public API: each module's ``__all__``.

The package docstring and the subjects of the execution-mode tests are checked against the
``__all__`` lists here (the README's API table, ``docs/api.md`` and the execution-mode matrix in
``docs/execution_modes.md``, beside the package in the checkout only, in
tests/project/test_api_docs.py), so that a public name added to a module and missing from one of
them fails a test. Inside the package, private stays private: no module uses another module's ``_name``
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

#: The package as imported (the checkout, or the installed wheel under tools/test_library.sh).
PACKAGE = Path(gradlab.__file__).resolve().parent
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


def test_the_package_docstring_names_every_public_name():
    doc = gradlab.__doc__
    names = public_names()
    missing = [n for n in names["gradlab"] + names["gradlab.layers"] if not re.search(rf"\b{n}\b", doc)]
    assert not missing, f"gradlab's docstring does not name {missing}"
    for sub in SUBMODULES:
        assert f":mod:`gradlab.{sub}`" in doc, sub


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
