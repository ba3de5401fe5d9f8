"""The translated editions: gettext catalogs kept in step with the English notebooks, and the notebooks built from them.

Usage: python tools/i18n.py update [NN_name ...]   merge the English notebooks (and the code's messages) into the catalogs
       python tools/i18n.py build  [NN_name ...]   write notebooks/zh/NN_name.ipynb from the English one and its catalog
       python tools/i18n.py check                  list every fuzzy, untranslated or stale message; exit 1 on any
       python tools/i18n.py init NN_name           start the catalog of a notebook that has no edition yet

The English notebooks are the one source of truth. A translated edition holds, per notebook, a catalog
``notebooks/locale/<lang>/LC_MESSAGES/NN_name.po`` (the format translators, Weblate and Crowdin use; read and
written with polib): **one message per Markdown cell**, ``msgctxt`` the cell's id and ``msgid`` its source. A cell
is the unit the notebook itself keeps: a translator sees a whole thought (a table, a list and the sentence that
introduces it stay together), the id survives edits and moves, and a test can name the cell that went stale.

``update`` merges as ``msgmerge`` does: a cell whose English changed keeps its translation, marked ``fuzzy``, with
the English it was made from as ``#| msgid`` (so the translator sees the diff); a new cell gets an empty message; a
removed cell's message becomes obsolete (``#~``). It also extracts the messages of the Python code a learner
reads (every ``_("...")`` or ``N_("...")`` literal in the files :data:`CODE_DOMAINS` lists) into its domain: ``workbook``
(the self-check verdicts, the setup line's output; read by ``notebooks/exercises/_i18n.py``) and ``gradlab`` (the
explorers' labels; ``gradlab/widgets/_labels.py``, its catalogs shipped in the wheel), and compiles each to the ``.mo``
file Python's ``gettext`` reads (stdlib only, so Colab and the grader need nothing more).

``build`` writes the edition of a notebook: the English notebook with each Markdown cell replaced by its
translation, links to another notebook pointing at its translated twin (or at the English one, ``../``, while
that has no edition yet), other relative links one folder up, the Colab badge at the edition's own URL, and the
one setup line choosing the language (``workbook.setup(language="zh_CN")``). Every other code cell is the
English one; its stored outputs are kept from the edition where the code is unchanged, so re-execute with
``make execute NB=notebooks/zh/NN_name.ipynb``. It refuses a catalog with fuzzy or empty messages (``--draft``
leaves those cells in English, for a look at work in progress). ``tests/project/test_i18n.py`` checks all of it.
"""
from __future__ import annotations

import argparse
import ast
import copy
import re
import sys
from collections.abc import Iterable
from pathlib import Path

import nbformat
import polib

sys.path.insert(0, str(Path(__file__).resolve().parent))
import nbfmt  # noqa: E402
import project_home  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]
NOTEBOOKS = ROOT / "notebooks"
LOCALE = NOTEBOOKS / "locale"
#: The editions: gettext language code -> the folder of its notebooks, beside the English ones.
EDITIONS = {"zh_CN": "zh"}
LANGUAGE_NAMES = {"zh_CN": "Chinese (Simplified)"}
#: The Python files whose ``_("...")`` messages a learner reads, extracted into the ``workbook`` domain.
#: The domains of the code's messages: name -> (its locale folder, the files whose messages it holds). A module
#: whose messages a learner should read translated is added here (and its messages wrapped in _() or N_()).
CODE_DOMAINS = {
    "workbook": (LOCALE, ("notebooks/workbook.py", "notebooks/exercises/_harness.py", "notebooks/exercises/start_here.py",
                             "notebooks/exercises/custom_gradient.py", "notebooks/exercises/straight_through.py",
                             "notebooks/exercises/keras_layers.py", "notebooks/exercises/surrogate.py",
                             "notebooks/exercises/relu.py", "notebooks/exercises/chain.py",
                             "notebooks/exercises/optimizer.py", "notebooks/exercises/higher_order.py",
                             "notebooks/exercises/performance.py", "notebooks/exercises/legacy.py",
                             "notebooks/exercises/reference.py", "notebooks/exercises/domain_adversarial.py",
                             "notebooks/exercises/recipes.py", "notebooks/exercises/questions.py")),
    "gradlab": (ROOT / "gradlab" / "locale", ("gradlab/widgets/_presets.py",)),
    # what the instructor edition's generator writes into a student's notebook (docs/instructors.md)
    "assignments": (ROOT / "tools" / "assignments" / "locale", ("tools/assignments/make_assignments.py",
                                                                "tools/assignments/grade.py")),
}
CODE_DOMAIN = "workbook"
MARKERS = ("_", "N_")     # N_ marks a message where it is defined; _ translates it where it is shown
SETUP_CALL = "workbook.setup()"
NOTEBOOK_NAME = re.compile(r"^\d\d_\w+$")
#: A Markdown link or image target: ``](target)``; the target stops at whitespace or ``)``.
LINK = re.compile(r"(\]\()([^)\s]+)")


