"""Stores every exercise solution collapsed (run by `make execute` after executing notebooks).

A code cell tagged ``solution`` gets ``metadata.jupyter.source_hidden`` and
``metadata.jupyter.outputs_hidden`` set, so JupyterLab shows it collapsed until the learner clicks
it; nbval still executes it. A collapsed cell still shows its *first line* as a placeholder, so a
solution must start with a comment, not with the answer: ``# Solution to exercise N`` is added
where it is missing. ``tests/project/test_project.py`` checks that every solution is stored so. The
Colab-only install cell (tag ``colab``, the first code cell) is stored with its source collapsed.
Usage: python tools/hide_solutions.py notebooks/NN_name.ipynb [...]
"""
import sys

import nbformat

for path in sys.argv[1:]:
    notebook = nbformat.read(path, as_version=4)
    changed = number = 0
    for cell in notebook.cells:
        if cell.cell_type == "code" and "colab" in cell.metadata.get("tags", []):
            # The Colab-only install cell: collapsed too, its first line says what it is.
            if not cell.metadata.setdefault("jupyter", {}).get("source_hidden"):
                cell.metadata["jupyter"]["source_hidden"] = True
                changed += 1
        if cell.cell_type == "code" and "solution" in cell.metadata.get("tags", []):
            number += 1
            hidden = cell.metadata.setdefault("jupyter", {})
            if cell.source.startswith("# Solution") and hidden.get("source_hidden") and hidden.get("outputs_hidden"):
                continue
            if not cell.source.startswith("# Solution"):
                cell.source = f"# Solution to exercise {number}\n" + cell.source
            hidden.update(source_hidden=True, outputs_hidden=True)
            changed += 1
    if changed:
        nbformat.write(notebook, path)
        print(f"collapsed {changed} solution cell(s) in {path}")
