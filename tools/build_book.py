"""Builds the gradlab book (`make book`): a static site from the notebooks as stored.

Steps, all local (nothing is downloaded and no notebook is executed):

1. Stage the sources in ``build/book-src``: the README as the landing page (``index.md``) with a
   table of contents that follows the README's notebook table (core path, topic notebooks,
   appendix), every notebook, the API reference (``docs/api.md``) and ``docs/execution_modes.md``.
   While staging, notebooks get three render hints, and nothing else changes:
   - a cell that JupyterLab shows collapsed (``metadata.jupyter.source_hidden``, the exercise
     solutions) gets MyST-NB's ``hide-cell`` tag, so the book shows it collapsed too;
   - a live widget's view (no state is stored) is dropped; the static snapshot after it stays;
   - every image output gets alt text: the cell's ``metadata.gradlab.alt`` if set, else its caption,
     the sentence of the Markdown around it that describes the picture (:func:`figure_alt`). It is
     stored where MyST-NB reads it, ``metadata.mystnb.image.alt`` (MyST-NB ignores an output's own
     ``alt``, and an image without one gets its file path as alt text).
   Relative links to files that are not pages of the book point to the repository on GitHub.
   The Sphinx side (docs/conf.py, docs/_ext/gradlab_book.py): the download and "Show source"
   buttons of each page give the page's repository file (README.md for the landing page), inline
   code naming a public TensorFlow/Keras API links to its page on tensorflow.org, and an image
   without real alt text fails the build.
2. ``sphinx-build -W --keep-going`` into ``build/book`` (warnings are errors, including MyST's
   "cross-reference target not found").
3. The Chinese edition the same way, from ``notebooks/zh/`` and ``README.zh-CN.md`` as stored, into
   ``build/book/zh`` (a second, smaller Sphinx run with ``language = "zh_CN"``: Chinese navigation,
   search and ``<html lang="zh-CN">``). Its index page is the Chinese README with the table of contents
   in Chinese (titles from each notebook's first heading); the API reference and the other English-only
   pages stay English and are linked from it. Each page with a twin in the other edition links it at
   the top ("中文版" / "English", docs/_ext/gradlab_book.py), a link from a Chinese page to an English
   page that has a Chinese twin goes to the twin, and inline code naming a gradlab object links to the
   English API reference (read from the English build's ``objects.inv``).
4. Check every internal link and image of the built site, both editions (file and ``#anchor``).

Usage: python tools/build_book.py [--out build/book]
"""
from __future__ import annotations

import argparse
import functools
import html.parser
import json
import os
import posixpath
import re
import shutil
import subprocess
import sys
import time
import urllib.parse
from dataclasses import dataclass, field
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tools"))
import project_home  # noqa: E402  (tools/project_home.py: the home, from pyproject.toml's [project.urls])

#: The repository on GitHub, pyproject.toml's Homepage: the book's source buttons and its links to
#: repository files (docs/conf.py gives it to the theme's repository, Colab and Binder buttons).
REPOSITORY = project_home.HOMEPAGE
WIDGET = "application/vnd.jupyter.widget-view+json"
IMAGES = ("image/png", "image/jpeg", "image/svg+xml")
# Markdown pages besides the README and the notebooks: (source in the repository, staged path).
PAGES = [("docs/api.md", "api.md"), ("docs/execution_modes.md", "execution_modes.md"), ("docs/instructors.md", "instructors.md")]
# Where a repository file sits in the book, when it is not at the same path.
STAGED_AS = {"README.md": "index.md", **dict(PAGES)}
LINK = re.compile(r"(\]\()([^)\s]+)(\))")
# A whole Markdown link (not an image): its text and its target.
FULL_LINK = re.compile(r"(?<!!)\[((?:[^\[\]]|\[[^\]]*\])*)\]\(([^)\s]+)\)")


@dataclass(frozen=True, eq=False)
class Edition:
    """One language of the book: where its sources are and where its pages go."""

    code: str                   # "en", "zh"
    language: str               # Sphinx's language (its UI strings, search, <html lang>)
    folder: str                 # the edition's folder in build/book ("" for English)
    readme: str                 # its landing page's repository file
    notebooks: str              # its notebooks' folder in the repository
    label: str                  # the name a link to this edition shows ("English", "中文版")
    parts: dict[str, str] = field(default_factory=dict)   # the README table's parts, translated
    reference: str = "Reference"

    def sources(self) -> list[Path]:
        return sorted((ROOT / self.notebooks).glob("*.ipynb"))

    @functools.cache  # noqa: B019 (two editions, frozen)
    def staged_as(self) -> dict[str, str]:
        """Repository path -> staged path (= page path in the edition) of each of its pages."""
        pages = {self.readme: "index.md", **{f"{self.notebooks}/{p.name}": f"notebooks/{p.name}" for p in self.sources()}}
        return pages | (dict(PAGES) if self.code == "en" else {})