# --- paths ---------------------------------------------------------------------------------------------

def catalog_path(name: str, language: str = "zh_CN") -> Path:
    """The catalog of notebook ``name`` (``"00_start_here"``) or of a code domain (``"workbook"``, ``"gradlab"``)."""
    folder = CODE_DOMAINS[name][0] if name in CODE_DOMAINS else LOCALE
    return folder / language / "LC_MESSAGES" / f"{name}.po"


def edition_path(name: str, language: str = "zh_CN") -> Path:
    """Where the translated notebook ``name`` is written: ``notebooks/zh/NN_name.ipynb``."""
    return NOTEBOOKS / EDITIONS[language] / f"{name}.ipynb"


def translated(language: str = "zh_CN") -> list[str]:
    """The notebooks that have an edition in ``language``: those with a catalog."""
    folder = LOCALE / language / "LC_MESSAGES"
    return sorted(p.stem for p in folder.glob("*.po") if NOTEBOOK_NAME.match(p.stem))


def _names(names: Iterable[str], language: str) -> list[str]:
    names = [Path(n).stem for n in names] or translated(language)
    for name in names:
        if not (NOTEBOOKS / f"{name}.ipynb").exists():
            raise SystemExit(f"no English notebook notebooks/{name}.ipynb")
    return names


# --- the notebook catalogs -----------------------------------------------------------------------------

def markdown_messages(notebook) -> list[tuple[str, str]]:
    """``(cell id, source)`` of every Markdown cell, in order."""
    return [(cell.id, cell.source) for cell in notebook.cells if cell.cell_type == "markdown"]


def _new_catalog(name: str, language: str) -> polib.POFile:
    catalog = polib.POFile(wrapwidth=0)
    catalog.metadata = {
        "Project-Id-Version": f"gradlab workbook {name}",
        "Language": language,
        "MIME-Version": "1.0",
        "Content-Type": "text/plain; charset=UTF-8",
        "Content-Transfer-Encoding": "8bit",
        "Plural-Forms": "nplurals=1; plural=0;",
    }
    catalog.header = (f"{LANGUAGE_NAMES.get(language, language)} edition of notebooks/{name}: one message per Markdown "
                      "cell (msgctxt: the cell id).\nTerms: docs/glossary.zh-CN.md. Workflow: DEVELOPERS.md, "
                      "'Translated editions'.")
    return catalog


def merge(catalog: polib.POFile, messages: list[tuple[str, str]], occurrence: str) -> dict[str, list[str]]:
    """Merges ``(context, English)`` pairs into ``catalog`` as msgmerge does; returns what changed.

    Same English: kept. Changed English: the translation stays, marked fuzzy, with the old English as
    ``previous_msgid``. New: an empty message. A context no longer present: obsolete.
    """
    changes: dict[str, list[str]] = {"new": [], "fuzzy": [], "obsolete": []}
    entries = {entry.msgctxt: entry for entry in catalog}
    ordered = []
    for position, (context, english) in enumerate(messages, 1):
        entry = entries.pop(context, None)
        if entry is None:
            entry = polib.POEntry(msgctxt=context, msgid=english, msgstr="")
            changes["new"].append(context)
        elif entry.obsolete or entry.msgid != english:
            if entry.msgstr and entry.msgid != english:
                entry.previous_msgid = entry.previous_msgid or entry.msgid
                if "fuzzy" not in entry.flags:
                    entry.flags.append("fuzzy")
                changes["fuzzy"].append(context)
            entry.msgid = english
            entry.obsolete = False
        entry.occurrences = [(occurrence, str(position))] if occurrence else entry.occurrences
        ordered.append(entry)
    for entry in entries.values():
        if not entry.obsolete and entry.msgstr:
            entry.obsolete = True
            changes["obsolete"].append(entry.msgctxt)
        if entry.msgstr:               # an obsolete entry keeps its translation, for a cell that comes back
            ordered.append(entry)
    catalog[:] = ordered
    return changes


