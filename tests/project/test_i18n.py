"""The translated editions (tools/i18n.py, DEVELOPERS.md "Translated editions") stay in step with the English.

Catalogs complete and current (a changed English cell is named, by notebook and cell id, until its message
is revised); update merges as msgmerge does; each edition's code cells are the English ones but for the setup
line; its Markdown is the catalog's, in Chinese, with links that resolve; the glossary's terms are used and
渐变 is nowhere; the workbook domain's .mo is compiled from its .po.
"""
from __future__ import annotations

import gettext
import json
import re
import shutil
import sys
from pathlib import Path

import nbformat
import polib
import pytest

ROOT = Path(__file__).resolve().parents[2]
if str(ROOT / "tools") not in sys.path:
    sys.path.insert(0, str(ROOT / "tools"))
import i18n  # noqa: E402

LANGUAGE = "zh_CN"
TRANSLATED = i18n.translated(LANGUAGE)
EDITIONS = sorted((ROOT / "notebooks" / "zh").glob("*.ipynb"))
GLOSSARY = ROOT / "docs" / "glossary.zh-CN.md"
CJK = re.compile(r"[\u3400-\u9fff\uf900-\ufaff]")
#: Below this share of CJK characters among the letters of a cell's prose, the cell reads as English.
MIN_CJK_SHARE = 0.5


def test_there_is_a_chinese_edition():
    assert "00_start_here" in TRANSLATED
    assert [p.stem for p in EDITIONS] == TRANSLATED, "every catalog builds one notebook in notebooks/zh/, and only those"


# --- the catalogs -------------------------------------------------------------------------------------

@pytest.mark.parametrize("name", [*TRANSLATED, *i18n.CODE_DOMAINS])
def test_catalog_has_no_fuzzy_untranslated_or_stale_message(name):
    problems = i18n.problems(name, LANGUAGE)
    assert not problems, ("the Chinese edition is out of step with the English (python tools/i18n.py update, "
                          "translate, python tools/i18n.py build):\n" + "\n".join(problems))


@pytest.fixture
def planted(tmp_path, monkeypatch):
    """A copy of notebooks/ and the catalogs in tmp_path, which i18n reads and writes instead."""
    notebooks, locale = tmp_path / "notebooks", tmp_path / "notebooks" / "locale"
    shutil.copytree(ROOT / "notebooks" / "locale", locale)
    shutil.copy(ROOT / "notebooks" / "00_start_here.ipynb", notebooks / "00_start_here.ipynb")
    monkeypatch.setattr(i18n, "NOTEBOOKS", notebooks)
    monkeypatch.setattr(i18n, "LOCALE", locale)
    monkeypatch.setattr(i18n, "ROOT", tmp_path)
    return notebooks / "00_start_here.ipynb"


def _edit(path: Path, change) -> str:
    notebook = nbformat.read(path, as_version=4)
    cell = next(c for c in notebook.cells if c.cell_type == "markdown" and "## 5 · " in c.source)
    change(notebook, cell)
    nbformat.write(notebook, path)
    return cell.id


def test_a_changed_english_cell_is_named_until_its_translation_is_revised(planted):
    cell_id = _edit(planted, lambda nb, cell: setattr(cell, "source", cell.source.replace("0.1", "0.25", 1)))
    problems = i18n.problems("00_start_here", LANGUAGE)
    assert len(problems) == 1 and "notebooks/00_start_here.ipynb" in problems[0] and repr(cell_id) in problems[0], problems
    assert "changed since it was translated" in problems[0]

    changes = i18n.update_notebook("00_start_here", LANGUAGE)
    assert changes["fuzzy"] == [cell_id] and not changes["new"]
    entry = next(e for e in polib.pofile(str(i18n.catalog_path("00_start_here", LANGUAGE))) if e.msgctxt == cell_id)
    assert entry.fuzzy and "0.25" in entry.msgid and "0.25" not in entry.previous_msgid, "msgmerge keeps the old English"
    assert entry.msgstr, "the old translation stays, for the translator to revise"
    problems = i18n.problems("00_start_here", LANGUAGE)
    assert len(problems) == 1 and "is fuzzy" in problems[0] and repr(cell_id) in problems[0]
    with pytest.raises(SystemExit, match="not complete"):
        i18n.build("00_start_here", LANGUAGE)


def test_a_new_english_cell_is_added_untranslated_and_a_removed_one_goes_obsolete(planted):
    def add_and_remove(notebook, cell):
        notebook.cells.remove(cell)
        notebook.cells.append(nbformat.v4.new_markdown_cell("A new paragraph.", id="planted-cell"))
    removed = _edit(planted, add_and_remove)
    changes = i18n.update_notebook("00_start_here", LANGUAGE)
    assert changes == {"new": ["planted-cell"], "fuzzy": [], "obsolete": [removed]}
    problems = i18n.problems("00_start_here", LANGUAGE)
    assert len(problems) == 1 and "'planted-cell'" in problems[0] and "untranslated" in problems[0]
    catalog = polib.pofile(str(i18n.catalog_path("00_start_here", LANGUAGE)))
    assert [e.msgctxt for e in catalog.obsolete_entries()] == [removed]


