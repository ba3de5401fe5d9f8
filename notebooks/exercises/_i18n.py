"""The language a learner reads the workbook's messages in (self-check verdicts, the setup line).

A translated notebook chooses its language once, in its setup line: ``workbook.setup(language="zh_CN")``
sets :data:`LANGUAGE_VARIABLE` in the kernel's environment, and every message wrapped in :func:`_` is then
looked up, at the moment it is shown, in ``notebooks/locale/<language>/LC_MESSAGES/workbook.mo`` with Python's
own ``gettext``, through gradlab's lookup ``gradlab._i18n.translator`` (``tools/i18n.py`` extracts the messages and
compiles the catalog). Without it, or for a message
the catalog lacks, the English is shown: an English notebook's output never changes. Exceptions raised by
gradlab and TensorFlow stay English; a verdict quotes them as they are.

A message is a ``str.format`` template, translated before it is filled in::

    raise NotYet(_("with factor={factor}, x receives {got}").format(factor=factor, got=got))
"""
from __future__ import annotations

from pathlib import Path

from gradlab._i18n import LANGUAGE_VARIABLE, language, translator

__all__ = ["LANGUAGE_VARIABLE", "language", "_"]

DOMAIN = "workbook"
LOCALE_DIR = Path(__file__).resolve().parents[1] / "locale"

#: ``message`` in the chosen language (the English itself when there is no translation), e.g.
#: ``_("Correct! ") == "Correct! "`` in an English notebook.
_ = translator(DOMAIN, LOCALE_DIR)
