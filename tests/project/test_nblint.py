"""The notebook linter (tools/nblint.py): the stored notebooks pass it, and every rule catches a
violation planted in a small synthetic notebook, with a message naming notebook, cell and the fix."""
from __future__ import annotations

import copy
import json
import re
import subprocess
import sys
from pathlib import Path

import nbformat
import pytest

ROOT = Path(__file__).resolve().parents[2]
if str(ROOT / "tools") not in sys.path:
    sys.path.insert(0, str(ROOT / "tools"))
import nbfmt  # noqa: E402
import nblint  # noqa: E402

NOTEBOOKS = sorted((ROOT / "notebooks").glob("*.ipynb"))
#: The translated editions (tools/i18n.py): every rule holds there too, in the edition's language.
EDITIONS = sorted(p for folder in nblint.EDITIONS for p in (ROOT / "notebooks" / folder).glob("*.ipynb"))


# --- the stored notebooks ---------------------------------------------------------------------------

@pytest.mark.parametrize("path", NOTEBOOKS + EDITIONS, ids=lambda p: str(p.relative_to(ROOT / "notebooks")))
def test_stored_notebook_passes_every_rule(path):
    findings = nblint.lint([path])
    assert not findings, "\n".join(map(str, findings))


def test_the_whole_workbook_passes_the_workbook_rules():
    findings = nblint.lint(NOTEBOOKS, rules=[r.name for r in nblint.RULES.values() if r.scope == "workbook"])
    assert not findings, "\n".join(map(str, findings))


# --- a synthetic notebook that follows every rule -------------------------------------------------------

def _code(source: str, count: int, text: str = "", tags: tuple = ()) -> dict:
    cell = nbformat.v4.new_code_cell(source, execution_count=count)
    cell.id = f"code-{count}"
    if text:
        cell.outputs = [nbformat.v4.new_output("stream", name="stdout", text=text)]
    if tags:
        cell.metadata["tags"] = list(tags)
    return cell


def _markdown(source: str, key: str) -> dict:
    cell = nbformat.v4.new_markdown_cell(source)
    cell.id = f"md-{key}"
    return cell


def write_workbook(folder: Path, name: str = "05_synthetic.ipynb", data: dict | None = None) -> Path:
    """A folder laid out like the repository (notebooks/, exercises/, tests/) with one notebook:
    ``data`` (a notebook as JSON) or the synthetic good one, written as tools/nbfmt.py writes it."""
    (folder / "notebooks" / "exercises").mkdir(parents=True, exist_ok=True)
    (folder / "tests" / "workbook").mkdir(parents=True, exist_ok=True)
    (folder / "notebooks" / "exercises" / "topic.py").write_text("def check_double(f): ...\ndef check_half(f): ...\n")
    (folder / "tests" / "workbook" / "test_exercises_topic.py").write_text("")
    path = folder / "notebooks" / name
    notebook = nbformat.from_dict(data) if data is not None else good_notebook(name)
    path.write_text(nbfmt.serialise(notebook), encoding="utf-8")
    return path


def good_notebook(name: str) -> nbformat.NotebookNode:
    """Every rule's way: title and badge, Colab and setup cells, two exercises with solutions, summary.
    Built in the old storage (plain '# Solution' comments, no form view) and formatted by nbfmt."""
    badge = nblint.project_home.colab_badge(f"notebooks/{name}")
    colab = nblint.COLAB_CELL.replace("# @title Colab only", "# Colab only", 1)
    nb = nbformat.v4.new_notebook()
    nb.metadata = {"kernelspec": {"display_name": "Python 3", "language": "python", "name": "python3"},
                   "language_info": {"name": "python", "version": "3.11.7"}}
    nb.cells = [
        _markdown(f"# {name[:2]} · Synthetic\n\n{badge}", "title"),
        _markdown("**Learning objectives**\n\n- double\n\n**Run time.** 5 s.\n\n## Setup", "overview"),
        _code(colab, 1, tags=("colab",)),
        _code(f"{nblint.SETUP_LINE}\nfrom exercises.topic import check_double, check_half", 2, "TensorFlow 2.21.0\n"),
        _markdown("## Exercise 1\n\nDouble a number.", "ex1"),
        _code("def double(x):\n    return 2 * x\n\ncheck_double(double)", 3, "Correct! ...\n"),
        _markdown("**Solution** to exercise 1.", "sol1"),
        _code("# Solution: add it to itself\ndef double_solution(x):\n    return x + x\n\ncheck_double.confirm(double_solution)",
              4, "This solution passes check_double.\n", tags=("solution",)),
        _markdown("## Exercise 2\n\nHalve a number.", "ex2"),
        _code("def half(x):\n    return x / 2\n\ncheck_half(half)", 5, "Correct! ...\n"),
        _markdown("**Solution** to exercise 2.", "sol2"),
        _code("def half_solution(x):\n    return 0.5 * x\n\ncheck_half.confirm(half_solution)", 6,
              "This solution passes check_half.\n", tags=("solution",)),
        _markdown("## Summary\n\nDoubling and halving.", "summary"),
    ]
    nb.cells[2].metadata["jupyter"] = {"source_hidden": True}
    for index in (7, 11):
        nb.cells[index].metadata["jupyter"] = {"source_hidden": True}
    nbfmt.format_notebook(nb)
    return nb