ENGLISH = Edition("en", "en", "", "README.md", "notebooks", "English")
CHINESE = Edition("zh", "zh_CN", "zh", "README.zh-CN.md", "notebooks/zh", "中文版",
                  {"Core path": "核心路径", "Topic notebooks": "专题笔记本", "Appendix": "附录"}, "参考（英文）")
EDITIONS = (ENGLISH, CHINESE)


def sequence() -> list[tuple[str, list[str]]]:
    """The README's notebook table as [(part, [notebook stems])], in reading order."""
    readme = (ROOT / "README.md").read_text()
    table = readme[readme.index("## The notebooks"):readme.index("## The claims ledger")]
    parts: list[tuple[str, list[str]]] = []
    for line in table.splitlines():
        part = re.match(r"\|\s*\*\*([^*]+)\*\*\s*\|\s*\|", line)
        row = re.match(r"\|\s*\[(\d\d_\w+)\]\(notebooks/\1\.ipynb\)", line)
        if part:
            parts.append((part.group(1), []))
        elif row:
            if not parts:
                raise SystemExit("README: a notebook row comes before the first part (**Core path**)")
            parts[-1][1].append(row.group(1))
    return parts


def _twin(path: str, edition: Edition) -> str:
    """A repository file as ``edition`` shows it: an English page's twin in ``edition``, if it has one."""
    if edition is ENGLISH:
        return path
    page = ENGLISH.staged_as().get(path)
    return {staged: repo for repo, staged in edition.staged_as().items()}.get(page, path)


def _html_page(staged_path: str) -> str:
    return posixpath.splitext(staged_path)[0] + ".html"


def rewrite_links(text: str, source: str, staged: set[str], edition: Edition = ENGLISH) -> str:
    """Points relative links at their page in the book, or at the repository on GitHub.

    ``staged`` holds the repository paths of ``edition``'s pages; a link to one stays a Markdown link
    (Sphinx resolves it). A Chinese page's link to an English page that has a Chinese twin goes to the
    twin (unless its text is "English": a language switch); with an ``#anchor``, it links the built page.
    A link to a page of the other edition (the
    English-only API reference, or the Chinese pages from the English README) becomes an HTML link to the
    built page, outside this edition's Sphinx project. Any other file is linked on GitHub.
    """
    as_staged = edition.staged_as() | STAGED_AS
    here = posixpath.join(edition.folder, as_staged.get(source, source))

    def other_edition(match: re.Match) -> str:
        label, target = match.group(1), match.group(2)
        if re.match(r"[a-z]+:|#|/", target):
            return match.group(0)
        path, _, fragment = target.partition("#")
        resolved = posixpath.normpath(posixpath.join(posixpath.dirname(source), path))
        if label.strip() != ENGLISH.label:
            resolved = _twin(resolved, edition)
        if resolved in staged and fragment and edition is not ENGLISH:
            # A translation marks a heading that links name by ``<a id="setup"></a>``, which MyST does not
            # know as a target: link the built page (broken_links checks the anchor).
            page = _html_page(as_staged[resolved])
            href = posixpath.relpath(page, posixpath.dirname(as_staged.get(source, source)) or ".")
            return f'<a href="{href}#{fragment}">{label}</a>'
        if resolved in staged:
            return match.group(0)
        for other in EDITIONS:
            if other is not edition and resolved in other.staged_as():
                page = posixpath.join(other.folder, _html_page(other.staged_as()[resolved]))
                href = posixpath.relpath(page, posixpath.dirname(here) or ".") + (f"#{fragment}" if fragment else "")
                language = other.language.replace("_", "-")
                return f'<a href="{href}" hreflang="{language}">{label}</a>'
        return match.group(0)

    def fix(match: re.Match) -> str:
        target = match.group(2)
        if re.match(r"[a-z]+:|#|/", target):
            return match.group(0)
        path, _, fragment = target.partition("#")
        resolved = _twin(posixpath.normpath(posixpath.join(posixpath.dirname(source), path)), edition)
        if resolved in staged:
            # A book page: point at where it sits in the book (the README is the index page).
            here, there = as_staged.get(source, source), as_staged.get(resolved, resolved)
            relative = posixpath.relpath(there, posixpath.dirname(here) or ".")
            return f"{match.group(1)}{relative}" + (f"#{fragment}" if fragment else "") + match.group(3)
        if not (ROOT / resolved).exists():
            raise SystemExit(f"{source}: the link {target!r} points to a missing file")
        kind = "tree" if (ROOT / resolved).is_dir() else "blob"
        url = f"{REPOSITORY}/{kind}/main/{resolved}" + (f"#{fragment}" if fragment else "")
        return f"{match.group(1)}{url}{match.group(3)}"
    return LINK.sub(fix, FULL_LINK.sub(other_edition, text))


