"""The book (`make book`): staging rules, and the built site in a real browser.

The staging tests run everywhere (no Sphinx needed). The site tests need ``build/book`` from
``make book``: locally they skip without it; under CI (``CI`` set) a missing book is a failure,
and ``.ci/run`` builds it before ``make test``. The browser tests serve the site from
``python -m http.server`` on 127.0.0.1 (stopped by its own PID) and drive Debian's chromium.

What the site must do, page by page: its download button gives its repository file byte for
byte (the real ``.ipynb``; ``README.md`` for the landing page), every link into the repository
(source buttons, Colab and Binder launch buttons, links in the text) names a tracked file, every
image has alt text of its own, code and outputs wrap on a phone and on a desktop, and inline code
naming a TensorFlow/Keras API links to its tensorflow.org page.

The Chinese edition (``build/book/zh``, from ``notebooks/zh/`` and ``README.zh-CN.md``) is held to the
same checks, and to its own: each page with a twin links it both ways, its pages are marked zh-CN and
read as Chinese, its links stay in the Chinese edition where a twin exists, and its index lists every
notebook by its Chinese title.
"""
from __future__ import annotations

import html.parser
import importlib.util
import json
import os
import re
import subprocess
import sys
import time
import urllib.parse
import urllib.request
from pathlib import Path

import pytest

from test_browser import chromium, free_port, require_browser

ROOT = Path(__file__).resolve().parents[2]
BOOK = ROOT / "build" / "book"
NOTEBOOKS = sorted((ROOT / "notebooks").glob("*.ipynb"))
ZH_NOTEBOOKS = sorted((ROOT / "notebooks" / "zh").glob("*.ipynb"))



def _load(name: str, path: Path):
    spec = importlib.util.spec_from_file_location(name, path)
    module = importlib.util.module_from_spec(spec)
    sys.modules.setdefault(name, module)      # dataclasses look their module up there
    spec.loader.exec_module(module)
    return module


build_book = _load("build_book", ROOT / "tools" / "build_book.py")
project_home = build_book.project_home   # the home, from pyproject.toml (tools/project_home.py)
tf_api = _load("tf_api", ROOT / "docs" / "_ext" / "tf_api.py")     # imports TensorFlow on first use
TF_DOCS = "https://www.tensorflow.org/api_docs/python/"
# Each page's repository file: what its download button gives and its source button shows.
SOURCES = {"index": "README.md", "api": "docs/api.md", "execution_modes": "docs/execution_modes.md",
           "instructors": "docs/instructors.md",
           **{f"notebooks/{p.stem}": f"notebooks/{p.name}" for p in NOTEBOOKS},
           "zh/index": "README.zh-CN.md", **{f"zh/notebooks/{p.stem}": f"notebooks/zh/{p.name}" for p in ZH_NOTEBOOKS}}
# The pages that have a twin in the other edition: the landing page and every translated notebook.
TWINS = {"index": "zh/index", **{f"notebooks/{p.stem}": f"zh/notebooks/{p.stem}" for p in ZH_NOTEBOOKS}}
CJK = re.compile(r"[\u3400-\u9fff\uf900-\ufaff]")


def chinese_and_english(text: str) -> tuple[int, int]:
    """How much of a text is Chinese: its CJK characters, and its English words (2 letters or more)."""
    return len(CJK.findall(text)), len(re.findall(r"[A-Za-z]{2,}", text))
# Alt text that is a file name or a path (what an HTML writer falls back to without alt text).
PATH_LIKE = re.compile(r"\S*[/\\]\S*|\S+\.(png|jpe?g|gif|svg|webp)", re.I)


# --- staging -----------------------------------------------------------------------------------

def test_table_of_contents_follows_the_readme_sequence():
    parts = build_book.sequence()
    assert [part for part, _ in parts] == ["Core path", "Topic notebooks", "Appendix"]
    listed = [stem for _, stems in parts for stem in stems]
    in_order = sorted(NOTEBOOKS, key=lambda p: (p.name[:2] in ("10", "11"), p.name))   # appendix (10, 11) last
    assert listed == [p.stem for p in in_order], "the book lists every notebook once, in order"


