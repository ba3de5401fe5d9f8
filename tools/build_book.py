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
3. Check every internal link and image of the built site (file and ``#anchor``).

Usage: python tools/build_book.py [--out build/book]
"""
from __future__ import annotations

import argparse
import html.parser
import json
import posixpath
import re
import shutil
import subprocess
import sys
import time
import urllib.parse
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


def rewrite_links(text: str, source: str, staged: set[str]) -> str:
    """Points relative links to files that are not book pages at the repository on GitHub."""
    def fix(match: re.Match) -> str:
        target = match.group(2)
        if re.match(r"[a-z]+:|#|/", target):
            return match.group(0)
        path, _, fragment = target.partition("#")
        resolved = posixpath.normpath(posixpath.join(posixpath.dirname(source), path))
        if resolved in staged:
            # A book page: point at where it sits in the book (the README is the index page).
            here, there = STAGED_AS.get(source, source), STAGED_AS.get(resolved, resolved)
            relative = posixpath.relpath(there, posixpath.dirname(here) or ".")
            return f"{match.group(1)}{relative}" + (f"#{fragment}" if fragment else "") + match.group(3)
        if not (ROOT / resolved).exists():
            raise SystemExit(f"{source}: the link {target!r} points to a missing file")
        kind = "tree" if (ROOT / resolved).is_dir() else "blob"
        url = f"{REPOSITORY}/{kind}/main/{resolved}" + (f"#{fragment}" if fragment else "")
        return f"{match.group(1)}{url}{match.group(3)}"
    return LINK.sub(fix, text)


# Words by which a sentence of a caption refers to the picture it describes.
FIGURE_WORDS = re.compile(r"\b(picture|figure|plots?|plotted|drawn|draws|panels?|left|right|top|bottom|bars?"
                          r"|arrows?|curves?)\b", re.I)
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
    """The sentences of a Markdown text (a full stop followed by a capital or a parenthesis)."""
    return [s for s in re.split(r"(?<=[.!?])\s+(?=[A-Z(])", plain_text(markdown)) if s]


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
    """The first sentence of the nearest Markdown cell above ``cells[index]``, as plain text."""
    for cell in reversed(cells[:index]):
        if cell["cell_type"] == "markdown":
            found = sentences(re.split(r"^#+ .*$", "".join(cell["source"]), flags=re.M)[-1])
            if found:
                return found[0][:240]
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
                    alt = f"{found[0]} {sentence}"
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


def stage_notebook(path: Path, staged: set[str]) -> dict:
    notebook = json.loads(path.read_text())
    cells = notebook["cells"]
    for index, cell in enumerate(cells):
        if cell["cell_type"] == "markdown":
            source = rewrite_links("".join(cell["source"]), f"notebooks/{path.name}", staged)
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
            alt = meta.get("gradlab", {}).get("alt") or figure_alt(cells, index)
            meta.setdefault("mystnb", {}).setdefault("image", {}).setdefault("alt", alt)
    return notebook


def stage(src: Path) -> None:
    shutil.rmtree(src, ignore_errors=True)
    (src / "notebooks").mkdir(parents=True)
    notebooks = sorted((ROOT / "notebooks").glob("*.ipynb"))
    staged = {"README.md"} | {f"notebooks/{p.name}" for p in notebooks} | {s for s, _ in PAGES}
    parts = sequence()
    listed = [stem for _, stems in parts for stem in stems]
    missing = sorted({p.stem for p in notebooks} - set(listed))
    if missing or len(listed) != len(set(listed)):
        raise SystemExit(f"README's notebook table must list every notebook once; not listed: {missing}")
    for path in notebooks:
        (src / "notebooks" / path.name).write_text(json.dumps(stage_notebook(path, staged), indent=1))
    for source, target in PAGES:
        text = rewrite_links((ROOT / source).read_text(), source, staged)
        (src / target).write_text(text)
    toc = [f"\n```{{toctree}}\n:hidden:\n:caption: {part}\n\n" + "\n".join(f"notebooks/{s}" for s in stems)
           + "\n```\n" for part, stems in parts]
    toc.append("\n```{toctree}\n:hidden:\n:caption: Reference\n\napi\nexecution_modes\ninstructors\n```\n")
    readme = rewrite_links((ROOT / "README.md").read_text(), "README.md", staged)
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


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", default="build/book", help="output folder (default: build/book)")
    args = parser.parse_args(argv)
    out, src = ROOT / args.out, ROOT / "build" / "book-src"
    start = time.perf_counter()
    stage(src)
    shutil.rmtree(out, ignore_errors=True)
    command = [sys.executable, "-m", "sphinx", "-W", "--keep-going", "-q", "-b", "html",
               "-c", str(ROOT / "docs"), "-d", str(ROOT / "build" / "book-doctrees"), str(src), str(out)]
    if subprocess.run(command, cwd=ROOT).returncode:
        print("make book: Sphinx reported warnings (treated as errors) above.", file=sys.stderr)
        return 1
    broken = broken_links(out)
    if broken:
        print("make book: broken internal links:\n  " + "\n  ".join(broken), file=sys.stderr)
        return 1
    pages = len([p for p in out.rglob("*.html") if "_static" not in p.relative_to(out).parts])
    print(f"book: {pages} pages in {args.out}/ (index.html), built in {time.perf_counter() - start:.0f} s;"
          " every internal link resolves")
    return 0


if __name__ == "__main__":
    sys.exit(main())
