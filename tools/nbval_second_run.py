"""A pytest plugin (`-p nbval_second_run`, loaded by make test): nbval runs each notebook top to bottom;
this adds a second run of every code cell, in the same kernel.

A learner edits a cell and runs it again, or runs everything twice: nothing may break then. After
the last cell of a notebook, every code cell is run once more, in order, in the kernel nbval used
(items named ``Cell N (run again)``). Their outputs are not compared (a timing or a random draw may
change), but a cell that raises fails the test unless it is tagged ``raises-exception``, exactly as
on the first run: a cell that registers a gradient under a fixed name, for example, fails here with
``KeyError: Registering two gradient with name ...``. pytest-xdist's ``--dist loadscope`` keeps a
notebook's items, both runs, on one worker.
"""
from __future__ import annotations

from collections import defaultdict


def pytest_collection_modifyitems(session, config, items):
    try:
        from nbval.plugin import IPyNbCell
    except ImportError:  # nbval not installed: nothing to extend
        return
    result, current, parent = [], [], None

    def flush():
        for cell in current:
            options = defaultdict(bool, cell.options)
            options["check"] = False                 # outputs may differ; exceptions still fail
            result.append(IPyNbCell.from_parent(parent, name=f"{cell.name} (run again)",
                                                cell_num=cell.cell_num, cell=cell.cell, options=options))

    for item in items:
        if isinstance(item, IPyNbCell):
            if item.parent is not parent:
                flush()
                current, parent = [], item.parent
            current.append(item)
        elif current:
            flush()
            current, parent = [], None
        result.append(item)
    flush()
    items[:] = result