@pytest.mark.parametrize("path", NOTEBOOKS + ZH_NOTEBOOKS, ids=lambda p: str(p.relative_to(ROOT / "notebooks")))
def test_staged_notebook_hides_what_jupyterlab_hides_and_gives_every_image_alt_text(path):
    stored = json.loads(path.read_text())
    edition = build_book.CHINESE if path.parent.name == "zh" else build_book.ENGLISH
    staged = build_book.stage_notebook(path, set(edition.staged_as()), edition)
    assert len(staged["cells"]) == len(stored["cells"])
    for before, after in zip(stored["cells"], staged["cells"]):
        assert before["cell_type"] == after["cell_type"]
        if after["cell_type"] != "code":
            continue
        assert after["source"] == before["source"], "staging never changes code"
        hidden = before["metadata"].get("jupyter", {}).get("source_hidden", False)
        assert ("hide-cell" in after["metadata"].get("tags", [])) == hidden
        images = [mime for output in after["outputs"] for mime in build_book.IMAGES if mime in output.get("data", {})]
        for output in after["outputs"]:
            assert build_book.WIDGET not in output.get("data", {}), "live widget views are dropped"
        if images:
            # Where MyST-NB reads an image's alt text (it ignores the output's own metadata).
            alt = after["metadata"]["mystnb"]["image"]["alt"]
            assert len(alt) > 10 and alt != "Figure" and not PATH_LIKE.fullmatch(alt), f"weak alt text {alt!r}"
            if edition is build_book.ENGLISH:
                assert alt == before["metadata"].get("gradlab", {}).get("alt", alt), "metadata.gradlab.alt wins"
            else:   # the translated prose's caption, in the edition's language (gradlab.alt is English)
                cjk, words = chinese_and_english(alt)
                assert cjk > words, f"alt text not in Chinese: {alt!r}"   # maths spoken as words


def test_links_to_files_outside_the_book_point_to_the_repository():
    staged = {"README.md", "notebooks/00_start_here.ipynb"}
    text = "[dev](DEVELOPERS.md) [nb](notebooks/00_start_here.ipynb) [web](https://example.org) [s](#x)"
    out = build_book.rewrite_links(text, "README.md", staged)
    assert f"[dev]({build_book.REPOSITORY}/blob/main/DEVELOPERS.md)" in out
    assert build_book.REPOSITORY == project_home.HOMEPAGE   # pyproject.toml's Homepage, nowhere else
    assert "[nb](notebooks/00_start_here.ipynb)" in out and "(https://example.org)" in out and "(#x)" in out
    with pytest.raises(SystemExit, match="missing file"):
        build_book.rewrite_links("[x](no_such_file.md)", "README.md", staged)


def test_links_of_a_chinese_page_stay_in_the_chinese_edition():
    zh, source = build_book.CHINESE, "notebooks/zh/07_optimizer_level.ipynb"
    staged = set(zh.staged_as())
    text = ("[08](08_higher_order_forward_mode.ipynb) [list](../../README.md#the-notebooks) [setup](00_start_here.ipynb#setup)"
            " [modes](../../docs/execution_modes.md#eager) [chk](../exercises/chain.py)")
    out = build_book.rewrite_links(text, source, staged, zh)
    assert "[08](08_higher_order_forward_mode.ipynb)" in out                       # a page of this edition
    assert '<a href="../index.html#the-notebooks">list</a>' in out                 # the English README's twin
    assert '<a href="00_start_here.html#setup">setup</a>' in out                   # a translator's <a id> anchor
    assert '<a href="../../execution_modes.html#eager" hreflang="en">modes</a>' in out   # English only
    assert f"[chk]({build_book.REPOSITORY}/blob/main/notebooks/exercises/chain.py)" in out
    # A language switch stays a language switch; the English README links the Chinese index page.
    assert build_book.rewrite_links("[English](README.md)", "README.zh-CN.md", staged, zh) == \
        '<a href="../index.html" hreflang="en">English</a>'
    assert build_book.rewrite_links("[zh](README.zh-CN.md)", "README.md", {"README.md"}) == \
        '<a href="zh/index.html" hreflang="zh-CN">zh</a>'


