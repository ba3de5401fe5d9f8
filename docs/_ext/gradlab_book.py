"""Sphinx extension of the gradlab book (docs/conf.py): repository files and alt text.

- **Download and source buttons give the page's repository file.** The book is built from staged
  copies (tools/build_book.py): the README staged as ``index.md``, ``docs/api.md`` as ``api.md``,
  notebooks with render hints. The theme's "Download" button would point at ``_sources/`` (empty:
  ``html_copy_source`` is off, so the staged copies are not published) and its "Show source" /
  "Suggest edit" buttons at ``blob/main/<staged path>``. Here each page's buttons point at its
  repository file (``gradlab_repository_paths``), and "Download" gives that file byte for byte,
  copied into ``_sources/`` at its repository path: the real ``.ipynb`` (1.8 MB for all 15, no
  copies of the staged sources or ``.txt`` twins).
- **Each page links its twin in the other edition** (``gradlab_twins``: "中文版" on an English page,
  "English" on a Chinese one), first thing in the article, with a ``<link rel="alternate" hreflang>``
  in its head. A translated page's launch buttons (Colab, Binder) open its own notebook
  (``notebooks/zh/...``), not the staged path the theme builds them from.
- **Every image has alt text of its own**: an image whose alt is missing, empty or a file path
  (what HTML writers fall back to) is a warning, an error under ``-W``.
"""
from __future__ import annotations

import html
import re
import shutil
from pathlib import Path, PurePosixPath

from docutils import nodes
from sphinx.util import logging

LOGGER = logging.getLogger(__name__)
# Alt text that is a file name or path, as an HTML writer's fallback (the image URI) would be.
PATH_LIKE = re.compile(r"\S*[/\\]\S*|\S+\.(png|jpe?g|gif|svg|webp)", re.I)


def repository_path(app, pagename: str, suffix: str) -> str:
    """The repository path of a page's source (``index`` -> ``README.md``)."""
    staged = pagename + suffix
    return app.config.gradlab_repository_paths.get(staged, staged)


def repository_buttons(app, pagename, templatename, context, doctree) -> None:
    """Points the page's download, source and edit buttons at its repository file (see above)."""
    suffix = context.get("page_source_suffix")
    if doctree is None or not suffix:
        return
    path = repository_path(app, pagename, suffix)
    source = Path(app.config.gradlab_root) / path
    if not source.is_file():
        LOGGER.warning(f"{pagename}: its repository file {path} does not exist", location=pagename)
        return
    target = Path(app.outdir) / "_sources" / path
    target.parent.mkdir(parents=True, exist_ok=True)
    shutil.copyfile(source, target)
    repository, branch = app.config.gradlab_repository, app.config.gradlab_branch
    urls = {
        "download-source-button": context["pathto"](f"_sources/{path}", 1),
        "source-file-button": f"{repository}/blob/{branch}/{path}?plain=1",
        "source-edit-button": f"{repository}/edit/{branch}/{path}",
    }
    # context["sourcename"] stays "": Sphinx copies the staged source to _sources/<sourcename>
    # after this event whenever it is set, over the repository file.
    context["get_edit_provider_and_url"] = lambda: ("GitHub", urls["source-edit-button"])
    staged = pagename + suffix
    for button in context.get("header_buttons", []):
        for item in [button, *button.get("buttons", [])]:
            if button.get("label") == "launch-buttons" and item.get("url", "").endswith("/" + staged):
                item["url"] = item["url"][:-len(staged)] + path        # Colab and Binder: the repository file
            if item.get("label") in urls:
                item["url"] = urls[item["label"]]
            elif item.get("label") == "download-notebook-button":   # MyST Markdown notebooks only
                LOGGER.warning(f"{pagename}: unexpected generated-notebook download", location=pagename)


def twin_link(app, pagename, templatename, context, doctree) -> None:
    """Puts the link to the page's twin in the other edition at the top of its article (see above)."""
    twin = app.config.gradlab_twins.get(pagename)
    if twin is None or "body" not in context:
        return
    depth = pagename.count("/") + (1 if app.config.gradlab_edition_folder else 0)
    href = html.escape("../" * depth + twin["href"])
    lang = html.escape(twin["lang"])
    context["body"] = (f'<p class="gradlab-twin"><a class="gradlab-twin-link" href="{href}" hreflang="{lang}" '
                       f'lang="{lang}">{html.escape(twin["label"])}</a></p>\n' + context["body"])
    context["metatags"] = context.get("metatags", "") + f'\n<link rel="alternate" hreflang="{lang}" href="{href}" />'


def check_image_alt(app, doctree, docname: str) -> None:
    """Warns (an error under -W) for an image whose alt text is missing, empty or a path."""
    for image in doctree.findall(nodes.image):
        alt = (image.get("alt") or "").strip()
        if not alt or PATH_LIKE.fullmatch(alt) or alt == image.get("uri") or PurePosixPath(alt).name == \
                PurePosixPath(image.get("uri", "")).name:
            LOGGER.warning(f"image {image.get('uri')!r} has no alt text of its own (alt={alt!r}): give it a "
                           "caption (Markdown alt, or a code cell's metadata.gradlab.alt)", location=image)


def setup(app):
    app.add_config_value("gradlab_root", "", "env")
    app.add_config_value("gradlab_repository", "", "env")
    app.add_config_value("gradlab_branch", "main", "env")
    app.add_config_value("gradlab_repository_paths", {}, "env")
    app.add_config_value("gradlab_twins", {}, "env")
    app.add_config_value("gradlab_edition_folder", "", "env")
    app.connect("doctree-resolved", check_image_alt)
    # After the theme's buttons (sphinx-book-theme builds them at priority 501).
    app.connect("html-page-context", repository_buttons, priority=502)
    app.connect("html-page-context", twin_link)
    return {"version": "1", "parallel_read_safe": True, "parallel_write_safe": True}
