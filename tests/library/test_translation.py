"""gradlab._i18n.translator: one gettext lookup for gradlab's catalog (the explorers' labels) and the workbook's.

The language is the one ``GRADLAB_LANGUAGE`` names when a message is shown; English (the message itself) when it
names none, when the catalog is missing, or when the catalog lacks the message.
"""
from __future__ import annotations

from pathlib import Path

import pytest

import gradlab
from gradlab._i18n import LANGUAGE_VARIABLE, language, translator

#: gradlab's own catalogs, shipped in the wheel.
LOCALE = Path(gradlab.__file__).resolve().parent / "locale"
LABEL = "gradient factor ×"


@pytest.fixture
def translate():
    return translator("gradlab", LOCALE)


def test_english_unless_a_language_is_chosen(monkeypatch, translate):
    monkeypatch.delenv(LANGUAGE_VARIABLE, raising=False)
    assert language() == "en" and translate(LABEL) == LABEL
    monkeypatch.setenv(LANGUAGE_VARIABLE, "en")
    assert translate(LABEL) == LABEL


def test_the_chosen_language_is_read_when_a_message_is_shown(monkeypatch, translate):
    monkeypatch.setenv(LANGUAGE_VARIABLE, "zh_CN")
    chinese = translate(LABEL)
    assert chinese != LABEL and any("\u4e00" <= c <= "\u9fff" for c in chinese)
    monkeypatch.delenv(LANGUAGE_VARIABLE)
    assert translate(LABEL) == LABEL


@pytest.mark.parametrize("language_, domain, folder", [
    ("zh_CN", "gradlab", None),          # a message the catalog lacks
    ("fr_FR", "gradlab", None),          # a language without a catalog
    ("zh_CN", "no_such_domain", None),   # a domain without a catalog
    ("zh_CN", "gradlab", "missing"),     # a folder that does not exist
])
def test_the_english_when_there_is_no_translation(monkeypatch, tmp_path, language_, domain, folder):
    monkeypatch.setenv(LANGUAGE_VARIABLE, language_)
    translate = translator(domain, tmp_path / folder if folder else LOCALE)
    assert translate("A message nobody translated.") == "A message nobody translated."


@pytest.mark.parametrize("domain, folder, named", [
    ("", LOCALE, "domain"), (None, LOCALE, "domain"), ("gradlab", 3, "localedir"), ("gradlab", None, "localedir"),
])
def test_bad_arguments_are_named(domain, folder, named):
    with pytest.raises(TypeError, match=named):
        translator(domain, folder)