def test_sentences_and_figure_alt_read_chinese():
    assert build_book.sentences("梯度被裁剪。左图是前向值！右图呢？`tf.round` 不变") == [
        "梯度被裁剪。", "左图是前向值！", "右图呢？", "tf.round 不变"]
    cells = _cells("训练 20 步。代价很小。左图是前向值，右图是梯度。")
    assert build_book.figure_alt(cells, 1) == "训练 20 步。左图是前向值，右图是梯度。"


def test_caption_is_the_first_sentence_of_the_markdown_above():
    cells = [{"cell_type": "markdown", "source": ["## 3 · A plot\n", "The **gradient** of $f$ is clipped. More."]},
             {"cell_type": "code", "source": [], "outputs": []}]
    assert build_book.caption(cells, 1) == "The gradient of f is clipped."


def _cells(above: str, below: str | None = None) -> list[dict]:
    cells = [{"cell_type": "markdown", "source": [above]}, {"cell_type": "code", "source": [], "outputs": []}]
    return cells + ([{"cell_type": "markdown", "source": [below]}] if below is not None else [])


def test_figure_alt_is_the_sentence_about_the_picture_above_or_below_it():
    # Above: what the picture is of, then the sentence that describes it; code keeps its underscores,
    # maths is spoken, a table and an earlier section of the same cell are left out.
    above = ("| a | b |\n|---|---|\n| 1 | 2 |\n\n## 7 · Forward against gradient\n\n"
             "Put `clip_gradient` at the input of $f(x) = 2\\sin x$. It is cheap. "
             "Left, the forward values; right, the gradient in bold over the plain one.")
    assert build_book.figure_alt(_cells(above), 1) == (
        "Put clip_gradient at the input of f(x) = 2 sin x. "
        "Left, the forward values; right, the gradient in bold over the plain one.")
    # A caption placed under its figure, when the prose above does not describe it.
    cells = _cells("Accuracy is measured on the target points.",
                   "Every seed is better. The picture (seed 3) shows how: the boundary bends around both tips.\n\n## 5 · Next")
    assert build_book.figure_alt(cells, 1) == "The picture (seed 3) shows how: the boundary bends around both tips."
    # Nothing describes a picture: the first sentence above; never longer than the limit.
    assert build_book.figure_alt(_cells("Train for 20 steps. Then look."), 1) == "Train for 20 steps."
    assert len(build_book.figure_alt(_cells("The plot " + "word " * 200), 1)) <= 302


def test_api_urls_name_only_public_tensorflow_and_keras_objects():
    cases = {
        "tf.custom_gradient": "tf/custom_gradient", "@tf.custom_gradient": "tf/custom_gradient",
        "tf.stop_gradient(f - b)": "tf/stop_gradient", "tf.grad_pass_through(f)(x)": "tf/grad_pass_through",
        "tf.GradientTape": "tf/GradientTape", "tf.compat.v1.py_func": "tf/compat/v1/py_func",
        "tf.compat.v1": "tf/compat/v1", "tf.autodiff.ForwardAccumulator": "tf/autodiff/ForwardAccumulator",
        # keras.* -> the same object's tf.keras page (tf.keras is Keras 3)
        "keras.layers.Layer": "tf/keras/layers/Layer", "keras.ops.custom_gradient": "tf/keras/ops/custom_gradient",
        "tf.keras.layers.Layer": "tf/keras/layers/Layer",
        # not at the same path under tf.keras: the tf.keras name of the same function
        "@keras.saving.register_keras_serializable()": "tf/keras/utils/register_keras_serializable",
    }
    for literal, path in cases.items():
        assert tf_api.api_url(literal) == TF_DOCS + path, literal
    not_public = ["tf.py_func", "tf.Session().run(...)", "tf.Session", "tf.float32", "tf.GradientTape.gradient",
                  "tf.python", "keras.src.ops", "tf.keras.src", "tf.compat.v2.abs", "tf.no_such_name",
                  "tape.gradient", "tf.distribute.get_replica_context().all_reduce(g)", "x = tf.Variable(1.0)",
                  "keras.operations", "gradlab.scale_gradient"]
    for literal in not_public:
        assert tf_api.api_url(literal) is None, literal


# --- the built site ----------------------------------------------------------------------------