# Words by which a sentence of a caption refers to the picture it describes (English, then Chinese).
FIGURE_WORDS = re.compile(r"\b(picture|figure|plots?|plotted|drawn|draws|panels?|left|right|top|bottom|bars?"
                          r"|arrows?|curves?)\b"
                          r"|图|曲线|箭头|面板|左边|右边|左侧|右侧|左栏|右栏|虚线|实线|灰线|横轴|纵轴|坐标轴", re.I)
TEX_SYMBOLS = {"partial": "∂", "cdot": "·", "times": "×", "pi": "π", "sigma": "σ", "to": "→", "infty": "∞",
               "le": "≤", "ge": "≥", "approx": "≈", "lvert": "|", "rvert": "|", "lambda": "λ", "alpha": "α"}


def _tex_to_text(tex: str) -> str:
    """Inline LaTeX as a screen reader can say it: ``2\\sin x`` -> ``2 sin x``."""
    tex = re.sub(r"\\(?:operatorname|mathrm|text|mathbf|mathit)\{([^}]*)\}", r"\1", tex)
    tex = re.sub(r"\\frac\{([^}]*)\}\{([^}]*)\}", lambda m: "/".join(
        part if re.fullmatch(r"[\w\\]+", part) else f"({part})" for part in m.groups()) + " ", tex)
    tex = tex.replace("\\_", "_").replace("\\,", " ").replace("\\;", " ")
    tex = re.sub(r"\\([A-Za-z]+)\s*", lambda m: TEX_SYMBOLS.get(m.group(1), f" {m.group(1)} "), tex)
    return " ".join(tex.replace("{", "").replace("}", "").split())


def plain_text(markdown: str) -> str:
    """Markdown prose as plain text: no headings, tables, code blocks, markup; code and maths kept."""
    text = re.sub(r"```.*?```", " ", markdown, flags=re.S)
    text = re.sub(r"^\s*(#+ |\|).*$", " ", text, flags=re.M)                # headings, table rows
    text = re.sub(r"<[^>]+>", " ", text)                                     # HTML tags
    text = re.sub(r"!?\[([^\]]*)\]\([^)]*\)", r"\1", text)                  # links and images
    kept: list[str] = []                                                      # code and maths, verbatim

    def keep(value: str) -> str:
        kept.append(value)
        return f"\x00{len(kept) - 1}\x00"
    text = re.sub(r"`([^`]*)`", lambda m: keep(m.group(1)), text)
    text = re.sub(r"\$\$?([^$]+)\$\$?", lambda m: keep(_tex_to_text(m.group(1))), text)
    text = re.sub(r"\*+|(?<!\w)_+|_+(?!\w)|^>\s*", "", text, flags=re.M)       # emphasis, quotes
    text = re.sub(r"\x00(\d+)\x00", lambda m: kept[int(m.group(1))], text)
    return " ".join(text.split())


def sentences(markdown: str) -> list[str]:
    """The sentences of a Markdown text: a full stop followed by a capital or a parenthesis, or a
    Chinese full stop (。！？, no space after it)."""
    return [s.strip() for s in re.split(r"(?<=[.!?])\s+(?=[A-Z(])|(?<=[。！？])", plain_text(markdown)) if s.strip()]


def _markdown_around(cells: list[dict], index: int) -> tuple[str, str]:
    """The captions' candidates: the last section of the nearest Markdown cell above ``cells[index]``
    and the first paragraph(s) of the Markdown cell right below it (up to its first heading)."""
    above = below = ""
    for cell in reversed(cells[:index]):
        if cell["cell_type"] == "markdown":
            above = re.split(r"^#+ .*$", "".join(cell["source"]), flags=re.M)[-1]
            break
    if index + 1 < len(cells) and cells[index + 1]["cell_type"] == "markdown":
        below = re.split(r"^#+ .*$", "".join(cells[index + 1]["source"]), flags=re.M)[0]
    return above, below


