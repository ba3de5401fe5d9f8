"""The book (`make book`): staging rules, and the built site in a real browser.

The staging tests run everywhere (no Sphinx needed). The site tests need ``build/book`` from
``make book``: locally they skip without it; under CI (``CI`` set) a missing book is a failure,
and ``.ci/run`` builds it before ``make test``. The browser test serves the site from
``python -m http.server`` on 127.0.0.1 (stopped by its own PID) and drives Debian's chromium.
"""
from __future__ import annotations

import importlib.util
import json
import os
import re
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import pytest

from test_browser import free_port, launch_chromium, require_browser

ROOT = Path(__file__).resolve().parents[2]
BOOK = ROOT / "build" / "book"
NOTEBOOKS = sorted((ROOT / "notebooks").glob("*.ipynb"))

_spec = importlib.util.spec_from_file_location("build_book", ROOT / "tools" / "build_book.py")
build_book = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(build_book)


# --- staging -----------------------------------------------------------------------------------

def test_table_of_contents_follows_the_readme_sequence():
    parts = build_book.sequence()
    assert [part for part, _ in parts] == ["Core path", "Topic notebooks", "Appendix"]
    listed = [stem for _, stems in parts for stem in stems]
    in_order = sorted(NOTEBOOKS, key=lambda p: (p.name[:2] in ("10", "11"), p.name))   # appendix (10, 11) last
    assert listed == [p.stem for p in in_order], "the book lists every notebook once, in order"


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.name)
def test_staged_notebook_hides_what_jupyterlab_hides_and_gives_every_image_alt_text(path):
    stored = json.loads(path.read_text())
    staged = build_book.stage_notebook(path, {f"notebooks/{p.name}" for p in NOTEBOOKS})
    assert len(staged["cells"]) == len(stored["cells"])
    for before, after in zip(stored["cells"], staged["cells"]):
        assert before["cell_type"] == after["cell_type"]
        if after["cell_type"] != "code":
            continue
        assert after["source"] == before["source"], "staging never changes code"
        hidden = before["metadata"].get("jupyter", {}).get("source_hidden", False)
        assert ("hide-cell" in after["metadata"].get("tags", [])) == hidden
        for output in after["outputs"]:
            assert build_book.WIDGET not in output.get("data", {}), "live widget views are dropped"
            for mime in build_book.IMAGES:
                if mime in output.get("data", {}):
                    alt = output["metadata"][mime]["alt"]
                    assert len(alt) > 10 and alt != "Figure", f"weak alt text {alt!r}"


def test_links_to_files_outside_the_book_point_to_the_repository():
    staged = {"README.md", "notebooks/00_start_here.ipynb"}
    text = "[dev](DEVELOPERS.md) [nb](notebooks/00_start_here.ipynb) [web](https://example.org) [s](#x)"
    out = build_book.rewrite_links(text, "README.md", staged)
    assert f"[dev]({build_book.REPOSITORY}/blob/main/DEVELOPERS.md)" in out
    assert "[nb](notebooks/00_start_here.ipynb)" in out and "(https://example.org)" in out and "(#x)" in out
    with pytest.raises(SystemExit, match="missing file"):
        build_book.rewrite_links("[x](no_such_file.md)", "README.md", staged)


def test_caption_is_the_first_sentence_of_the_markdown_above():
    cells = [{"cell_type": "markdown", "source": ["## 3 · A plot\n", "The **gradient** of $f$ is clipped. More."]},
             {"cell_type": "code", "source": [], "outputs": []}]
    assert build_book.caption(cells, 1) == "The gradient of f is clipped."


# --- the built site ----------------------------------------------------------------------------

def require_book() -> None:
    if not (BOOK / "index.html").is_file():
        message = "build/book is missing: run `make book` first"
        if os.environ.get("CI"):
            pytest.fail(message + " (.ci/run builds it before make test)", pytrace=False)
        pytest.skip(message)


def test_book_has_a_page_per_notebook_and_the_whole_api():
    require_book()
    for path in NOTEBOOKS:
        page = (BOOK / "notebooks" / f"{path.stem}.html").read_text()
        assert f"urlpath=lab/tree/notebooks/{path.name}" in page, f"{path.stem}: no Binder launch button"
        colab = f"https://colab.research.google.com/github/gradlab/gradlab/blob/main/notebooks/{path.name}"
        assert colab in page, f"{path.stem}: no Colab launch button"
        assert f"/blob/main/notebooks/{path.name}" in page, f"{path.stem}: no link to its source"
    import gradlab
    import gradlab.layers
    api = (BOOK / "api.html").read_text()
    names = [f"gradlab.{n}" for n in gradlab.__all__ if n != "layers"]
    names += [f"gradlab.layers.{n}" for n in gradlab.layers.__all__]
    missing = [name for name in names if f'id="{name}"' not in api]
    assert not missing, f"the API reference lacks {missing}"
    assert build_book.broken_links(BOOK) == []


@pytest.fixture
def site():
    require_book()
    port = free_port()
    server = subprocess.Popen([sys.executable, "-m", "http.server", str(port), "--bind", "127.0.0.1",
                               "--directory", str(BOOK)], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        base = f"http://127.0.0.1:{port}"
        for _ in range(100):
            try:
                urllib.request.urlopen(base + "/index.html", timeout=2).close()
                break
            except OSError:
                time.sleep(0.1)
        yield base
    finally:
        server.terminate()
        server.wait(timeout=10)


@pytest.mark.browser
def test_a_notebook_page_renders_maths_an_image_a_collapsed_solution_and_navigates(site):
    require_browser()
    from playwright.sync_api import sync_playwright

    with sync_playwright() as playwright:
        browser = launch_chromium(playwright)
        try:
            page = browser.new_page()
            page.goto(f"{site}/notebooks/00_start_here.html")
            page.wait_for_selector("mjx-container", timeout=30_000)  # MathJax typeset the maths
            image = page.locator("article img[src*='_images/']").first
            image.scroll_into_view_if_needed()
            assert image.is_visible() and page.evaluate("i => i.naturalWidth", image.element_handle()) > 0
            assert len(image.get_attribute("alt")) > 10
            solution = page.locator(".cell.tag_solution").first
            code = solution.locator(".cell_input pre").first
            assert not code.is_visible(), "a solution must be collapsed until the reader opens it"
            solution.locator("summary").first.click()
            assert code.is_visible() and "Solution to exercise" in code.inner_text()
            page.locator("a.right-next").first.click()
            page.wait_for_url(re.compile(r"/notebooks/01_custom_gradient\.html"))
            assert page.locator("h1").first.inner_text().startswith("01")
        finally:
            browser.close()