def require_book() -> None:
    if not (BOOK / "index.html").is_file():
        message = "build/book is missing: run `make book` first"
        if os.environ.get("CI"):
            pytest.fail(message + " (.ci/run builds it before make test)", pytrace=False)
        pytest.skip(message)


def test_book_has_a_page_per_notebook_and_the_whole_api():
    require_book()
    for path in NOTEBOOKS + ZH_NOTEBOOKS:
        stored = str(path.relative_to(ROOT))
        page = (BOOK / ("zh" if path.parent.name == "zh" else "") / "notebooks" / f"{path.stem}.html").read_text()
        assert f"urlpath=lab/tree/{stored}" in page, f"{stored}: no Binder launch button"
        assert project_home.colab_url(stored) in page, f"{stored}: no Colab launch button"
        assert f"/blob/main/{stored}" in page, f"{stored}: no link to its source"
    import gradlab
    import gradlab.layers
    api = (BOOK / "api.html").read_text()
    names = [f"gradlab.{n}" for n in gradlab.__all__ if n != "layers"]
    names += [f"gradlab.layers.{n}" for n in gradlab.layers.__all__]
    missing = [name for name in names if f'id="{name}"' not in api]
    assert not missing, f"the API reference lacks {missing}"
    assert build_book.broken_links(BOOK) == []


class _Page(html.parser.HTMLParser):
    """A built page: its links, images and inline code (with what encloses each)."""

    VOID = {"img", "br", "meta", "link", "input", "hr", "source", "wbr"}

    def __init__(self, path: Path) -> None:
        super().__init__(convert_charrefs=True)
        self.path = path
        self.links: list[dict] = []          # {"href", "class"}
        self.images: list[dict] = []         # {"src", "alt"}
        self.code: list[dict] = []           # inline <code>: {"text", "href", "heading"}
        self._stack: list[tuple[str, dict]] = []
        self.feed(path.read_text(errors="replace"))

    def handle_starttag(self, tag, attrs):
        attrs = {k: v or "" for k, v in attrs}
        if tag == "a" and "href" in attrs:
            self.links.append({"href": attrs["href"], "class": attrs.get("class", "")})
        if tag == "img":
            self.images.append({"src": attrs.get("src", ""), "alt": attrs.get("alt")})
        if tag == "code" and not any(t == "pre" for t, _ in self._stack):
            enclosing = [a for t, a in self._stack if t == "a"]
            self.code.append({"text": "", "href": enclosing[-1].get("href") if enclosing else None,
                              "api_link": bool(enclosing) and "api-link" in enclosing[-1].get("class", ""),
                              "heading": any(re.fullmatch(r"h[1-6]", t) for t, _ in self._stack)})
        if tag not in self.VOID:
            self._stack.append((tag, attrs))

    def handle_endtag(self, tag):
        for i in range(len(self._stack) - 1, -1, -1):
            if self._stack[i][0] == tag:
                del self._stack[i:]
                break

    def handle_data(self, data):
        if any(t == "code" for t, _ in self._stack) and self.code and not any(t == "pre" for t, _ in self._stack):
            self.code[-1]["text"] += data


def book_pages() -> dict[str, _Page]:
    """Every page of the book (not the theme's templates), by its name (``notebooks/00_start_here``)."""
    return {str(page.relative_to(BOOK).with_suffix("")): _Page(page) for page in sorted(BOOK.rglob("*.html"))
            if "_static" not in page.relative_to(BOOK).parts}


def tracked_files() -> set[str]:
    try:
        listed = subprocess.run(["git", "ls-files"], cwd=ROOT, capture_output=True, text=True, check=True).stdout
    except (OSError, subprocess.CalledProcessError):
        pytest.skip("not a git checkout: the repository's files are unknown")
    return set(listed.splitlines())


