"""Sphinx configuration of the gradlab book (`make book`; see tools/build_book.py).

The book is built from a staging folder (build/book-src) that tools/build_book.py fills with the
README (as the landing page), the notebooks as stored, the API reference and a table of contents.
Notebooks are never executed here: strict nbval already keeps their stored outputs current.
The book's own extensions (docs/_ext): gradlab_book points each page's download and source
buttons at its repository file and fails the build on an image without alt text; api_links links
inline code naming a TensorFlow/Keras API to tensorflow.org and a gradlab name to the API page.
"""
import os
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(ROOT / "docs" / "_ext"), str(ROOT / "tools")]
import build_book  # noqa: E402 (tools/build_book.py: the repository URL, from pyproject.toml, and where each page comes from)

# The edition this run builds (tools/build_book.py runs Sphinx once per edition): English into build/book,
# Chinese into build/book/zh.
EDITION = {e.code: e for e in build_book.EDITIONS}[os.environ.get("GRADLAB_BOOK_EDITION", "en")]
OTHER = next(e for e in build_book.EDITIONS if e is not EDITION)
language = EDITION.language   # Sphinx's UI strings and search; <html lang="zh-CN"> for the Chinese pages

project = "gradlab"
author = "the gradlab developers"
copyright = "the gradlab developers, Apache-2.0"  # noqa: A001 (Sphinx's name)
REPOSITORY = build_book.REPOSITORY

extensions = [
    "myst_nb",                # notebooks and Markdown (MyST)
    "sphinx.ext.autodoc",     # the API reference, from gradlab's docstrings
    "sphinx.ext.napoleon",    # Google-style Args/Returns/Raises sections
    "sphinx.ext.mathjax",
    "sphinx-mathjax-offline",  # MathJax 3 copied into the site: the maths renders with no CDN
    "gradlab_book",           # docs/_ext: download/source buttons give repository files; alt text check
    "api_links",              # docs/_ext: inline code naming a TF/Keras or gradlab API links to its docs
]
root_doc = "index"
exclude_patterns = ["_build", "**.ipynb_checkpoints"]
suppress_warnings = ["myst.header"]  # the README starts at a level-1 heading, its sections at level 2

# Notebooks as stored: no execution, widget views without stored state are not rendered (each
# explorer is followed by its static snapshot, which the book shows).
nb_execution_mode = "off"
nb_merge_streams = True
myst_enable_extensions = ["dollarmath", "amsmath", "colon_fence"]
myst_heading_anchors = 3

autodoc_member_order = "bysource"
autodoc_typehints = "description"
napoleon_google_docstring = True
napoleon_numpy_docstring = False

html_theme = "sphinx_book_theme"
html_title = "gradlab" if EDITION is build_book.ENGLISH else "gradlab（中文版）"
# The staged copies are not published; gradlab_book copies each page's repository file into
# _sources/ for the download button instead (the real .ipynb, README.md for the landing page).
html_copy_source = False
html_show_sourcelink = False
# Code cells, outputs and inline code wrap instead of being cut (docs/_static/gradlab.css).
html_static_path = ["_static"]
html_css_files = ["gradlab.css"]
gradlab_root = str(ROOT)
gradlab_repository = REPOSITORY
gradlab_branch = build_book.project_home.BRANCH
# Staged path -> repository path, where they differ (README.md is the landing page index.md).
gradlab_repository_paths = {staged: source for source, staged in EDITION.staged_as().items() if staged != source}
# Each page with a twin in the other edition links it at the top (pagename -> the twin's path from the site's root).
gradlab_edition_folder = EDITION.folder
_PAGES = [{str(Path(staged).with_suffix("")) for staged in e.staged_as().values()} for e in (EDITION, OTHER)]
gradlab_twins = {pagename: {"href": f"{OTHER.folder}/{pagename}.html".lstrip("/"), "label": OTHER.label,
                            "lang": OTHER.language.replace("_", "-")} for pagename in sorted(_PAGES[0] & _PAGES[1])}
# A translated edition links gradlab's names to the English API reference: the English run's inventory.
gradlab_api_inventory = ("" if EDITION is build_book.ENGLISH else
                         str(Path(os.environ.get("GRADLAB_BOOK_OUT", ROOT / "build" / "book")) / "objects.inv"))
html_theme_options = {
    "repository_url": REPOSITORY,
    "repository_branch": gradlab_branch,
    "path_to_docs": "",                 # notebooks: staged path = repository path (launch buttons);
                                        # other pages' buttons: gradlab_repository_paths
    "use_repository_button": True,
    "use_source_button": True,          # "view source" of each page on GitHub
    "launch_buttons": {"binderhub_url": "https://mybinder.org", "colab_url": "https://colab.research.google.com",
                       "notebook_interface": "jupyterlab"},
    "show_navbar_depth": 1,
    "home_page_in_toc": True,
}

# TensorFlow is imported by autodoc: keep its start-up quiet.
os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
os.environ.setdefault("TF_ENABLE_ONEDNN_OPTS", "0")
