"""Removes the stored ipywidgets state from notebooks (run by `make execute` after executing them).

Every widget output in the workbook carries its own fallback, and a static picture follows it, so
the state (the PNG bytes of every explorer, and stale after any edit) would only bloat the files.
Usage: python tools/strip_widget_state.py notebooks/NN_name.ipynb [...]
"""
import sys

import nbformat

for path in sys.argv[1:]:
    notebook = nbformat.read(path, as_version=4)
    if notebook.metadata.pop("widgets", None) is not None:
        nbformat.write(notebook, path)
        print(f"removed the widget state from {path}")
