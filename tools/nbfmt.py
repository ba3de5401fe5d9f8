"""The workbook's notebook formatter: stores every notebook the way the workbook keeps them.

Usage: python tools/nbfmt.py [--check] [notebooks/NN_name.ipynb ... | folder]   (default: notebooks/)

``make execute`` runs it after executing; ``make lint`` runs it with ``--check``, which changes
nothing, names every file that formatting would change (and what would change) and exits 1.
It never touches a cell's execution count, code beyond a solution's or the Colab cell's first line,
or what its outputs say. What it stores:

* one stream output where the kernel sent several in a row to the same stream (nbconvert's
  ``CoalesceStreamsPreprocessor``): where stdout was flushed depends on timing, not on the code, so
  every run would otherwise move the splits and change the file (nbval merges them before comparing);

* no ipywidgets state (notebook metadata ``widgets``): every widget output carries its own PNG
  fallback and a static picture follows it, so the state would only bloat the file;
* Colab's form view on the solutions and the Colab set-up cell: cell metadata ``"cellView": "form"``
  and a first line ``# @title ...`` (Colab then shows the title and hides the code), and
  ``jupyter.source_hidden`` (JupyterLab shows the collapsed cell's first line). A solution (a code
  cell tagged ``solution``) gets the title ``# @title Solution to exercise N`` (N counts the
  solutions from 1); a first comment such as ``# Solution: scale dy first`` becomes the title, its
  hint kept as a second line (``# scale dy first``). The Colab cell (tag ``colab``) keeps its own
  wording: ``# @title Colab only: ...``. A solution's output is collapsed as well, and says no more
  than "This solution passes check_exercise_N." (``tools/nblint.py``'s rule ``solution-executed``);
* what JupyterLab writes when it opens a notebook and saves it untouched, and when it runs every
  cell (Restart and Run All) and saves it, so that both leave the file byte for byte as it was and a
  learner's clone stays clean in ``git status``. Measured with the pinned JupyterLab 4.6
  (``tests/project/test_browser.py`` opens and saves every notebook, and runs all of 01 and 08):
  - the kernelspec as the running kernel's spec states it: ``name``, ``display_name``,
    ``language`` and nothing else; ipykernel's ``python3`` is displayed "Python 3 (ipykernel)";
  - no hidden outputs on a code cell but a solution: running a cell shows its output, and JupyterLab
    then deletes ``collapsed`` and ``jupyter.outputs_hidden`` (``jupyter.source_hidden`` stays), so
    neither is stored as ``true``. A solution keeps both ``true`` (its output is collapsed too, so a
    solution opened in JupyterLab shows one line and nothing else); after a Run All the server
    settings (``jupyter/jupyter_server_config.py``) put them back on save;
  - ``collapsed`` mirrors ``jupyter.outputs_hidden`` on every cell (either one sets the other; on
    a code cell, what remains of them is ``false``);
  - a code cell's ``scrolled`` is dropped unless it is ``true`` (``false`` and ``"auto"`` go);
  - nbformat's serialisation, as Jupyter Server writes files (one-space indent, sorted keys, UTF-8
    unescaped, a final newline, multi-line strings split into lines without a trailing ``""``).
  JupyterLab also rewrites ``language_info`` from the kernel; ``make execute`` stores the kernel's
  own, and the server settings ``make lab`` and Binder load (``jupyter/jupyter_server_config.py``)
  put the stored one back on save, so a learner on another Python version keeps a clean clone too.
"""
from __future__ import annotations

import argparse
import re
import sys
from pathlib import Path

import nbformat
from nbconvert.preprocessors import CoalesceStreamsPreprocessor

ROOT = Path(__file__).resolve().parents[1]
#: The translated editions' folders under notebooks/ (tools/i18n.py builds them), formatted and linted too.
EDITION_FOLDERS = ("zh",)