@pytest.fixture
def good(tmp_path) -> Path:
    return write_workbook(tmp_path)


def test_the_synthetic_notebook_passes_every_rule(good):
    findings = nblint.lint([good])
    assert not findings, "\n".join(map(str, findings))


# --- one planted violation per rule ------------------------------------------------------------------
# Each case: (mutation of the notebook's JSON, the cell the finding names (1-based; None: the notebook),
# a fragment of the message). Cells of the synthetic notebook: 1 title, 2 overview, 3 Colab, 4 setup,
# 5 exercise-1 text, 6 exercise 1, 7 announcement, 8 solution 1, 9-12 exercise 2, 13 summary.

def source(nb, index):
    return "".join(nb["cells"][index]["source"])


def set_source(nb, index, text):
    nb["cells"][index]["source"] = text


def add_output(nb, index, output):
    nb["cells"][index]["outputs"].append(output)


def stream(text):
    return {"output_type": "stream", "name": "stdout", "text": text}


def tag(nb, index, *tags):
    nb["cells"][index]["metadata"].setdefault("tags", []).extend(tags)


CASES = {
    "title-cell": (lambda nb: set_source(nb, 0, "Synthetic\n" + source(nb, 0)), 1, "markdown title starting with '# 05 · '"),
    "colab-badge": (lambda nb: set_source(nb, 0, "# 05 · Synthetic"), 1, "no Open-in-Colab badge"),
    "kernelspec": (lambda nb: nb["metadata"]["kernelspec"].update(name="python2"), None, "kernelspec is 'python2'"),
    "clean-run": (lambda nb: nb["cells"][7].update(execution_count=9), 8, "execution counts [1, 2, 3, 9, 5, 6] are not 1..6"),
    "undeclared-error": (lambda nb: add_output(nb, 5, {"output_type": "error", "ename": "ValueError", "evalue": "x",
                                                       "traceback": ["ValueError: x"]}), 6, "stores an error (ValueError)"),
    "log-noise": (lambda nb: add_output(nb, 5, stream("oneDNN custom operations are on\n")), 6, "TensorFlow log noise"),
    "machine-path": (lambda nb: add_output(nb, 5, stream("saved to /home/alice/model\n")), 6, "machine path '/home/alice'"),
    "memory-address": (lambda nb: add_output(nb, 5, stream("<Layer at 0x7f3a2b1c9d>\n")), 6, "memory address"),
    "file-size": (lambda nb: add_output(nb, 5, stream("x" * 3_100_000)), None, "3.1 MB (at most 3 MB)"),
    "nbval-skip": (lambda nb: tag(nb, 5, "nbval-skip"), 6, "skipped by nbval"),
    "trained-compared": (lambda nb: tag(nb, 5, "trained"), 6, "tagged trained but nbval compares its output"),
    "signed-zero": (lambda nb: add_output(nb, 5, stream("levels [-2. -0.  2.]\n")), 6, "prints a negative zero"),
    "ignore-output-reason": (lambda nb: tag(nb, 5, "nbval-ignore-output"), 6, "neither a widget, a timing nor a trained cell"),
    "skeleton-parts": (lambda nb: set_source(nb, 12, "## Wrap-up"), None, "no 'Summary' part"),
    "colab-cell": (lambda nb: set_source(nb, 2, source(nb, 2).replace("-q {repo}", "{repo}")), 3, "not the Colab set-up cell"),
    "setup-line": (lambda nb: set_source(nb, 3, "import tensorflow as tf\n" + source(nb, 3)), 4,
                   "must open with 'import workbook; workbook.setup()'"),
    "form-view": (lambda nb: nb["cells"][7]["metadata"].pop("cellView"), 8,
                  "solution 1 is not stored in form view under '# @title Solution to exercise 1' (missing: cellView form)"),
    "two-exercises": (lambda nb: nb["cells"][11]["metadata"].update(tags=[]), None, "has 1 solution cells"),
    "solution-announced": (lambda nb: set_source(nb, 6, "Try it first."), 8, "not announced"),
    "solution-executed": (lambda nb: nb["cells"][7].update(outputs=[]), 8, "no stored output"),
    "solution-own-names": (lambda nb: set_source(nb, 7, source(nb, 7).replace("double_solution", "double")), 8,
                           "redefines ['double']"),
    "checks-in-modules": (lambda nb: set_source(nb, 5, "def check_exercise_3(f):\n    pass\n" + source(nb, 5)), 6,
                          "defines a self-check inline"),
    "legacy-in-appendix": (lambda nb: set_source(nb, 5, "tf.compat.v1.disable_eager_execution()\n" + source(nb, 5)), 6,
                           "runs tf.compat.v1 without a LEGACY label"),
    "custom-gradient-first": (None, None, "notebook 00 defines no @tf.custom_gradient"),  # planted as notebook 00, below
    "widget-state": (lambda nb: nb["metadata"].update(widgets={"application/vnd.jupyter.widget-state+json": {}}), None,
                     "stores widget state"),
    "widget-picture": (lambda nb: add_output(nb, 5, {"output_type": "display_data", "metadata": {},
                                                     "data": {nblint.WIDGET_VIEW: {"model_id": "1"}, "text/plain": "w"}}),
                       6, "not followed by a static picture"),
    "max-cells": (lambda nb: nb["cells"].extend(copy.deepcopy(nb["cells"][12]) | {"id": f"extra-{i}"} for i in range(28)),
                  None, "has 41 cells (at most 40)"),
    "max-words": (lambda nb: set_source(nb, 4, "## Exercise 1\n\n" + "word " * 2000), None, "markdown words (at most 2000)"),
    "max-code-lines": (lambda nb: set_source(nb, 5, "x = 1\n" * 24 + source(nb, 5)), 6, "has 27 code lines (at most 25)"),
    "workbook-words": (None, None, "the workbook has"),  # planted with a lower limit, below
    "formatted": (lambda nb: nb["metadata"]["kernelspec"].update(display_name="Python 3"), None,
                  "not stored as tools/nbfmt.py writes it (kernelspec)"),
}


