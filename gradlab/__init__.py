"""gradlab: modify the gradient of an op or a subgraph in TensorFlow, keep the forward pass.

The public API:

* ops (the forward value kept, the backward pass modified): :func:`map_gradient`, :func:`scale_gradient`,
  :func:`clip_gradient`, :func:`clip_gradient_norm`, :func:`reverse_gradient`,
  :func:`straight_through`, :func:`surrogate_step`;
* graph-mode overrides without the traps: :func:`register_gradient`, :func:`gradient_override`;
* checking: :func:`check_gradient`, :class:`GradientCheck`;
* diagnosis (why a gradient is None, NaN or zero, which op did it, on which line):
  :func:`explain_gradient`, :class:`GradientReport` of :class:`GradientDiagnosis` entries;
* probes (record the gradient that flows through a tensor, eagerly, in ``tf.function`` and XLA):
  :class:`GradientProbe`;
* Keras layers: :mod:`gradlab.layers` (``ScaleGradient``, ``ClipGradient``, ``ClipGradientNorm``,
  ``GradientReversal``: the ops as layers; ``ReLUGradient``, ``ReLUGradientActivation`` and
  ``with_relu_gradient``: a ReLU whose gradient follows another rule);
* with ``gradlab[notebook]``: :mod:`gradlab.plots` (forward value beside gradient, per-layer
  gradient norms, computation graphs) and :mod:`gradlab.widgets` (explorers: sliders that redraw
  a modified gradient in place).

Each module's ``__all__`` is the list; ``tests/library/test_public_api.py`` checks that this docstring, the
README's table and ``docs/api.md`` name every entry.

gradlab runs on TensorFlow 2.16 to 2.21 with Keras 3 and does not install TensorFlow itself: it uses
the build you have (``tensorflow``, ``tensorflow-cpu`` or a GPU build); importing it with another
TensorFlow, or none, raises an ``ImportError`` that says what to install.

Importing gradlab imports TensorFlow and adds only gradlab's own core modules: ``gradlab.layers``
(Keras layers) is loaded on first use, and so are the plotting and widget helpers. It changes no global state; in
particular it does not silence TensorFlow's C++ logging. To do that, set
``TF_CPP_MIN_LOG_LEVEL=2`` and ``TF_ENABLE_ONEDNN_OPTS=0`` in the environment *before* the first
``import tensorflow`` (the notebooks' setup cell, ``workbook.setup()``, does this).
"""
from __future__ import annotations

import importlib
from typing import Any

from gradlab._compat import import_tensorflow as _import_tensorflow

# A missing or unsupported TensorFlow gives a clear ImportError here, before the modules below
# fail on it obscurely (hence the imports after a statement, E402 in pyproject's ruff settings).
_import_tensorflow()

from gradlab.checking import GradientCheck, check_gradient
from gradlab.doctor import GradientDiagnosis, GradientReport, explain_gradient
from gradlab.graph import gradient_override, register_gradient
from gradlab import ops
from gradlab.ops import *  # noqa: F403  (the ops, exactly ops.__all__)
from gradlab.probes import GradientProbe

__version__ = "0.1.0"

__all__ = [
    *ops.__all__,
    "register_gradient",
    "gradient_override",
    "check_gradient",
    "GradientCheck",
    "explain_gradient",
    "GradientReport",
    "GradientDiagnosis",
    "GradientProbe",
    "layers",  # noqa: F405  (a lazy submodule: __getattr__ below)
]

_LAZY_SUBMODULES = ("layers", "plots", "widgets")


def __getattr__(name: str) -> Any:
    if name in _LAZY_SUBMODULES:
        return importlib.import_module(f"gradlab.{name}")
    raise AttributeError(f"module 'gradlab' has no attribute {name!r}")


def __dir__():
    return sorted(set(globals()) | set(_LAZY_SUBMODULES))