#: The kernelspec JupyterLab stores once the kernel has started: that kernel's spec (ipykernel's python3).
KERNELSPECS = {"python3": {"display_name": "Python 3 (ipykernel)", "language": "python", "name": "python3"}}
FORM = {"cellView": "form"}
TITLE = "# @title "
#: A solution's first comment as the workbook wrote it before titles, or a title already there.
SOLUTION_COMMENT = re.compile(r"#\s*(?:@title\s+)?Solution\b(?:\s+to\s+exercise\s+\d+)?\s*[:.,;-]?\s*(?P<hint>.*)")
COMMENT = re.compile(r"#\s*(?:@title\b\s*)?(?P<text>.*)")


def tags(cell) -> list:
    return cell.get("metadata", {}).get("tags", [])


def strip_widget_state(nb) -> list[str]:
    """Drops the stored ipywidgets state (notebook metadata ``widgets``)."""
    return ["widget state"] if nb.metadata.pop("widgets", None) is not None else []


def merge_streams(cell) -> list[str]:
    """Consecutive stream outputs of one name become one (where the kernel flushed is timing)."""
    if cell.cell_type != "code" or not cell.outputs:
        return []
    before = nbformat.from_dict([dict(output) for output in cell.outputs])
    CoalesceStreamsPreprocessor().preprocess_cell(cell, {}, 0)
    return ["streams merged"] if cell.outputs != before else []


def store_kernelspec(nb) -> list[str]:
    """The kernelspec as JupyterLab rewrites it from the running kernel: name, display_name, language."""
    spec = nb.metadata.get("kernelspec")
    wanted = KERNELSPECS.get(spec.get("name")) if spec else None
    if wanted is None or dict(spec) == wanted:
        return []
    nb.metadata["kernelspec"] = nbformat.from_dict(dict(wanted))
    return ["kernelspec"]


def hide_outputs(cell) -> list[str]:
    """A solution's output is collapsed too: ``collapsed`` and ``jupyter.outputs_hidden`` both ``true``."""
    meta = cell.metadata
    jupyter = meta.setdefault("jupyter", {})
    if meta.get("collapsed") is True and jupyter.get("outputs_hidden") is True:
        return []
    meta["collapsed"] = jupyter["outputs_hidden"] = True
    return ["outputs hidden"]


def show_outputs(cell) -> list[str]:
    """No hidden outputs on a code cell but a solution: running it (Run All) shows them, deleting both keys."""
    meta = cell.metadata
    jupyter = meta.get("jupyter", {})
    hidden = meta.get("collapsed") is True or jupyter.get("outputs_hidden") is True
    if cell.cell_type != "code" or "solution" in tags(cell) or not hidden:
        return []
    meta.pop("collapsed", None)
    jupyter.pop("outputs_hidden", None)
    if "jupyter" in meta and not jupyter:
        del meta["jupyter"]
    return ["outputs shown"]


def mirror_collapsed(cell) -> list[str]:
    """``collapsed`` and ``jupyter.outputs_hidden`` agree, as JupyterLab's cell model keeps them."""
    meta, jupyter = cell.metadata, cell.metadata.get("jupyter", {})
    if "collapsed" in meta:
        if jupyter.get("outputs_hidden") != meta["collapsed"]:
            meta.setdefault("jupyter", {})["outputs_hidden"] = meta["collapsed"]
            return ["outputs_hidden"]
    elif "outputs_hidden" in jupyter:
        meta["collapsed"] = jupyter["outputs_hidden"]
        return ["collapsed"]
    return []


def drop_unscrolled(cell) -> list[str]:
    """A code cell's ``scrolled`` survives a JupyterLab save only as ``true``."""
    if cell.cell_type != "code" or "scrolled" not in cell.metadata:
        return []
    value = cell.metadata["scrolled"]
    if value is True:
        return []
    if value != "auto" and value:
        cell.metadata["scrolled"] = True
    else:
        del cell.metadata["scrolled"]
    return ["scrolled"]


def form_view(cell) -> list[str]:
    """Colab's form view (``cellView: form``) and JupyterLab's collapsed input (``jupyter.source_hidden``)."""
    changes = []
    if cell.metadata.get("cellView") != "form":
        cell.metadata.update(FORM)
        changes.append("cellView")
    jupyter = cell.metadata.setdefault("jupyter", {})
    if jupyter.get("source_hidden") is not True:
        jupyter["source_hidden"] = True
        changes.append("source_hidden")
    return changes