def test_every_page_downloads_and_shows_its_repository_file():
    require_book()
    pages = book_pages()
    assert set(SOURCES) <= set(pages), f"pages missing: {set(SOURCES) - set(pages)}"
    assert set(pages) - set(SOURCES) == {"genindex", "search", "py-modindex", "zh/genindex", "zh/search"}, \
        "a new page needs its repository file"
    for name, path in SOURCES.items():
        page = pages[name]
        downloads = [a["href"] for a in page.links if "btn-download-source-button" in a["class"]]
        assert len(downloads) == 1, f"{name}: one download button, found {downloads}"
        target = (page.path.parent / urllib.parse.unquote(downloads[0])).resolve()
        assert target.is_file(), f"{name}: the download button gives {downloads[0]}, not a file"
        assert target.read_bytes() == (ROOT / path).read_bytes(), f"{name}: the download is not {path} as stored"
        assert target.name == Path(path).name
        if path.endswith(".ipynb"):
            assert json.loads(target.read_text())["cells"], f"{name}: the download is not a notebook"
        sources = [a["href"] for a in page.links if "btn-source-file-button" in a["class"]]
        assert sources == [f"{build_book.REPOSITORY}/blob/main/{path}?plain=1"], f"{name}: source button {sources}"
        assert not [a for a in page.links if "download-notebook-button" in a["class"]]
    published = {str(p.relative_to(folder)) for folder in (BOOK / "_sources", BOOK / "zh" / "_sources")
                 for p in folder.rglob("*") if p.is_file()}
    assert published == set(SOURCES.values()), "_sources holds the repository files of the pages, nothing else"


def test_every_link_into_the_repository_names_a_tracked_file():
    require_book()
    tracked = tracked_files()
    folders = {str(parent) for path in tracked for parent in Path(path).parents}
    repository = re.escape(build_book.REPOSITORY)
    forms = [  # (pattern, what the path must be)
        (rf"{repository}/(?:blob|edit|raw)/main/([^?#]+)(?:\?plain=1)?(?:#.*)?", "file"),
        (rf"{repository}/tree/main/([^?#]+)(?:#.*)?", "folder"),
        (rf"{repository}/actions/workflows/([^/?#]+)(?:/badge\.svg)?", "workflow"),
        (rf"{repository}/?", "repository"),
        (re.escape(project_home.colab_url("")) + r"([^?#]+\.ipynb)", "file"),
        (re.escape(project_home.binder_url("")) + r"([^&#]+\.ipynb)", "file"),
    ]
    seen = 0
    for name, page in book_pages().items():
        for url in [a["href"] for a in page.links] + [i["src"] for i in page.images]:
            if not re.match(rf"{repository}|https://colab\.research\.google\.com/github/|https://mybinder\.org/v2/", url):
                continue
            found = [(re.fullmatch(pattern, url), kind) for pattern, kind in forms if re.fullmatch(pattern, url)]
            if not found:
                pytest.fail(f"{name}: {url} is no known form of a link into the repository")
            match, kind = found[0]
            seen += 1
            if kind == "file":
                assert match.group(1) in tracked, f"{name}: {url} names {match.group(1)}, not a tracked file"
            elif kind == "folder":
                assert match.group(1).rstrip("/") in folders, f"{name}: {url} names no tracked folder"
            elif kind == "workflow":
                assert f".github/workflows/{match.group(1)}" in tracked, f"{name}: {url} names no workflow"
        if name.startswith(("notebooks/", "zh/notebooks/")):
            path = SOURCES[name]
            assert project_home.colab_url(path) in [a["href"] for a in page.links], f"{name}: no Colab launch button"
            assert project_home.binder_url(path) in [a["href"] for a in page.links], f"{name}: no Binder launch button"
    assert seen > 50


def test_every_image_has_alt_text_of_its_own():
    require_book()
    for name, page in book_pages().items():
        for image in page.images:
            alt, src = (image["alt"] or "").strip(), image["src"]
            assert alt, f"{name}: {src} has no alt text"
            assert not PATH_LIKE.fullmatch(alt) and Path(urllib.parse.urlsplit(src).path).name not in alt, \
                f"{name}: {src} has a path as alt text: {alt!r}"
            if "_images/" in src:                 # a figure drawn by a cell: a caption, not a label
                # (a Chinese character says about as much as an English word of 3 letters)
                assert len(alt) + 2 * len(CJK.findall(alt)) > 30, f"{name}: {src} has a weak alt text: {alt!r}"