def test_merge_keeps_an_unchanged_catalog_unchanged(planted):
    path = i18n.catalog_path("00_start_here", LANGUAGE)
    before = path.read_text(encoding="utf-8")
    assert i18n.update_notebook("00_start_here", LANGUAGE) == {"new": [], "fuzzy": [], "obsolete": []}
    assert path.read_text(encoding="utf-8") == before, "update rewrites a current catalog byte for byte"


def test_code_messages_are_extracted_with_their_fields():
    messages = dict(i18n.code_messages())
    assert "Correct! " in messages and "This solution passes {check}." in messages
    assert i18n.placeholders("with {factor}, {dy} and {{literal}}") == ["dy", "factor"]
    assert "gradient factor ×" in dict(i18n.code_messages("gradlab")), "N_() marks a label where it is defined"


@pytest.mark.parametrize("domain", i18n.CODE_DOMAINS)
def test_the_compiled_catalog_is_the_po_file(tmp_path, domain):
    po = i18n.catalog_path(domain, LANGUAGE)
    mo = po.with_suffix(".mo")
    fresh = tmp_path / "workbook.mo"
    polib.pofile(str(po)).save_as_mofile(str(fresh))
    with mo.open("rb") as stored, fresh.open("rb") as compiled:
        assert gettext.GNUTranslations(stored)._catalog == gettext.GNUTranslations(compiled)._catalog, (
            f"{mo.relative_to(ROOT)} is stale: run make translations")


# --- the editions -------------------------------------------------------------------------------------

def _cells(path: Path) -> list[dict]:
    return json.loads(path.read_text(encoding="utf-8"))["cells"]


@pytest.mark.parametrize("path", EDITIONS, ids=lambda p: p.name)
def test_code_cells_are_the_english_ones_but_for_the_setup_line(path):
    english = _cells(ROOT / "notebooks" / path.name)
    edition = _cells(path)
    assert [(c["id"], c["cell_type"]) for c in edition] == [(c["id"], c["cell_type"]) for c in english], (
        f"{path.name}: the edition's cells are not the English ones in the same order: python tools/i18n.py build")
    got = [(c["id"], "".join(c["source"])) for c in edition if c["cell_type"] == "code"]
    assert got == i18n.expected_code(path.stem, LANGUAGE), (
        f"{path.name}: a code cell differs from the English one: python tools/i18n.py build {path.stem}, then make execute")
    for mine, theirs in zip(edition, english):
        assert mine["metadata"].get("tags") == theirs["metadata"].get("tags"), f"{path.name}: cell {mine['id']}'s tags"
    setup = [c for c in edition if c["cell_type"] == "code"][1]
    assert "".join(setup["source"]).startswith(f'import workbook; workbook.setup(language="{LANGUAGE}")')


@pytest.mark.parametrize("path", EDITIONS, ids=lambda p: p.name)
def test_markdown_cells_are_the_catalogs_translations(path):
    catalog = {e.msgctxt: e.msgstr for e in polib.pofile(str(i18n.catalog_path(path.stem, LANGUAGE)))}
    for cell in _cells(path):
        if cell["cell_type"] == "markdown":
            expected = i18n.translate_markdown(catalog[cell["id"]], path.stem, LANGUAGE)
            assert "".join(cell["source"]) == expected, (
                f"{path.name}: Markdown cell {cell['id']!r} is not its catalog's translation: python tools/i18n.py build")


def prose(markdown: str) -> str:
    """What a reader reads as words: without code, maths, HTML tags, URLs and the titles of cited pages."""
    text = re.sub(r"```.*?```", " ", markdown, flags=re.S)
    text = re.sub(r"`[^`]*`", " ", text)
    text = re.sub(r"\$\$.*?\$\$|\$[^$]*\$", " ", text, flags=re.S)
    text = re.sub(r"\[([^\]]*)\]\((?:https?:)[^)]*\)", " ", text)      # a cited page keeps its own title
    text = re.sub(r"\]\([^)]*\)", "]", text)
    return re.sub(r"<[^>]+>", " ", text)


@pytest.mark.parametrize("path", EDITIONS, ids=lambda p: p.name)
def test_no_markdown_cell_is_left_in_english(path):
    for cell in _cells(path):
        if cell["cell_type"] != "markdown":
            continue
        text = prose("".join(cell["source"]))
        cjk = len(CJK.findall(text))
        latin = len(re.findall(r"[A-Za-z]", text))
        assert cjk and cjk / (cjk + latin) >= MIN_CJK_SHARE, (
            f"{path.name}: Markdown cell {cell['id']!r} reads as English ({cjk} CJK characters, {latin} Latin letters)")


