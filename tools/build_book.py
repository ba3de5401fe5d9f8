"""Builds the gradlab book (`make book`): a static site from the notebooks as stored.

Steps, all local (nothing is downloaded and no notebook is executed):

1. Stage the sources in ``build/book-src``: the README as the landing page (``index.md``) with a
   table of contents that follows the README's notebook table (core path, topic notebooks,
   appendix), every notebook, the API reference (``docs/api.md``) and ``docs/execution_modes.md``.
   While staging, notebooks get three render hints, and nothing else changes:
   - a cell that JupyterLab shows collapsed (``metadata.jupyter.source_hidden``, the exercise
     solutions) gets MyST-NB's ``hide-cell`` tag, so the book shows it collapsed too;
   - a live widget's view (no state is stored) is dropped; the static snapshot after it stays;
   - every image output gets alt text: the cell's ``metadata.gradlab.alt`` if set, else the first
     sentence of the Markdown cell above it (its caption).
   Relative links to files that are not pages of the book point to the repository on GitHub.
   The Sphinx side (docs/conf.py, docs/_ext/gradlab_book.py): the download and "Show source"
   buttons of each page give the page's repository file (README.md for the landing page).
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
REPOSITORY = "https://github.com/gradlab/gradlab"
WIDGET = "application/vnd.jupyter.widget-view+json"
IMAGES = ("image/png", "image/jpeg", "image/svg+xml")
# Markdown pages besides the README and the notebooks: (source in the repository, staged path).
PAGES = [("docs/api.md", "api.md"), ("docs/execution_modes.md", "execution_modes.md")]
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


def caption(cells: list[dict], index: int) -> str:
    """The first sentence of the nearest Markdown cell above ``cells[index]``, as plain text."""
    for cell in reversed(cells[:index]):
        if cell["cell_type"] == "markdown":
            text = re.sub(r"^#+ .*$", "", "".join(cell["source"]), flags=re.M)      # headings
            text = re.sub(r"\$([^$]+)\$", r"\1", re.sub(r"\[([^\]]+)\]\([^)]+\)", r"\1", text))
            text = " ".join(re.sub(r"[*`_>|]", "", text).split())
            if text:
                return re.split(r"(?<=[.!?:])\s", text, maxsplit=1)[0][:240]
    return "Figure"


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
        alt = meta.get("gradlab", {}).get("alt") or caption(cells, index)
        for output in cell["outputs"]:
            for mime in IMAGES:
                if mime in output.get("data", {}):
                    output.setdefault("metadata", {}).setdefault(mime, {}).setdefault("alt", alt)
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
    toc.append("\n```{toctree}\n:hidden:\n:caption: Reference\n\napi\nexecution_modes\n```\n")
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