def retitle(cell, title: str, body: str) -> list[str]:
    """Makes ``title`` the cell's first line, above ``body``."""
    before = cell.source
    cell.source = f"{title}\n{body}" if body else title
    return [] if cell.source == before else ["title"]


def title_solution(cell, number: int) -> list[str]:
    """A solution's first line is ``# @title Solution to exercise N``; a hint after it moves to line two."""
    first, _, rest = cell.source.partition("\n")
    match = SOLUTION_COMMENT.fullmatch(first.strip())
    if match:
        hint = match["hint"].strip()
        body = f"# {hint}\n{rest}" if hint else rest
    else:
        body = cell.source  # no title yet: it goes above whatever the cell starts with
    return retitle(cell, f"{TITLE}Solution to exercise {number}", body) + form_view(cell) + hide_outputs(cell)


def title_colab(cell) -> list[str]:
    """The Colab set-up cell's first comment becomes its ``# @title``, its wording kept."""
    first, _, rest = cell.source.partition("\n")
    match = COMMENT.fullmatch(first.strip())
    if match and match["text"].strip():
        title, body = TITLE + match["text"].strip(), rest
    else:
        title, body = TITLE + "Colab only", cell.source
    return retitle(cell, title, body) + form_view(cell)


def format_notebook(nb) -> list[str]:
    """Applies every convention to a notebook (an nbformat NotebookNode) in place; returns what changed."""
    changes = strip_widget_state(nb) + store_kernelspec(nb)
    number = 0
    for index, cell in enumerate(nb.cells, 1):
        cell_changes = []
        if cell.cell_type == "code" and "solution" in tags(cell):
            number += 1
            cell_changes += title_solution(cell, number)
        elif cell.cell_type == "code" and "colab" in tags(cell):
            cell_changes += title_colab(cell)
        cell_changes += show_outputs(cell) + mirror_collapsed(cell) + drop_unscrolled(cell) + merge_streams(cell)
        if cell_changes:
            changes.append(f"cell {index}: {', '.join(cell_changes)}")
    return changes


def format_text(text: str) -> tuple[str, list[str]]:
    """The formatted file content for a notebook's text, and what changed."""
    nb = nbformat.reads(text, as_version=nbformat.NO_CONVERT)
    changes = ["serialisation"] if serialise(nb) != text else []
    changes += format_notebook(nb)
    return serialise(nb), changes


def serialise(nb) -> str:
    """A notebook's file content exactly as Jupyter Server saves it (``nbformat.write``)."""
    text = nbformat.writes(nb)
    return text if text.endswith("\n") else text + "\n"


def notebook_paths(args: list[str]) -> list[Path]:
    """The notebooks named, or found in the folders named (default: notebooks/ and its translated editions,
    notebooks/zh/), checkpoints left out."""
    paths = []
    for arg in args or [str(ROOT / "notebooks"), *(str(p) for p in sorted((ROOT / "notebooks").glob("*/"))
                                                  if p.is_dir() and p.name in EDITION_FOLDERS)]:
        path = Path(arg)
        found = sorted(path.glob("*.ipynb")) if path.is_dir() else [path]
        paths += [p for p in found if ".ipynb_checkpoints" not in p.parts]
    return paths


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("--check", action="store_true", help="change nothing; exit 1 if formatting would change a file")
    parser.add_argument("paths", nargs="*", help="notebooks or folders (default: notebooks/)")
    args = parser.parse_args(argv)
    unformatted = 0
    for path in notebook_paths(args.paths):
        text = path.read_text(encoding="utf-8")
        formatted, changes = format_text(text)
        if formatted == text:
            continue
        unformatted += 1
        if args.check:
            print(f"{path}: not formatted ({'; '.join(changes)}): run python tools/nbfmt.py {path}")
        else:
            path.write_text(formatted, encoding="utf-8")
            print(f"formatted {path}: {'; '.join(changes)}")
    return 1 if args.check and unformatted else 0


if __name__ == "__main__":
    sys.exit(main())
