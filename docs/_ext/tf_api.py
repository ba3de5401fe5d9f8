"""Which inline-code literals name a public TensorFlow or Keras API, and the page that documents it.

Used by the book (docs/_ext/gradlab_book.py) and by tests/test_book.py. Nothing is fetched: a name
is looked up in the installed, pinned TensorFlow and Keras (the book's autodoc imports TensorFlow
anyway), only through their public API modules, so a name is linked only if it really is public
there: ``tf.py_func`` (TF1 only) and ``tf.Session`` are not, ``tf.compat.v1.py_func`` is.

URLs are tensorflow.org's: ``https://www.tensorflow.org/api_docs/python/tf/<path>``, the name with
its dots as slashes. A ``keras.*`` name links to the page of the same object under ``tf.keras``
(``keras.layers.Layer`` -> ``tf/keras/layers/Layer``): tf.keras *is* Keras 3 since TensorFlow 2.16
and tensorflow.org documents it at URLs derived from the name, which keras.io's are not
(``keras.io/api/layers/base_layer/#layer-class``). A Keras name missing from tf.keras at the same
path links to the tf.keras name of the same object (``keras.saving.register_keras_serializable``
-> ``tf/keras/utils/register_keras_serializable``), or not at all.

Only modules, classes and functions are linked (each has its own page); constants such as
``tf.float32`` and members such as ``tf.GradientTape.gradient`` are not.
"""
from __future__ import annotations

import functools
import inspect
import re
import types

TF_DOCS = "https://www.tensorflow.org/api_docs/python/"
#: An inline literal that is a dotted name, optionally a decorator (``@tf.custom_gradient``) or a
#: call (``tf.stop_gradient(x)``, ``tf.grad_pass_through(f)(x)``): the whole literal links.
LITERAL = re.compile(r"@?(?P<name>(?:tf|keras)(?:\.[A-Za-z][A-Za-z0-9_]*)+)(?:\((?:[^()]|\([^()]*\))*\))*")
# Modules of the public API: TensorFlow's generated API tree and Keras 3's public modules.
_PUBLIC_MODULES = re.compile(r"tensorflow(\._api\.v2(\..*)?)?|keras(\.(?!src\b)[a-z_0-9.]*)?|keras\._tf_keras\.keras.*")
# Not documented on tensorflow.org as pages of their own (tf.compat.v2 repeats tf).
_EXCLUDED = ("tf.compat.v2",)


def _module_name(obj) -> str | None:
    """The module name of a module (or of TensorFlow's lazy-loaded tf.keras), else None."""
    if isinstance(obj, types.ModuleType) or type(obj).__name__ == "KerasLazyLoader":
        return getattr(obj, "__name__", None)
    return None


@functools.lru_cache(maxsize=None)
def _roots() -> dict:
    import keras
    import tensorflow as tf
    return {"tf": tf, "keras": keras}


@functools.lru_cache(maxsize=None)
def public_object(name: str):
    """The object ``name`` (``tf.x.y``, ``keras.x.y``) names in the public API, or None.

    Every step goes from a public API module to a name that module lists (``dir``), never through
    a private name; the object itself must be a module, a class or a function.
    """
    parts = name.split(".")
    if parts[0] not in ("tf", "keras") or len(parts) < 2 or any(name.startswith(x) for x in _EXCLUDED):
        return None
    obj = _roots()[parts[0]]
    for part in parts[1:]:
        module = _module_name(obj)
        if part.startswith("_") or module is None or not _PUBLIC_MODULES.fullmatch(module):
            return None
        try:
            if part not in dir(obj):
                return None
            obj = getattr(obj, part)
        except Exception:  # noqa: BLE001 (a lazy module that fails to load is not linkable)
            return None
    module = _module_name(obj)
    if module is not None:
        return obj if _PUBLIC_MODULES.fullmatch(module) else None
    return obj if inspect.isclass(obj) or inspect.isroutine(obj) or callable(obj) else None


@functools.lru_cache(maxsize=None)
def _tf_keras_names() -> dict[int, str]:
    """Every public class or function of tf.keras by ``id``, with its shortest name (then first)."""
    names: dict[int, str] = {}
    tf_keras = public_object("tf.keras")
    stack, seen = [("tf.keras", tf_keras)], set()
    while stack:
        prefix, module = stack.pop()
        if _module_name(module) in seen:
            continue
        seen.add(_module_name(module))
        for attr in sorted(dir(module)):
            name = f"{prefix}.{attr}"
            obj = public_object(name)
            if obj is None:
                continue
            if _module_name(obj) is not None:
                stack.append((name, obj))
            elif id(obj) not in names or (len(name), name) < (len(names[id(obj)]), names[id(obj)]):
                names[id(obj)] = name
    return names


def documented_name(name: str) -> str | None:
    """The ``tf.*`` name whose tensorflow.org page documents ``name``, or None."""
    obj = public_object(name)
    if obj is None:
        return None
    if name.startswith("tf."):
        return name
    same_path = "tf." + name
    if public_object(same_path) is obj:
        return same_path
    if _module_name(obj) is None:
        return _tf_keras_names().get(id(obj))
    return None


def api_url(literal: str) -> str | None:
    """The tensorflow.org URL for an inline literal that names a public TF/Keras API, else None.

    >>> api_url("@tf.custom_gradient")
    'https://www.tensorflow.org/api_docs/python/tf/custom_gradient'
    >>> api_url("keras.layers.Layer"), api_url("tf.py_func"), api_url("tf.float32")
    ('https://www.tensorflow.org/api_docs/python/tf/keras/layers/Layer', None, None)
    """
    match = LITERAL.fullmatch(literal.strip())
    if not match:
        return None
    name = documented_name(match.group("name"))
    return TF_DOCS + name.replace(".", "/") if name else None