def update_notebook(name: str, language: str = "zh_CN", *, create: bool = False) -> dict[str, list[str]]:
    """Merges ``notebooks/NN_name.ipynb`` into its catalog (``create``: start one) and saves it."""
    path = catalog_path(name, language)
    if not path.exists() and not create:
        raise SystemExit(f"{path.relative_to(ROOT)} does not exist: start it with 'python tools/i18n.py init {name}'")
    catalog = polib.pofile(str(path), wrapwidth=0) if path.exists() else _new_catalog(name, language)
    english = nbformat.read(NOTEBOOKS / f"{name}.ipynb", as_version=4)
    changes = merge(catalog, markdown_messages(english), f"notebooks/{name}.ipynb")
    path.parent.mkdir(parents=True, exist_ok=True)
    catalog.save(str(path))
    return changes


# --- the code's messages (the workbook domain) ---------------------------------------------------------

def code_messages(domain: str = CODE_DOMAIN) -> list[tuple[str, str]]:
    """``(message, "file:line")`` of every ``_("literal")`` or ``N_("literal")`` in ``domain``'s files, in file order."""
    sources = CODE_DOMAINS[domain][1]
    found: dict[str, tuple[int, int, str]] = {}
    for rank, source in enumerate(sources):
        tree = ast.parse((ROOT / source).read_text(encoding="utf-8"))
        for node in ast.walk(tree):
            if (isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id in MARKERS
                    and node.args and isinstance(node.args[0], ast.Constant) and isinstance(node.args[0].value, str)):
                where = (rank, node.lineno, f"{source}:{node.lineno}")
                found[node.args[0].value] = min(found.get(node.args[0].value, where), where)
    return [(message, where[2]) for message, where in sorted(found.items(), key=lambda item: item[1])]


def update_code(language: str = "zh_CN", domain: str = CODE_DOMAIN) -> dict[str, list[str]]:
    """Merges the code's marked messages into ``domain``'s catalog (msgctxt: none; keyed by the English)."""
    path = catalog_path(domain, language)
    catalog = polib.pofile(str(path), wrapwidth=0) if path.exists() else _new_catalog(domain, language)
    catalog.metadata["Project-Id-Version"] = f"gradlab {domain}"
    catalog.header = (f"{LANGUAGE_NAMES.get(language, language)} messages of the {domain} domain (what a learner reads "
                      "from the code).\nExtracted by tools/i18n.py from every _(\"...\") and N_(\"...\") in: "
                      + ", ".join(CODE_DOMAINS[domain][1]) + ".\nKeep every {placeholder}; terms: docs/glossary.zh-CN.md.")
    existing = {entry.msgid: entry for entry in catalog}
    changes: dict[str, list[str]] = {"new": [], "fuzzy": [], "obsolete": []}
    ordered = []
    for message, where in code_messages(domain):
        entry = existing.pop(message, None)
        if entry is None:
            entry = polib.POEntry(msgid=message, msgstr="")
            changes["new"].append(message)
        entry.obsolete = False
        entry.occurrences = [tuple(where.rsplit(":", 1))]
        entry.flags = [f for f in entry.flags if f != "python-brace-format"]
        if re.search(r"\{\w*\}", message):
            entry.flags.append("python-brace-format")
        ordered.append(entry)
    for entry in existing.values():       # the English changed or went: keep the old text for the translator
        if entry.msgstr:
            entry.obsolete = True
            changes["obsolete"].append(entry.msgid)
            ordered.append(entry)
    catalog[:] = ordered
    path.parent.mkdir(parents=True, exist_ok=True)
    catalog.save(str(path))
    compile_code(language, domain)
    return changes