def caption(cells: list[dict], index: int) -> str:
    """The first sentence (of 10 characters or more, if any) of the nearest Markdown cell above
    ``cells[index]``, as plain text."""
    for cell in reversed(cells[:index]):
        if cell["cell_type"] == "markdown":
            found = sentences(re.split(r"^#+ .*$", "".join(cell["source"]), flags=re.M)[-1])
            if found:   # not a bold label ("**Why.**", "**原因。**")
                return next((sentence for sentence in found if len(sentence) >= 10), found[0])[:240]
    return "Figure"


def figure_alt(cells: list[dict], index: int, limit: int = 300) -> str:
    """Alt text for the picture ``cells[index]`` draws, from the prose around it.

    The first sentence that refers to a picture (``FIGURE_WORDS``: "the picture", "left", "bars",
    ...) in the Markdown above the cell, after the first sentence there (what the picture is of)
    when both fit; else such a sentence in the Markdown right below the cell (a caption placed
    under its figure), with the next one if it is short; else the first sentence above. Cut at
    ``limit`` characters, on a word.
    """
    for above, block in zip((True, False), _markdown_around(cells, index)):
        found = sentences(block)
        for i, sentence in enumerate(found):
            if FIGURE_WORDS.search(sentence):
                if above and i and len(found[0]) + len(sentence) < limit:
                    alt = found[0] + ("" if found[0].endswith(("。", "！", "？")) else " ") + sentence
                else:
                    alt = " ".join(found[i:i + 2]) if len(sentence) < 60 else sentence
                break
        else:
            continue
        break
    else:
        alt = caption(cells, index)
    if len(alt) > limit:
        alt = alt[:limit].rsplit(" ", 1)[0].rstrip(",;:") + " …"
    return alt


def stage_notebook(path: Path, staged: set[str], edition: Edition = ENGLISH) -> dict:
    """A notebook with the book's render hints (module docstring); a translated edition's images get their
    alt text from the translated prose (``metadata.gradlab.alt``, shared with the English code cell, is English)."""
    notebook = json.loads(path.read_text())
    cells = notebook["cells"]
    for index, cell in enumerate(cells):
        if cell["cell_type"] == "markdown":
            source = rewrite_links("".join(cell["source"]), f"{edition.notebooks}/{path.name}", staged, edition)
            cell["source"] = source.splitlines(keepends=True)
        if cell["cell_type"] != "code":
            continue
        meta = cell.setdefault("metadata", {})
        if meta.get("jupyter", {}).get("source_hidden"):
            tags = meta.setdefault("tags", [])
            if "hide-cell" not in tags:
                tags.append("hide-cell")
        cell["outputs"] = [o for o in cell.get("outputs", []) if WIDGET not in o.get("data", {})]
        if any(mime in output.get("data", {}) for output in cell["outputs"] for mime in IMAGES):
            # MyST-NB takes an image's alt text from the cell (metadata.mystnb.image.alt), never from
            # the output, so every image of a cell shares it (no stored cell has two images).
            alt = (edition is ENGLISH and meta.get("gradlab", {}).get("alt")) or figure_alt(cells, index)
            meta.setdefault("mystnb", {}).setdefault("image", {}).setdefault("alt", alt)
    return notebook


def title(path: Path) -> str:
    """A notebook's title: its first heading, without the ``#``."""
    first = "".join(json.loads(path.read_text())["cells"][0]["source"])
    return re.match(r"#\s+(.*)", first).group(1).strip()


def stage(src: Path, edition: Edition = ENGLISH) -> None:
    """Stages ``edition``'s pages into ``src``: its README as ``index.md`` with the table of contents,
    its notebooks, and (English) the reference pages."""
    shutil.rmtree(src, ignore_errors=True)
    (src / "notebooks").mkdir(parents=True)
    notebooks = edition.sources()
    staged = set(edition.staged_as())
    parts = sequence()
    listed = [stem for _, stems in parts for stem in stems]
    missing = sorted({p.stem for p in notebooks} - set(listed))
    if missing or len(listed) != len(set(listed)) or not notebooks:
        raise SystemExit(f"README's notebook table must list every notebook once; not listed: {missing}")
    for path in notebooks:
        (src / "notebooks" / path.name).write_text(json.dumps(stage_notebook(path, staged, edition), indent=1))
    stems = {p.stem for p in notebooks}
    toc = [f"\n```{{toctree}}\n:hidden:\n:caption: {edition.parts.get(part, part)}\n\n"
           + "\n".join(f"notebooks/{s}" for s in part_stems if s in stems) + "\n```\n" for part, part_stems in parts]
    if edition is ENGLISH:
        for source, target in PAGES:
            text = rewrite_links((ROOT / source).read_text(), source, staged)
            (src / target).write_text(text)
        toc.append("\n```{toctree}\n:hidden:\n:caption: Reference\n\napi\nexecution_modes\ninstructors\n```\n")
    else:
        # The English-only pages, linked from the index (outside this edition's Sphinx project).
        links = " · ".join(f'<a href="../{_html_page(page)}" hreflang="en">{name}</a>' for name, page in
                           (("API 参考", "api.md"), ("执行模式与限制", "execution_modes.md"), ("教师指南", "instructors.md")))
        toc.insert(0, f"\n## {edition.reference}\n\ngradlab 的 API 参考和以下参考页面只有英文版（与 TensorFlow 的报错信息一样，"
                      f"gradlab 的异常也保持英文）：{links}。\n")
    readme = rewrite_links((ROOT / edition.readme).read_text(), edition.readme, staged, edition)
    (src / "index.md").write_text(readme + "".join(toc))


