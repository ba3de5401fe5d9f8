"""The notebook formatter (tools/nbfmt.py): the workbook's storage conventions, what JupyterLab writes
on save (tests/project/test_browser.py checks that against a real JupyterLab), and ``--check``."""
from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import nbformat
import pytest

ROOT = Path(__file__).resolve().parents[2]
if str(ROOT / "tools") not in sys.path:
    sys.path.insert(0, str(ROOT / "tools"))
import nbfmt  # noqa: E402

NOTEBOOKS = sorted((ROOT / "notebooks").glob("*.ipynb")) + sorted((ROOT / "notebooks").glob("zh/*.ipynb"))


def notebook(*cells, **metadata) -> nbformat.NotebookNode:
    nb = nbformat.v4.new_notebook(metadata={"kernelspec": {"display_name": "Python 3", "language": "python",
                                                           "name": "python3"}, **metadata})
    for index, (source, meta) in enumerate(cells):
        cell = nbformat.v4.new_code_cell(source, metadata=meta)
        cell.id = f"cell-{index}"
        nb.cells.append(cell)
    return nb


def formatted(nb) -> nbformat.NotebookNode:
    text, _ = nbfmt.format_text(nbfmt.serialise(nb))
    return nbformat.reads(text, as_version=4)


def test_solutions_get_colabs_form_view_a_numbered_title_and_keep_their_hint():
    nb = formatted(notebook(
        ("x = 1", {}),
        ("# Solution: scale dy first, then clip\ny = 2", {"tags": ["solution"]}),
        ("# Solution to exercise 2\nz = 3", {"tags": ["solution"], "jupyter": {"source_hidden": True}}),
        ("w = 4", {"tags": ["solution"]}),
        ("# @title Solution to exercise 9: old title\n# more hint\nv = 5", {"tags": ["solution"]}),
        ("# Solution\nu = 6", {"tags": ["solution"], "collapsed": False,    # as a learner's expanded save leaves it
                               "jupyter": {"source_hidden": True, "outputs_hidden": False}}),
    ))
    sources = [cell.source for cell in nb.cells]
    assert sources == [
        "x = 1",
        "# @title Solution to exercise 1\n# scale dy first, then clip\ny = 2",
        "# @title Solution to exercise 2\nz = 3",
        "# @title Solution to exercise 3\nw = 4",
        "# @title Solution to exercise 4\n# old title\n# more hint\nv = 5",
        "# @title Solution to exercise 5\nu = 6",
    ]
    assert nb.cells[0].metadata == {}
    for cell in nb.cells[1:]:  # the code and the output hidden (the server settings keep them so after a Run All)
        assert cell.metadata == {"cellView": "form", "tags": ["solution"], "collapsed": True,
                                 "jupyter": {"source_hidden": True, "outputs_hidden": True}}


def test_the_colab_cell_gets_form_view_and_keeps_its_wording():
    nb = formatted(notebook(("# Colab only: fetch the workbook\nimport os", {"tags": ["colab"]}),
                            ("import os", {"tags": ["colab"]})))
    assert nb.cells[0].source == "# @title Colab only: fetch the workbook\nimport os"
    assert nb.cells[1].source == "# @title Colab only\nimport os"
    for cell in nb.cells:
        assert cell.metadata == {"cellView": "form", "tags": ["colab"], "jupyter": {"source_hidden": True}}


def test_what_jupyterlab_writes_on_save():
    """Measured with the pinned JupyterLab, on opening and saving and after Run All: the running
    kernel's kernelspec (name, display_name, language), no hidden outputs (running a cell deletes
    `collapsed` and jupyter.outputs_hidden, source_hidden stays), `collapsed` mirrored from
    jupyter.outputs_hidden (and back), `scrolled` kept only when true, and nbformat's serialisation
    (no trailing "" line in a source)."""
    nb = notebook(
        ("a = 1", {"jupyter": {"outputs_hidden": True}}),
        ("b = 2", {"collapsed": False}),
        ("c = 3", {"scrolled": False}),
        ("d = 4", {"scrolled": "auto"}),
        ("e = 5", {"scrolled": True}),
        ("f = 6", {"editable": True, "jupyter": {"source_hidden": False}}),
        ("g = 7", {"collapsed": True, "jupyter": {"source_hidden": True, "outputs_hidden": True}}),
        ("h = 8", {"jupyter": {"outputs_hidden": False}}),
        widgets={"application/vnd.jupyter.widget-state+json": {"state": {}}},
    )
    nb.metadata.kernelspec["env"] = {}
    text = nbfmt.serialise(nb).replace('"a = 1"', '"a = 1\\n",\n    ""')
    result, changes = nbfmt.format_text(text)
    data = json.loads(result)
    assert data["metadata"] == {"kernelspec": {"display_name": "Python 3 (ipykernel)", "language": "python",
                                               "name": "python3"}}
    metadata = [cell["metadata"] for cell in data["cells"]]
    assert metadata == [{},
                        {"collapsed": False, "jupyter": {"outputs_hidden": False}},
                        {}, {}, {"scrolled": True},
                        {"editable": True, "jupyter": {"source_hidden": False}},
                        {"jupyter": {"source_hidden": True}},
                        {"collapsed": False, "jupyter": {"outputs_hidden": False}}]
    assert data["cells"][0]["source"] == ["a = 1\n"]
    assert changes == ["serialisation", "widget state", "kernelspec", "cell 1: outputs shown", "cell 2: outputs_hidden",
                       "cell 3: scrolled", "cell 4: scrolled", "cell 7: outputs shown", "cell 8: collapsed"]
    assert result.endswith("}\n") and '\n "metadata": {\n  "kernelspec"' in result, "one-space indent, sorted keys"