def compile_code(language: str = "zh_CN", domain: str = CODE_DOMAIN) -> Path:
    """Writes a code domain's ``.mo`` (what ``gettext`` reads at run time) from its ``.po``.

    Fuzzy and empty messages are left out, so the learner reads the English rather than a stale text.
    """
    path = catalog_path(domain, language)
    catalog = polib.pofile(str(path), wrapwidth=0)
    mo = path.with_suffix(".mo")
    catalog.save_as_mofile(str(mo))
    return mo


def placeholders(text: str) -> list[str]:
    """The ``str.format`` fields of a message, sorted: a translation must keep exactly these."""
    return sorted(re.findall(r"(?<!\{)\{(\w*)(?:[:!][^{}]*)?\}(?!\})", text))


# --- checking ------------------------------------------------------------------------------------------

def problems(name: str, language: str = "zh_CN") -> list[str]:
    """Every message of ``name``'s catalog (or the ``workbook`` domain) that is stale, fuzzy or untranslated.

    For a notebook, the catalog is compared with the English notebook as it is now (without saving), so a
    changed English cell is named even before anyone runs ``update``.
    """
    path = catalog_path(name, language)
    shown = path.relative_to(ROOT)
    if not path.exists():
        return [f"{shown}: missing"]
    catalog = polib.pofile(str(path), wrapwidth=0)
    found = []
    if name in CODE_DOMAINS:
        current = dict(code_messages(name))
        entries = {e.msgid: e for e in catalog if not e.obsolete}
        for message, where in current.items():
            entry = entries.get(message)
            if entry is None:
                found.append(f"{shown}: no message for {message!r} ({where}): run python tools/i18n.py update")
            elif not entry.msgstr or entry.fuzzy:
                found.append(f"{shown}: {'fuzzy' if entry.fuzzy else 'untranslated'} {message!r} ({where})")
            elif placeholders(entry.msgstr) != placeholders(message):
                found.append(f"{shown}: the translation of {message!r} has the fields {placeholders(entry.msgstr)}, "
                             f"the English {placeholders(message)}")
        return found
    english = nbformat.read(NOTEBOOKS / f"{name}.ipynb", as_version=4)
    entries = {e.msgctxt: e for e in catalog if not e.obsolete}
    for position, (cell_id, source) in enumerate(markdown_messages(english), 1):
        entry = entries.get(cell_id)
        where = f"notebooks/{name}.ipynb, Markdown cell {cell_id!r} (the {position}. one)"
        if entry is None:
            found.append(f"{shown}: {where} has no message: run python tools/i18n.py update {name}, then translate it")
        elif entry.msgid != source:
            found.append(f"{shown}: {where} changed since it was translated: run python tools/i18n.py update {name}, "
                         "then revise the fuzzy message")
        elif entry.fuzzy:
            found.append(f"{shown}: {where} is fuzzy: revise the translation against the English, then drop the flag")
        elif not entry.msgstr.strip():
            found.append(f"{shown}: {where} is untranslated")
    return found


# --- building an edition -------------------------------------------------------------------------------

def retarget(target: str, language: str) -> str:
    """A relative link of an English notebook, as the edition (one folder down) needs it."""
    if re.match(r"^[a-z][a-z0-9+.-]*:", target, re.I) or target.startswith(("#", "/")):
        return target                                   # a URL, an anchor, or absolute: unchanged
    path, sep, anchor = target.partition("#")
    stem = Path(path).stem
    if "/" not in path and path.endswith(".ipynb") and catalog_path(stem, language).exists():
        return target                                   # the translated twin, beside it
    return f"../{path}{sep}{anchor}"


def translate_markdown(source: str, name: str, language: str) -> str:
    """A translated cell with its links retargeted and its Colab badge at the edition's URL."""
    folder = EDITIONS[language]
    english_badge = project_home.colab_url(f"notebooks/{name}.ipynb")
    source = source.replace(english_badge, project_home.colab_url(f"notebooks/{folder}/{name}.ipynb"))
    return LINK.sub(lambda m: m[1] + retarget(m[2], language), source)