@pytest.mark.parametrize("path", EDITIONS, ids=lambda p: p.name)
def test_links_resolve_and_point_at_the_chinese_twins(path):
    for cell in _cells(path):
        for target in re.findall(r"\]\(([^)\s]+)\)", "".join(cell["source"])) if cell["cell_type"] == "markdown" else []:
            if re.match(r"[a-z]+:|#", target):
                continue
            file = target.partition("#")[0]
            assert (path.parent / file).resolve().exists(), (
                f"{path.name}: cell {cell['id']!r} links to {target}, which does not exist")
            if re.fullmatch(r"(\.\./)?\d\d_\w+\.ipynb", file):
                twin = Path(file).stem in TRANSLATED
                assert file.startswith("../") != twin, (
                    f"{path.name}: {target} must point at the Chinese twin when there is one, else at the English")
                anchor = target.partition("#")[2]
                if twin and anchor:                 # a translated heading keeps the English anchor: <a id="..."></a>
                    assert f'<a id=\\"{anchor}\\">' in (path.parent / file).read_text(encoding="utf-8"), (
                        f"{path.name}: {target}: the Chinese {file} has no <a id=\"{anchor}\"></a>")


def test_links_are_retargeted_for_the_edition_folder():
    assert i18n.retarget("00_start_here.ipynb", LANGUAGE) == "00_start_here.ipynb"
    assert i18n.retarget("99_nowhere.ipynb#part", LANGUAGE) == "../99_nowhere.ipynb#part"
    assert i18n.retarget("workbook.py", LANGUAGE) == "../workbook.py"
    assert i18n.retarget("https://example.org/a.ipynb", LANGUAGE) == "https://example.org/a.ipynb"
    assert i18n.retarget("#section", LANGUAGE) == "#section"


# --- the glossary -------------------------------------------------------------------------------------

def glossary() -> tuple[list[tuple[str, str]], list[str]]:
    """``([(English, Chinese)], [forbidden])`` from docs/glossary.zh-CN.md's two tables."""
    terms, forbidden, table = [], [], None
    for line in GLOSSARY.read_text(encoding="utf-8").splitlines():
        if line.startswith("## "):
            table = line[3:].strip()
        cells = [c.strip() for c in line.strip().strip("|").split("|")] if line.startswith("|") else []
        if not cells or set(cells[0]) <= {"-"} or cells[0] in ("English", "禁用"):
            continue
        if table == "术语":
            terms.append((cells[0], cells[1]))
        elif table == "禁用译法":
            forbidden.append(cells[0])
    return terms, forbidden


def _term(english: str) -> re.Pattern:
    words = r"[- ]".join(map(re.escape, english.split()))
    return re.compile(rf"(?<![\w-]){words}(?:s|es|ed|d|ping|ped|ing)?(?![\w-]|\.\w)", re.I)   # not a file name


def test_the_glossary_has_the_issues_terms():
    terms, forbidden = glossary()
    table = dict(terms)
    assert table["gradient"] == "梯度" and "渐变" in forbidden
    for english, chinese in [("upstream gradient", "上游梯度"), ("custom gradient", "自定义梯度"),
                             ("straight-through estimator", "直通估计器"), ("surrogate gradient", "替代梯度"),
                             ("gradient reversal", "梯度反转"), ("guided backpropagation", "引导反向传播"),
                             ("saliency map", "显著图")]:
        assert table[english] == chinese


def _chinese_files() -> list[Path]:
    catalogs = [i18n.catalog_path(name, LANGUAGE) for name in [*TRANSLATED, *i18n.CODE_DOMAINS]]
    return [*EDITIONS, *catalogs, ROOT / "README.zh-CN.md"]


def test_no_forbidden_rendering_anywhere_in_the_chinese_edition():
    _, forbidden = glossary()
    for path in _chinese_files():
        text = path.read_text(encoding="utf-8")
        catalog = polib.pofile(str(path)) if path.suffix == ".po" else None
        if catalog is not None:                    # the translations, not the English they translate
            text = "\n".join(e.msgstr for e in catalog)
        for word in forbidden:
            assert word not in text, f"{path.relative_to(ROOT)} uses {word}: see {GLOSSARY.relative_to(ROOT)}"


@pytest.mark.parametrize("name", TRANSLATED)
def test_glossary_terms_are_translated_as_the_glossary_says(name):
    terms, _ = glossary()
    for entry in polib.pofile(str(i18n.catalog_path(name, LANGUAGE))):
        if entry.obsolete or not entry.msgstr:
            continue
        english, chinese = prose(entry.msgid), prose(entry.msgstr)
        for term, translation in terms:
            pattern = _term(term)
            assert not pattern.search(chinese), (
                f"{name}: cell {entry.msgctxt!r} leaves {term!r} in English: write {translation}")
            if pattern.search(english):
                assert translation in entry.msgstr, (
                    f"{name}: cell {entry.msgctxt!r} translates {term!r} without {translation} (the glossary's term)")