def test_consecutive_streams_become_one_and_nothing_else_moves():
    """Where the kernel flushed stdout is timing: two stdout chunks in a row are stored as one."""
    nb = notebook(("print('a'); print('b')", {}))
    stream = lambda name, text: nbformat.v4.new_output("stream", name=name, text=text)  # noqa: E731
    nb.cells[0].outputs = [stream("stdout", "a\n"), stream("stdout", "b\n"), stream("stderr", "warn\n"),
                           stream("stdout", "c\n"), nbformat.v4.new_output("execute_result", data={"text/plain": "1"})]
    outputs = formatted(nb).cells[0].outputs
    assert [(o.output_type, o.get("name"), o.get("text")) for o in outputs] == [
        ("stream", "stdout", "a\nb\n"), ("stream", "stderr", "warn\n"), ("stream", "stdout", "c\n"),
        ("execute_result", None, None)]
    assert nbfmt.format_text(nbfmt.serialise(formatted(nb)))[1] == []


def test_formatting_is_idempotent_and_leaves_other_kernels_alone():
    nb = notebook(("# Solution\nx = 1", {"tags": ["solution"]}), ("import os", {"tags": ["colab"]}))
    once, _ = nbfmt.format_text(nbfmt.serialise(nb))
    twice, changes = nbfmt.format_text(once)
    assert twice == once and changes == []
    other = notebook(("x = 1", {}))
    other.metadata.kernelspec = {"display_name": "R", "language": "R", "name": "ir"}
    text = nbfmt.serialise(other)
    assert nbfmt.format_text(text) == (text, [])


def test_check_names_the_file_changes_nothing_and_exits_1(tmp_path):
    path = tmp_path / "nb.ipynb"
    path.write_text(nbfmt.serialise(notebook(("x = 1", {"tags": ["solution"]}))))
    before = path.read_bytes()
    tool = [sys.executable, str(ROOT / "tools" / "nbfmt.py")]
    result = subprocess.run([*tool, "--check", str(tmp_path)], capture_output=True, text=True, timeout=60)
    assert result.returncode == 1 and path.read_bytes() == before
    assert result.stdout == (f"{path}: not formatted (kernelspec; cell 1: title, cellView, source_hidden, outputs hidden): "
                             f"run python tools/nbfmt.py {path}\n")
    result = subprocess.run([*tool, str(path)], capture_output=True, text=True, timeout=60)
    assert result.returncode == 0 and result.stdout.startswith(f"formatted {path}: ")
    result = subprocess.run([*tool, "--check", str(path)], capture_output=True, text=True, timeout=60)
    assert result.returncode == 0 and result.stdout == "", result.stdout


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.name)
def test_formatting_a_stored_notebook_changes_only_metadata_and_first_lines(path):
    """Outputs, execution counts, ids and code stay; only a solution's or the Colab cell's first line
    (a hint moves to the second), cell metadata keys cellView, collapsed and (on those two) jupyter, and
    the kernelspec change."""
    before = nbformat.reads(path.read_text(encoding="utf-8"), as_version=4)
    after = nbformat.reads(nbfmt.format_text(path.read_text(encoding="utf-8"))[0], as_version=4)
    assert len(before.cells) == len(after.cells)
    for old, new in zip(before.cells, after.cells):
        assert (old.cell_type, old.id) == (new.cell_type, new.id)
        if old.cell_type == "code":
            assert old.outputs == new.outputs and old.execution_count == new.execution_count
        titled = old.cell_type == "code" and {"solution", "colab"} & set(old.metadata.get("tags", []))
        if titled:
            rest = old.source.split("\n")[1:]
            new_lines = new.source.split("\n")
            assert new_lines[0].startswith("# @title ")
            assert new_lines[1:] == rest or new_lines[2:] == rest, new.source[:200]
        else:
            assert old.source == new.source
        strip = {"cellView", "collapsed"} | ({"jupyter"} if titled else set())
        assert {k: v for k, v in old.metadata.items() if k not in strip} == \
            {k: v for k, v in new.metadata.items() if k not in strip}
    assert {k: v for k, v in before.metadata.items() if k not in ("kernelspec", "widgets")} == \
        {k: v for k, v in after.metadata.items() if k not in ("kernelspec", "widgets")}
