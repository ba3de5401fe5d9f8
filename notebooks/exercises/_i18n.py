"""The language a learner reads the workbook's messages in (self-check verdicts, the setup line).

A translated notebook chooses its language once, in its setup line: ``workbook.setup(language="zh_CN")``
sets :data:`LANGUAGE_VARIABLE` in the kernel's environment, and every message wrapped in :func:`_` is then
looked up, at the moment it is shown, in ``notebooks/locale/<language>/LC_MESSAGES/workbook.mo`` with Python's
own ``gettext`` (``tools/i18n.py`` extracts the messages and compiles the catalog). Without it, or for a message
the catalog lacks, the English is shown: an English notebook's output never changes. Exceptions raised by
gradlab and TensorFlow stay English; a verdict quotes them as they are.

A message is a ``str.format`` template, translated before it is filled in::

    raise NotYet(_("with factor={factor}, x receives {got}").format(factor=factor, got=got))
"""
from __future__ import annotations

import functools
import gettext
import os
from pathlib import Path

#: The environment variable that carries the chosen language ("zh_CN"); unset or "en": English.
LANGUAGE_VARIABLE = "GRADLAB_LANGUAGE"
DOMAIN = "workbook"
LOCALE_DIR = Path(__file__).resolve().parents[1] / "locale"


def language() -> str:
    """The language chosen by the notebook's setup line: ``"en"`` unless one was chosen."""
    return os.environ.get(LANGUAGE_VARIABLE) or "en"


@functools.lru_cache(maxsize=None)
def _translation(language: str) -> gettext.NullTranslations:
    return gettext.translation(DOMAIN, localedir=str(LOCALE_DIR), languages=[language], fallback=True)


def _(message: str) -> str:
    """``message`` in the chosen language (the English itself when there is no translation).

    Example:
      >>> _("Correct! ")
      'Correct! '
    """
    chosen = language()
    return message if chosen == "en" else _translation(chosen).gettext(message)