def test_the_build_refuses_an_image_whose_alt_text_is_missing_or_a_path(monkeypatch):
    pytest.importorskip("sphinx")
    from docutils import nodes

    gradlab_book = _load("gradlab_book", ROOT / "docs" / "_ext" / "gradlab_book.py")
    warned = []
    monkeypatch.setattr(gradlab_book.LOGGER, "warning", lambda message, **kwargs: warned.append(message))
    doctree = nodes.section()
    for alt in (None, "", "../_images/ab12.png", "ab12.png", "Left, the forward values; right, the gradient."):
        doctree += nodes.image(uri="../_images/ab12.png", **({} if alt is None else {"alt": alt}))
    gradlab_book.check_image_alt(None, doctree, "page")
    assert len(warned) == 4 and all("ab12.png" in message for message in warned)


# Names each page teaches, and so must link to their TensorFlow API page (tf.X -> tf/X; keras.X -> tf/keras/X).
TAUGHT = {
    "index": ["tf.custom_gradient", "tf.stop_gradient", "keras.ops.custom_gradient"],
    "notebooks/00_start_here": ["tf.custom_gradient", "tf.GradientTape", "tf.stop_gradient"],
    "notebooks/01_custom_gradient": ["tf.custom_gradient", "tf.function"],
    "notebooks/02_stop_gradient_straight_through": ["tf.stop_gradient", "tf.grad_pass_through", "tf.round"],
    "notebooks/03_keras_layers": ["tf.custom_gradient", "keras.ops.custom_gradient", "keras.Input",
                                  "tf.saved_model.SaveOptions"],
    "notebooks/04_surrogate_gradients": ["tf.custom_gradient"],
    "notebooks/05_relu_gradients_saliency": ["tf.nn.relu", "tf.gradients", "keras.ops.relu"],
    "notebooks/06_chain_propagation": ["tf.IndexedSlices"],
    "notebooks/07_optimizer_level": ["tf.clip_by_norm", "tf.clip_by_global_norm", "tf.GradientTape"],
    "notebooks/08_higher_order_forward_mode": ["tf.autodiff.ForwardAccumulator", "tf.py_function"],
    "notebooks/09_performance": ["tf.function", "tf.py_function", "tf.numpy_function"],
    "notebooks/10_appendix_tf1_legacy": ["tf.RegisterGradient", "tf.compat.v1.py_func", "tf.gradients", "tf.Graph"],
    "notebooks/11_appendix_reference": ["tf.custom_gradient", "tf.stop_gradient", "keras.ops.stop_gradient"],
    "notebooks/12_domain_adversarial": ["tf.stop_gradient"],
    "notebooks/13_recipes": ["tf.custom_gradient", "tf.IndexedSlices"],
    "notebooks/14_questions": ["tf.recompute_grad", "tf.vectorized_map", "tf.autodiff.ForwardAccumulator"],
    "execution_modes": ["tf.function", "tf.distribute.MirroredStrategy", "tf.saved_model.save", "keras.Input"],
    "api": ["tf.custom_gradient", "tf.GradientTape"],
}


def _name_of(code: str) -> str:
    """The dotted name an inline code starts with (``@tf.custom_gradient`` -> ``tf.custom_gradient``)."""
    match = re.match(r"@?([\w.]+)", code.strip())
    return match.group(1) if match else ""


def test_pages_link_the_tensorflow_and_keras_names_they_teach_to_their_api_pages():
    require_book()
    pages = book_pages()
    for name, taught in TAUGHT.items():
        linked = {(_name_of(c["text"]), c["href"]) for c in pages[name].code if c["href"]}
        for api in taught:
            path = ("tf/keras/" + api[len("keras."):] if api.startswith("keras.") else api).replace(".", "/")
            assert (api, TF_DOCS + path) in linked, f"{name}: `{api}` does not link to {TF_DOCS + path}"