class _Links(html.parser.HTMLParser):
    def __init__(self) -> None:
        super().__init__()
        self.links: list[str] = []
        self.ids: set[str] = set()

    def handle_starttag(self, tag, attrs):
        attrs = dict(attrs)
        if attrs.get("id"):
            self.ids.add(attrs["id"])
        for key in ("href", "src"):
            if attrs.get(key) and not (tag == "link" and attrs.get("rel") == "preconnect"):
                self.links.append(attrs[key])


def broken_links(out: Path) -> list[str]:
    """Every internal href/src of the site that names a missing file or a missing #anchor (or a
    folder without an index page, such as the empty ``_sources/`` a download button once gave)."""
    pages = {}
    for page in out.rglob("*.html"):
        if "_static" in page.relative_to(out).parts:
            continue                  # theme templates (Jinja macros), not pages of the book
        parser = _Links()
        parser.feed(page.read_text(errors="replace"))
        pages[page.resolve()] = parser
    broken = []
    for page, parser in pages.items():
        for link in parser.links:
            parts = urllib.parse.urlsplit(link)
            if parts.scheme or parts.netloc or link.startswith(("mailto:", "javascript:")):
                continue
            target = (page.parent / urllib.parse.unquote(parts.path)).resolve() if parts.path else page
            if target.is_dir() and not (target / "index.html").is_file():
                broken.append(f"{page.relative_to(out.resolve())}: {link} (a folder without index.html)")
            elif not target.exists():
                broken.append(f"{page.relative_to(out.resolve())}: {link}")
            elif parts.fragment and target in pages and parts.fragment not in pages[target].ids:
                broken.append(f"{page.relative_to(out.resolve())}: {link} (no such anchor)")
    return broken


def sphinx(edition: Edition, out: Path) -> bool:
    """One edition's Sphinx run into ``out`` (docs/conf.py reads ``GRADLAB_BOOK_EDITION``)."""
    src = ROOT / "build" / ("book-src" + (f"-{edition.code}" if edition.folder else ""))
    stage(src, edition)
    doctrees = ROOT / "build" / ("book-doctrees" + (f"-{edition.code}" if edition.folder else ""))
    command = [sys.executable, "-m", "sphinx", "-W", "--keep-going", "-q", "-b", "html",
               "-c", str(ROOT / "docs"), "-d", str(doctrees), str(src), str(out / edition.folder)]
    environment = {**os.environ, "GRADLAB_BOOK_EDITION": edition.code, "GRADLAB_BOOK_OUT": str(out)}
    return subprocess.run(command, cwd=ROOT, env=environment).returncode == 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", default="build/book", help="output folder (default: build/book)")
    args = parser.parse_args(argv)
    out = ROOT / args.out
    start = time.perf_counter()
    shutil.rmtree(out, ignore_errors=True)
    took = {}
    for edition in EDITIONS:        # English first: the Chinese pages link its API reference (objects.inv)
        if not sphinx(edition, out):
            print(f"make book ({edition.code}): Sphinx reported warnings (treated as errors) above.", file=sys.stderr)
            return 1
        took[edition.code] = time.perf_counter() - start - sum(took.values())
    broken = broken_links(out)
    if broken:
        print("make book: broken internal links:\n  " + "\n  ".join(broken), file=sys.stderr)
        return 1
    pages = len([p for p in out.rglob("*.html") if "_static" not in p.relative_to(out).parts])
    each = ", ".join(f"{code} {seconds:.0f} s" for code, seconds in took.items())
    print(f"book: {pages} pages in {args.out}/ (index.html; the Chinese edition in zh/), built in"
          f" {time.perf_counter() - start:.0f} s ({each}); every internal link resolves")
    return 0


if __name__ == "__main__":
    sys.exit(main())