def build(name: str, language: str = "zh_CN", *, draft: bool = False) -> Path:
    """Writes the edition of ``name`` from the English notebook and its catalog; returns its path."""
    issues = problems(name, language)
    if issues and not draft:
        raise SystemExit("the catalog is not complete (use --draft to build anyway, English in place):\n  "
                         + "\n  ".join(issues))
    catalog = polib.pofile(str(catalog_path(name, language)), wrapwidth=0)
    messages = {e.msgctxt: e for e in catalog if not e.obsolete and e.msgstr and not e.fuzzy}
    english = nbformat.read(NOTEBOOKS / f"{name}.ipynb", as_version=4)
    edition = copy.deepcopy(english)
    target = edition_path(name, language)
    stored = {}
    if target.exists():
        stored = {c.id: c for c in nbformat.read(target, as_version=4).cells if c.cell_type == "code"}
    for cell in edition.cells:
        if cell.cell_type == "markdown":
            entry = messages.get(cell.id)
            if entry is not None and entry.msgid == cell.source:
                cell.source = translate_markdown(entry.msgstr, name, language)
            continue
        if cell.cell_type == "code":
            cell.source = setup_line(cell.source, language)
            kept = stored.get(cell.id)
            if kept is not None and kept.source == cell.source:
                cell.outputs, cell.execution_count = kept.outputs, kept.execution_count
    target.parent.mkdir(parents=True, exist_ok=True)
    target.write_text(nbfmt.serialise(edition), encoding="utf-8")
    return target


def setup_line(source: str, language: str) -> str:
    """A code cell with its one setup call choosing ``language``; any other cell unchanged."""
    first, newline, rest = source.partition("\n")
    if not first.startswith("import workbook; " + SETUP_CALL):
        return source
    return first.replace(SETUP_CALL, f'workbook.setup(language="{language}")', 1) + newline + rest


def expected_code(name: str, language: str = "zh_CN") -> list[tuple[str, str]]:
    """``(cell id, source)`` of every code cell the edition must hold: the English ones, the setup line changed."""
    english = nbformat.read(NOTEBOOKS / f"{name}.ipynb", as_version=4)
    return [(c.id, setup_line(c.source, language)) for c in english.cells if c.cell_type == "code"]


# --- the command line ----------------------------------------------------------------------------------

def _report(label: str, changes: dict[str, list[str]]) -> None:
    counts = ", ".join(f"{len(v)} {k}" for k, v in changes.items() if v) or "unchanged"
    print(f"{label}: {counts}")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("command", choices=["update", "build", "check", "init"])
    parser.add_argument("names", nargs="*", help="notebooks, as NN_name (default: every one with a catalog)")
    parser.add_argument("--language", default="zh_CN", choices=sorted(EDITIONS))
    parser.add_argument("--draft", action="store_true", help="build: leave fuzzy and untranslated cells in English")
    args = parser.parse_args(argv)
    if args.command == "init":
        for name in _names(args.names or parser.error("init needs a notebook name"), args.language):
            _report(str(catalog_path(name, args.language).relative_to(ROOT)),
                    update_notebook(name, args.language, create=True))
        return 0
    names = _names(args.names, args.language)
    if args.command == "update":
        for name in names:
            _report(str(catalog_path(name, args.language).relative_to(ROOT)), update_notebook(name, args.language))
        for domain in CODE_DOMAINS:
            _report(str(catalog_path(domain, args.language).relative_to(ROOT)), update_code(args.language, domain))
        return 0
    if args.command == "build":
        for domain in CODE_DOMAINS:
            compile_code(args.language, domain)
        for name in names:
            print(build(name, args.language, draft=args.draft).relative_to(ROOT))
        return 0
    found = [p for name in [*names, *CODE_DOMAINS] for p in problems(name, args.language)]
    print("\n".join(found) or f"{len(names)} notebooks and the code domains {', '.join(CODE_DOMAINS)}: every message translated")
    return 1 if found else 0


if __name__ == "__main__":
    sys.exit(main())