def test_inline_code_links_exactly_the_public_api_names():
    """Every inline code naming a public TF/Keras API links to its page (unless the text already
    links it elsewhere, e.g. to the notebook that teaches it), nothing else links there, and inline
    code naming a documented gradlab object links to the API page."""
    require_book()
    pages = book_pages()
    documented = {m for m in re.findall(r'id="(gradlab\.[\w.]+)"', (BOOK / "api.html").read_text())}
    for name, page in pages.items():
        for code in page.code:
            text, href = code["text"].strip(), code["href"]
            url = tf_api.api_url(text)
            authored = href is not None and not code["api_link"]       # a link written in the text
            if code["heading"]:
                assert not code["api_link"], f"{name}: a heading links `{text}`"
            elif url:
                assert href == url or authored, f"{name}: `{text}` links to {href}, not {url}"
            elif href and href.startswith(TF_DOCS):
                pytest.fail(f"{name}: `{text}` links to {href}, but names no public TensorFlow API")
            elif re.fullmatch(r"gradlab(\.\w+)+", text) and text in documented and not authored:
                target = urllib.parse.urljoin(f"{name}.html", href or "")
                assert target == f"api.html#{text}", f"{name}: `{text}` does not link to the API page"
    plain = [c for p in pages.values() for c in p.code if c["text"].strip() == "tf.py_func"]
    assert all(c["href"] is None for c in plain), "tf.py_func (TF1 only) must not be linked"


# --- the Chinese edition ------------------------------------------------------------------------

def _html(name: str) -> str:
    return (BOOK / f"{name}.html").read_text()


def _twin_links(page: _Page) -> list[str]:
    return [a["href"] for a in page.links if "gradlab-twin-link" in a["class"]]


def test_every_page_with_a_chinese_twin_links_it_and_back_at_the_top():
    require_book()
    pages = book_pages()
    assert set(TWINS) | set(TWINS.values()) <= set(pages)
    for english, chinese in TWINS.items():
        for name, twin, label in ((english, chinese, "中文版"), (chinese, english, "English")):
            links = _twin_links(pages[name])
            assert len(links) == 1, f"{name}: one link to its twin, found {links}"
            target = urllib.parse.urljoin(f"{name}.html", links[0])
            assert target == f"{twin}.html", f"{name}: its twin link goes to {target}, not {twin}.html"
            article = _html(name).split('<article class="bd-article">', 1)[1].lstrip()
            assert re.match(rf'<p class="gradlab-twin"><a [^>]*>{label}</a></p>', article), \
                f"{name}: the link to its twin ({label}) is not the first thing on the page"
    others = set(pages) - set(TWINS) - set(TWINS.values())
    assert not [name for name in others if _twin_links(pages[name])], "a page without a twin links none"


def test_english_navigation_is_unchanged_but_for_the_twin_link():
    require_book()
    for name, page in book_pages().items():
        if name.startswith("zh/"):
            continue
        into_zh = [a["href"] for a in page.links if urllib.parse.urljoin(f"{name}.html", a["href"]).startswith("zh/")
                   and "gradlab-twin-link" not in a["class"]]
        expected = ["zh/index.html"] if name == "index" else []   # the README's line on the Chinese edition
        assert into_zh == expected, f"{name}: links into the Chinese edition {into_zh}"


def test_chinese_pages_are_chinese_and_their_links_stay_chinese():
    require_book()
    english_pages = {name for name in book_pages() if not name.startswith("zh/")}
    twins = set(TWINS)
    for name, page in book_pages().items():
        if not name.startswith("zh/"):
            continue
        text = _html(name)
        assert re.search(r'<html[^>]* lang="zh-CN"', text), f"{name}: not marked zh-CN"
        for link in page.links:
            href = link["href"]
            parts = urllib.parse.urlsplit(href)
            if parts.scheme or parts.netloc or not parts.path:
                continue
            target = urllib.parse.urljoin(f"{name}.html", parts.path)
            assert (BOOK / target).exists(), f"{name}: {href} resolves to nothing"
            page_name = target.removesuffix(".html")
            if page_name in twins and "gradlab-twin-link" not in link["class"] and name != "zh/index":
                pytest.fail(f"{name}: {href} leaves the Chinese edition for a page that has a Chinese twin")
            if not target.startswith("zh/"):
                assert page_name in english_pages | {"_static/" + target.split("_static/")[-1]} or \
                    target.startswith(("_images/", "_static/")), f"{name}: {href}"
        if name in ("zh/genindex", "zh/search"):
            continue
        # The prose, without code, maths, scripts and outputs: most of it is Chinese.
        article = text.split('<article class="bd-article">', 1)[1].split("</article>", 1)[0]
        prose = re.sub(r"<(pre|code|script|style|math|mjx-container)\b.*?</\1>", " ", article, flags=re.S)
        prose = re.sub(r"\\\(.*?\\\)|\\\[.*?\\\]|\$\$.*?\$\$", " ", re.sub(r"<[^>]+>", " ", prose), flags=re.S)
        cjk, words = chinese_and_english(prose)
        assert cjk > 2 * words, f"{name}: {cjk} Chinese characters against {words} English words"   # 7.6 at least


