"""Runs the examples in gradlab's docstrings, so that every documented example stays runnable.

Each docstring with examples is one test case; every module of the package is searched, subpackages
included and ones added later (found with pkgutil), so a new module's examples are checked without editing this.
"""

from __future__ import annotations

import doctest
import importlib
import pkgutil

import pytest

import gradlab

OPTIONS = doctest.NORMALIZE_WHITESPACE | doctest.ELLIPSIS


def _module_names():
    names = ["gradlab"]
    names += [info.name for info in pkgutil.walk_packages(gradlab.__path__, "gradlab.")]  # subpackages too
    return sorted(names)


def _collect():
    finder = doctest.DocTestFinder(exclude_empty=True)
    cases = []
    for module_name in _module_names():
        module = importlib.import_module(module_name)
        for test in finder.find(module, module_name):
            if test.examples:
                cases.append(pytest.param(test, id=test.name))
    return cases


DOCTESTS = _collect()


def test_the_public_api_has_examples():
    documented = {case.values[0].name.rsplit(".", 1)[-1] for case in DOCTESTS}
    public = set(gradlab.__all__) - {"layers", "GradientCheck"}
    assert (
        public <= documented
    ), f"public names without a docstring example: {sorted(public - documented)}"


@pytest.mark.parametrize("test", DOCTESTS)
def test_docstring_example(test):
    runner = doctest.DocTestRunner(optionflags=OPTIONS)
    output = []
    result = runner.run(test, out=output.append, clear_globs=True)
    assert result.attempted > 0
    assert result.failed == 0, "".join(output)