def test_every_rule_has_a_planted_violation():
    assert set(CASES) == set(nblint.RULES)


@pytest.mark.parametrize("name", sorted(CASES))
def test_each_rule_catches_its_planted_violation(name, good, monkeypatch):
    mutate, cell, fragment = CASES[name]
    data = json.loads(good.read_text())
    if name == "custom-gradient-first":   # notebook 00 uses a gradlab op and defines no custom gradient
        good.unlink()
        set_source(data, 0, source(data, 0).replace("# 05 ·", "# 00 ·").replace("05_synthetic", "00_synthetic"))
        set_source(data, 5, "gradlab.scale_gradient(x, 0.5)\n" + source(data, 5))
        path = write_workbook(good.parents[1], "00_synthetic.ipynb", data)
    else:
        if name == "workbook-words":
            monkeypatch.setattr(nblint, "MAX_TOTAL_WORDS", 10)
        else:
            mutate(data)
        path = write_workbook(good.parents[1], good.name, data)
    findings = [f for f in nblint.lint([path]) if f.rule == name and fragment in f.message]
    assert findings, f"{name} did not say {fragment!r}; all findings: {list(map(str, nblint.lint([path])))}"
    finding = findings[0]
    assert finding.cell == cell, str(finding)
    assert fragment in finding.message, str(finding)
    text = str(finding)
    where = f"{path.name}: cell {cell}: " if cell else ("notebooks" if name == "workbook-words" else path.name)
    assert where in text and text.endswith(f"[{name}]"), text


@pytest.mark.parametrize("text, found", [
    ("[-0. 1.]", True), ("[-0.0000, -0.0000]", True), ("x = -0\n", True), ("-0.0e+00", True),
    ("[-0.0001 0.]", False), ("-0.5", False), ("-10.", False), ("1e-0", False), ("x-0.0", False)])
def test_a_negative_zero_is_told_from_a_small_negative_number(text, found):
    assert bool(nblint.NEGATIVE_ZERO.search(text)) is found


@pytest.mark.parametrize("tags", [("signed-zero",), ("nbval-ignore-output", "trained")])
def test_a_negative_zero_shown_on_purpose_or_not_compared_passes(good, tags):
    data = json.loads(good.read_text())
    add_output(data, 5, stream("forward [ 0.5 -0. ]\n"))
    tag(data, 5, *tags)
    path = write_workbook(good.parents[1], good.name, data)
    assert not [f for f in nblint.lint([path]) if f.rule == "signed-zero"]


