"""The Chinese notebooks' ``import workbook``: the workbook's own ``notebooks/workbook.py``, one folder up.

A notebook's kernel starts in the notebook's folder, so ``import workbook`` in ``notebooks/zh/NN_name.ipynb``
finds this file. It puts ``notebooks/`` on ``sys.path`` (for ``workbook``, ``exercises`` and ``papers``, as the
English notebooks have them) and replaces itself in ``sys.modules`` by that ``workbook``: one module, one setup.
"""
import importlib.util
import sys
from pathlib import Path

_NOTEBOOKS = Path(__file__).resolve().parents[1]
if str(_NOTEBOOKS) not in sys.path:
    sys.path.insert(0, str(_NOTEBOOKS))
_spec = importlib.util.spec_from_file_location("workbook", _NOTEBOOKS / "workbook.py")
_module = importlib.util.module_from_spec(_spec)
sys.modules["workbook"] = _module        # `import workbook` binds what sys.modules holds once this file has run
_spec.loader.exec_module(_module)
