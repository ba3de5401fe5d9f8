"""Messages in the language a learner chose, through Python's ``gettext`` (private; shared by the workbook).

A translated notebook chooses its language once, in its setup line (``workbook.setup(language="zh_CN")``), which
sets the environment variable :data:`LANGUAGE_VARIABLE`. A function made by :func:`translator` looks every message
up at the moment it is shown, in ``<localedir>/<language>/LC_MESSAGES/<domain>.mo``; unset (or ``"en"``), or for a
message the catalog lacks, it returns the English itself, so that an English notebook's output never changes.

Two catalogs use it: gradlab's own (domain ``gradlab``, shipped in the wheel: the explorers' labels,
``gradlab/widgets/_labels.py``) and the workbook's (domain ``workbook``: the self-checks' verdicts,
``notebooks/exercises/_i18n.py``). Errors stay English, as TensorFlow's do.
"""
from __future__ import annotations

import functools
import gettext
import os
from pathlib import Path
from typing import Callable, Union

#: The environment variable that carries the chosen language (``"zh_CN"``); unset or ``"en"``: English.
LANGUAGE_VARIABLE = "GRADLAB_LANGUAGE"


def language() -> str:
    """The language chosen by the notebook's setup line: ``"en"`` unless one was chosen.

    Example:
      >>> import os
      >>> os.environ.pop(LANGUAGE_VARIABLE, None) and None
      >>> language()
      'en'
    """
    return os.environ.get(LANGUAGE_VARIABLE) or "en"


@functools.lru_cache(maxsize=None)
def _catalog(domain: str, localedir: str, language: str) -> gettext.NullTranslations:
    return gettext.translation(domain, localedir=localedir, languages=[language], fallback=True)


def translator(domain: str, localedir: Union[str, os.PathLike]) -> Callable[[str], str]:
    """A function that returns a message in the chosen :func:`language`, from the catalog ``domain`` in ``localedir``.

    The language is read each time a message is translated (a notebook may choose it after the import); each
    catalog is read once. A missing catalog or message gives the English message unchanged.

    Args:
      domain: the catalog's name, the ``<domain>.mo`` file's stem (``"gradlab"``, ``"workbook"``).
      localedir: the folder that holds ``<language>/LC_MESSAGES/<domain>.mo``.

    Returns:
      ``translate(message) -> str``.

    Raises:
      TypeError: ``domain`` is not a non-empty string, or ``localedir`` not a path.

    Example:
      >>> import os
      >>> os.environ.pop(LANGUAGE_VARIABLE, None) and None
      >>> translate = translator("gradlab", Path(__file__).parent / "locale")
      >>> translate("gradient factor ×")
      'gradient factor ×'
    """
    if not isinstance(domain, str) or not domain:
        raise TypeError(f"domain must be a catalog's name, a non-empty str; got {domain!r}")
    if not isinstance(localedir, (str, os.PathLike)):
        raise TypeError(f"localedir must be a folder's path (str or os.PathLike); got {type(localedir).__name__} "
                        f"{localedir!r}")
    folder = str(Path(localedir).resolve())

    def translate(message: str) -> str:
        chosen = language()
        return message if chosen == "en" else _catalog(domain, folder, chosen).gettext(message)

    translate.__doc__ = f"``message`` in the chosen language, from the {domain!r} catalog (the English without one)."
    return translate