def test_the_module_and_test_checks_need_the_files(good):
    (good.parents[1] / "tests" / "workbook" / "test_exercises_topic.py").unlink()
    findings = [str(f) for f in nblint.lint([good])]
    assert findings == [f"{good}: cell 4: exercises/topic.py has no tests: add tests/workbook/test_exercises_topic.py "
                        "[checks-in-modules]"], findings
    (good.parent / "exercises" / "topic.py").unlink()
    assert "notebooks/exercises/topic.py does not exist" in str(nblint.lint([good])[0])


def test_a_colab_cell_out_of_form_view_is_named(good):
    data = json.loads(good.read_text())
    set_source(data, 2, source(data, 2).replace("# @title ", "# ", 1))
    path = write_workbook(good.parents[1], good.name, data)
    found = {f.rule: f.message for f in nblint.lint([path])}
    assert "the Colab cell is not in form view (missing: the '# @title' first line)" in found["form-view"]
    assert "colab-cell" not in found, "the Colab cell's wording is the same with or without its title"


def test_a_fork_that_changes_the_homepage_is_told_where_the_old_home_remains(tmp_path):
    """A fork changes pyproject.toml's Homepage alone: the linter, reading it, names the title cell's
    badge and the Colab cell of a notebook that still points to the old home, with both URLs."""
    fork = "https://github.com/someone/workbook-fork"
    (tmp_path / "tools").mkdir()
    for name in ("nblint.py", "nbfmt.py", "project_home.py"):
        (tmp_path / "tools" / name).write_bytes((ROOT / "tools" / name).read_bytes())
    pyproject = (ROOT / "pyproject.toml").read_text()
    homepage = nblint.project_home.HOMEPAGE
    assert pyproject.count(f'Homepage = "{homepage}"') == 1
    (tmp_path / "pyproject.toml").write_text(pyproject.replace(f'Homepage = "{homepage}"', f'Homepage = "{fork}"'))
    code = ("import sys; sys.path.insert(0, 'tools'); import nblint\n"
            f"for f in nblint.lint([{str(NOTEBOOKS[0])!r}], rules=['colab-badge', 'colab-cell']): print(f.rule, f.message)")
    result = subprocess.run([sys.executable, "-c", code], cwd=tmp_path, capture_output=True, text=True, timeout=60)
    assert result.returncode == 0, result.stderr
    found = dict(line.split(" ", 1) for line in result.stdout.splitlines())
    assert set(found) == {"colab-badge", "colab-cell"}, result.stdout
    old = nblint.project_home.GITHUB_PATH
    assert f"it names {old}, not pyproject.toml's Homepage {fork}" in found["colab-badge"]
    badge = f"colab.research.google.com/github/someone/workbook-fork/blob/main/notebooks/{NOTEBOOKS[0].name}"
    assert badge in found["colab-badge"]
    assert f"the Colab cell clones {homepage}, not pyproject.toml's Homepage {fork}" in found["colab-cell"]


# --- the command line ------------------------------------------------------------------------------

def run(*args, cwd=ROOT):
    return subprocess.run([sys.executable, str(ROOT / "tools" / "nblint.py"), *map(str, args)],
                          cwd=cwd, capture_output=True, text=True, timeout=120)


def test_the_command_prints_one_line_per_finding_and_exits_1(good):
    data = json.loads(good.read_text())
    tag(data, 5, "nbval-skip")
    write_workbook(good.parents[1], good.name, data)
    result = run(good.parent)   # a folder: its notebooks
    assert result.returncode == 1, result.stdout + result.stderr
    lines = result.stdout.splitlines()
    assert lines[0] == f"{good}: cell 6: is skipped by nbval: every cell runs in CI " \
                       "(tag nbval-ignore-output if its output cannot be stable) [nbval-skip]"
    assert lines[-1] == f"1 notebooks, {len(nblint.RULES)} rules, 1 findings"


def test_the_command_exits_0_on_a_clean_notebook(good):
    result = run(good)
    assert result.returncode == 0 and result.stdout.endswith("0 findings\n"), result.stdout + result.stderr


def test_stats_table_shows_each_notebook_the_totals_and_the_limits(good):
    result = run("--stats", good)
    assert result.returncode == 0, result.stderr
    lines = result.stdout.splitlines()
    assert lines[0].split() == ["notebook", "cells", "words", "code", "lines", "longest", "visible", "sol."]
    row = lines[1].split()
    assert row[0] == good.name and row[1] == "13"
    assert row[5] == "0", "no visible solutions"
    assert lines[2].split()[0] == "total" and lines[3].split()[:4] == ["limits", "<=40", "<=2000", "<=25"]
    assert re.match(r"workbook: \d+ of at most 28,000 markdown words", lines[4])


