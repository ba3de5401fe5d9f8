"""The explorers' labels in the learner's language (private).

The workbook's translated notebooks choose a language in their setup line, which sets the environment variable
``GRADLAB_LANGUAGE`` (``"zh_CN"``); an explorer built then shows its sliders' descriptions and tooltips from the
catalog shipped with gradlab, ``gradlab/locale/<language>/LC_MESSAGES/gradlab.mo``, through Python's ``gettext``.
Unset, or for a label the catalog lacks: the English. Errors and the figures' text stay English (a figure is
drawn by matplotlib, whose default font has no CJK glyphs). ``tools/i18n.py`` extracts every label marked
``N_("...")`` where it is defined into the catalog.
"""
from __future__ import annotations

from pathlib import Path

from gradlab._i18n import LANGUAGE_VARIABLE, translator

__all__ = ["LANGUAGE_VARIABLE", "N_", "translated"]

DOMAIN = "gradlab"
LOCALE_DIR = Path(__file__).resolve().parents[1] / "locale"


def N_(message: str) -> str:  # noqa: N802 (gettext's name for "mark for translation, translate later")
    """Marks ``message`` for the catalog where it is defined; :func:`translated` translates it where it is shown."""
    return message


#: ``message`` in the language ``GRADLAB_LANGUAGE`` names; the English itself without one or a translation.
translated = translator(DOMAIN, LOCALE_DIR)
