"""gradlab's layering, as ``make lint`` checks it: import-linter's contracts in ``pyproject.toml``.

The real package keeps every contract. Each planted violation (an import cycle like the one
``layers`` and ``_relu_surgery`` once had, at the top of a module or inside a function; an op that
imports the plots; a core module that reaches matplotlib; a module given no layer) is written into a
copy of the package in a temporary directory, never into the repository, and ``lint-imports`` must
fail on it, naming the import.
"""
from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Callable, Dict, Tuple

import pytest

ROOT = Path(__file__).resolve().parents[2]
LINT_IMPORTS = Path(sys.executable).parent / "lint-imports"


def lint_imports(root: Path) -> subprocess.CompletedProcess:
    """``lint-imports`` run on the package ``gradlab`` in ``root`` with ``root``'s ``pyproject.toml``.

    It puts its working directory first on the path, and PYTHONPATH does the same here, so the package
    analysed is ``root``'s, not the editable install's. No cache is written; lines are not wrapped.
    """
    env = {**os.environ, "PYTHONPATH": str(root), "COLUMNS": "200", "NO_COLOR": "1"}
    return subprocess.run([str(LINT_IMPORTS), "--no-cache"], cwd=root, env=env, capture_output=True, text=True,
                          timeout=120)


@pytest.fixture
def package_copy(tmp_path) -> Path:
    """A folder holding a copy of ``gradlab/`` and ``pyproject.toml`` (the contracts)."""
    shutil.copytree(ROOT / "gradlab", tmp_path / "gradlab", ignore=shutil.ignore_patterns("__pycache__"))
    shutil.copy2(ROOT / "pyproject.toml", tmp_path / "pyproject.toml")
    return tmp_path


def _append(relative: str, code: str) -> Callable[[Path], None]:
    """A planting: ``code`` added at the end of the copy's module ``relative``."""
    def plant(package: Path) -> None:
        path = package / relative
        path.write_text(path.read_text() + "\n\n" + code)
    return plant


def _after_future_import(relative: str, line: str) -> Callable[[Path], None]:
    """A planting: ``line`` as the first import of the copy's module ``relative``."""
    def plant(package: Path) -> None:
        path = package / relative
        text = path.read_text()
        marker = "from __future__ import annotations\n"
        assert marker in text, relative
        path.write_text(text.replace(marker, marker + line + "\n", 1))
    return plant


def _new_module(relative: str) -> Callable[[Path], None]:
    """A planting: an empty new module ``relative`` in the copy."""
    return lambda package: (package / relative).write_text('"""A module nobody gave a layer."""\n')


#: name -> (how to plant it in the copy's ``gradlab/``, what lint-imports must print about it)
PLANTED: Dict[str, Tuple[Callable[[Path], None], str]] = {
    "the old cycle, inside a function": (
        _append("_relu_surgery.py", "def _planted():\n    from gradlab.layers import with_relu_gradient\n\n"
                                    "    return with_relu_gradient\n"),
        "gradlab._relu_surgery is not allowed to import gradlab.layers"),
    "the cycle at the top of the module": (
        _after_future_import("_relu_surgery.py", "from gradlab import layers  # noqa: F401"),
        "gradlab._relu_surgery is not allowed to import gradlab.layers"),
    "the ReLU layers import their surgery": (
        _append("_relu_layers.py", "def _planted():\n    from gradlab import _relu_surgery\n\n    return _relu_surgery\n"),
        "gradlab._relu_layers is not allowed to import gradlab._relu_surgery"),
    "two public modules of one layer import each other": (
        _append("probes.py", "def _planted():\n    import gradlab.checking\n\n    return gradlab.checking\n"),
        "gradlab.probes is not allowed to import gradlab.checking"),
    "an op imports the plots": (
        _append("ops.py", "def _planted():\n    import gradlab.plots\n\n    return gradlab.plots\n"),
        "gradlab.ops is not allowed to import gradlab.plots"),
    "the core reaches matplotlib through _validation": (
        _append("_validation.py", "def _planted():\n    import matplotlib\n\n    return matplotlib\n"),
        "gradlab.ops is not allowed to import matplotlib"),
    "import gradlab loads the widgets": (
        _append("__init__.py", "def _planted():\n    import gradlab.widgets\n\n    return gradlab.widgets\n"),
        "gradlab is not allowed to import gradlab.widgets"),
    "the PNG encoder imports the explorer": (
        _append("widgets/_png.py", "def _planted():\n    from gradlab.widgets import _view\n\n    return _view\n"),
        "gradlab.widgets._png is not allowed to import gradlab.widgets._view"),
    "a module with no layer": (_new_module("_unplaced.py"), "gradlab._unplaced"),
}


def test_lint_imports_is_installed():
    assert LINT_IMPORTS.is_file(), f"{LINT_IMPORTS} is missing: make install installs import-linter (requirements.txt)"


def test_the_package_keeps_its_import_contracts():
    result = lint_imports(ROOT)
    assert result.returncode == 0, result.stdout + result.stderr
    assert "0 broken" in result.stdout, result.stdout


def test_an_untouched_copy_keeps_them(package_copy):
    """The harness: what fails below fails for the planted import alone."""
    result = lint_imports(package_copy)
    assert result.returncode == 0, result.stdout + result.stderr


@pytest.mark.parametrize("case", sorted(PLANTED))
def test_a_planted_violation_fails_naming_the_import(case, package_copy):
    plant, message = PLANTED[case]
    plant(package_copy / "gradlab")
    result = lint_imports(package_copy)
    assert result.returncode == 1, result.stdout + result.stderr
    assert message in result.stdout, result.stdout