def test_stats_marks_a_notebook_over_a_limit(good):
    data = json.loads(good.read_text())
    set_source(data, 5, "x = 1\n" * 30)
    write_workbook(good.parents[1], good.name, data)
    row = run("--stats", good).stdout.splitlines()[1].split()
    assert row[4] == "30!", row


def test_the_rule_list_in_developers_md_is_the_linters():
    listed = run("--list").stdout.strip()
    assert listed.count("\n") + 1 == len(nblint.RULES)
    assert listed in (ROOT / "DEVELOPERS.md").read_text(), (
        "DEVELOPERS.md's rule list is out of date: paste the output of python tools/nblint.py --list")


def test_a_solution_whose_output_states_the_answer_is_named(good):
    """After Run All JupyterLab shows a solution's output, and Colab always does: only "passes" may show."""
    data = json.loads(good.read_text())
    data["cells"][7]["outputs"] = [{"output_type": "stream", "name": "stdout",
                                    "text": ["Correct! double(2) = 4, by x + x.\n"]}]
    path = write_workbook(good.parents[1], good.name, data)
    findings = [f for f in nblint.lint([path]) if f.rule == "solution-executed"]
    assert len(findings) == 1 and "Correct! double(2) = 4" in findings[0].message, list(map(str, findings))
    assert "check_exercise_N.confirm" in findings[0].message


# --- a translated edition: the same rules, in its language ---------------------------------------------

def chinese_notebook(name: str = "05_synthetic.ipynb") -> nbformat.NotebookNode:
    """The synthetic notebook as its Chinese edition has it: Chinese prose, the Chinese setup line and verdicts."""
    nb = good_notebook(name)
    nb.cells[0].source = nb.cells[0].source.replace(f"notebooks/{name}", f"notebooks/zh/{name}")
    nb.cells[1].source = "**学习目标**\n\n- 翻倍\n\n**运行时间。** 5 秒。\n\n## 环境设置"
    nb.cells[3].source = nb.cells[3].source.replace(nblint.SETUP_LINE, nblint.EDITIONS["zh"]["setup"])
    nb.cells[4].source, nb.cells[8].source, nb.cells[12].source = "## 练习 1\n\n翻倍。", "## 练习 2\n\n减半。", "## 小结"
    for index, check in ((7, "check_double"), (11, "check_half")):
        nb.cells[index - 1].source = "**参考答案**（下一个单元格）。"
        nb.cells[index].outputs[0].text = f"这个参考答案通过了 {check}。\n"
    return nb


@pytest.fixture
def chinese(tmp_path) -> Path:
    english = write_workbook(tmp_path)
    path = english.parent / "zh" / english.name
    path.parent.mkdir()
    path.write_text(nbfmt.serialise(chinese_notebook()), encoding="utf-8")
    return path


def test_a_chinese_edition_passes_every_rule_in_its_language(chinese):
    nb = nblint.Notebook(chinese)
    assert nb.edition == "zh" and nb.repository_path == "notebooks/zh/05_synthetic.ipynb"
    findings = nblint.lint([chinese])
    assert not findings, "\n".join(map(str, findings))


@pytest.mark.parametrize("rule, mutate, message", [
    ("setup-line", lambda nb: nb.cells[3].update(source=nb.cells[3].source.replace('language="zh_CN"', "")),
     'workbook.setup(language="zh_CN")'),
    ("colab-badge", lambda nb: nb.cells[0].update(source=nb.cells[0].source.replace("notebooks/zh/", "notebooks/")),
     "notebooks/zh/05_synthetic.ipynb"),
    ("skeleton-parts", lambda nb: nb.cells[12].update(source="## Summary"), "'小结'"),
    ("solution-executed", lambda nb: nb.cells[7].outputs[0].update(text="This solution passes check_double.\n"),
     "may state the answer"),
])
def test_the_edition_rules_speak_its_language(chinese, rule, mutate, message):
    nb = nbformat.read(chinese, as_version=4)
    mutate(nb)
    chinese.write_text(nbfmt.serialise(nb), encoding="utf-8")
    findings = [f for f in nblint.lint([chinese]) if f.rule == rule]
    assert findings and message in str(findings[0]), nblint.lint([chinese])


def test_an_edition_counts_no_words_towards_the_workbook(chinese):
    nb = nblint.Notebook(chinese)
    assert not list(nblint.RULES["max-words"].check(nb))
    assert not list(nblint.RULES["workbook-words"].check([nb]))