def test_chinese_index_lists_every_notebook_by_its_chinese_title_and_links_the_english_api():
    require_book()
    index = _Page(BOOK / "zh" / "index.html")
    text = (BOOK / "zh" / "index.html").read_text()
    for path in ZH_NOTEBOOKS:
        title = build_book.title(path)
        href = f"notebooks/{path.stem}.html"
        assert href in [a["href"] for a in index.links], f"the Chinese index does not link {href}"
        plain = re.sub(r"`([^`]*)`", r"\1", title)
        shown = re.sub(r"<[^>]+>", "", text)
        assert plain in shown, f"the Chinese index does not show the title {plain!r}"
    assert '<a href="../api.html" hreflang="en">API 参考</a>' in text and "只有英文版" in text
    assert len(ZH_NOTEBOOKS) == len(NOTEBOOKS) == 15


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

    with chromium() as browser:
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
        # Its Chinese twin, one click away at the top of the page, renders too, and links back.
        page.locator("a.gradlab-twin-link").first.click()
        page.wait_for_url(re.compile(r"/zh/notebooks/01_custom_gradient\.html"))
        page.wait_for_selector("mjx-container", timeout=30_000)
        assert page.evaluate("document.documentElement.lang") == "zh-CN"
        assert page.locator("h1").first.inner_text().startswith("01 · 深入")
        page.locator("a.right-next").first.click()
        page.wait_for_url(re.compile(r"/zh/notebooks/02_stop_gradient_straight_through\.html"))
        page.locator("a.gradlab-twin-link").first.click()
        page.wait_for_url(re.compile(r"/notebooks/02_stop_gradient_straight_through\.html$"))


# Problems with wrapping on the page shown: a code block or output that does not wrap or is wider
# than its box (cut or scrolled sideways), or inline code outside a table that runs out of the text
# column. Collapsed cells (exercise solutions) are opened first so that they are measured too.
WRAP_PROBLEMS = """() => {
  document.querySelectorAll('article details').forEach(d => { d.open = true; });
  const problems = [];
  for (const pre of document.querySelectorAll('article pre')) {
    const style = getComputedStyle(pre);
    if (style.whiteSpace !== 'pre-wrap') problems.push(`white-space ${style.whiteSpace}: ${pre.textContent.slice(0, 60)}`);
    if (pre.scrollWidth > pre.clientWidth + 1)
      problems.push(`${pre.scrollWidth}px of text in ${pre.clientWidth}px: ${pre.textContent.slice(0, 60)}`);
  }
  const column = document.querySelector('article').getBoundingClientRect().right;
  for (const code of document.querySelectorAll('article code')) {
    if (code.closest('pre, table')) continue;
    if (code.getBoundingClientRect().right > column + 1) problems.push(`inline code past the column: ${code.textContent}`);
  }
  return problems;
}"""


@pytest.mark.browser
def test_code_and_outputs_wrap_on_a_narrow_and_a_wide_screen(site):
    require_browser()

    pages = [f"{name}.html" for name in SOURCES if not name.startswith("zh/")]
    pages += ["zh/index.html", "zh/notebooks/00_start_here.html", "zh/notebooks/05_relu_gradients_saliency.html"]
    with chromium() as browser:
        for width in (400, 1280):
            page = browser.new_page(viewport={"width": width, "height": 900})
            for name in pages:
                page.goto(f"{site}/{name}", wait_until="load")
                problems = page.evaluate(WRAP_PROBLEMS)
                assert not problems, f"{name} at {width}px: " + "; ".join(problems[:5])
            assert page.evaluate("document.querySelectorAll('article pre').length") > 0
            page.close()
