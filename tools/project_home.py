"""The project's distribution name and its home, read from pyproject.toml: the one place a fork changes.

``[project] name`` is the distribution (what ``pip install`` takes; the import package stays
``gradlab``), and ``[project.urls] Homepage`` is the repository on GitHub,
``https://github.com/OWNER/REPO``. Everything else that names the repository is generated from
these (the notebooks' Colab cell in ``tools/nblint.py``, the book in ``tools/build_book.py``, the
Colab edition of ``tools/assignments/make_assignments.py``) or tested against them (the README's
badges and every other link into the repository: ``tests/project/test_project.py``; each
notebook's Colab badge and Colab cell: the linter's rules ``colab-badge`` and ``colab-cell``).

Example:
  >>> import project_home
  >>> project_home.colab_url("notebooks/00_start_here.ipynb").startswith("https://colab.research.google.com/github/")
  True
"""
from __future__ import annotations

import re
from pathlib import Path

try:
    import tomllib
except ModuleNotFoundError:  # Python 3.10: tomli, as pip, pytest and build bring it there
    import tomli as tomllib

ROOT = Path(__file__).resolve().parents[1]
PYPROJECT = ROOT / "pyproject.toml"
#: The branch the published links (Colab, Binder, the book's source buttons) point into.
BRANCH = "main"
#: How the home must look: a GitHub repository, nothing after it.
GITHUB_REPOSITORY = re.compile(r"https://github\.com/([A-Za-z0-9-]+)/([A-Za-z0-9._-]+)")


def read_project(path: Path = PYPROJECT) -> dict:
    """The ``[project]`` table of ``path``.

    Raises:
      SystemExit: the file has no ``[project]`` table with a ``name``.
    """
    project = tomllib.loads(path.read_text(encoding="utf-8")).get("project", {})
    if not isinstance(project.get("name"), str):
        raise SystemExit(f"{path.name}: no [project] name")
    return project


def homepage(project: dict) -> str:
    """``[project.urls] Homepage`` of a ``[project]`` table, checked to be a GitHub repository.

    Raises:
      SystemExit: the Homepage is missing or is not ``https://github.com/OWNER/REPO``.
    """
    url = project.get("urls", {}).get("Homepage")
    if not isinstance(url, str) or not GITHUB_REPOSITORY.fullmatch(url):
        raise SystemExit(f"pyproject.toml: [project.urls] Homepage is {url!r}; it must be the repository on GitHub, "
                         "https://github.com/OWNER/REPO (no trailing slash), the one place that names the home")
    return url


_PROJECT = read_project()
#: The distribution's name, as ``pip install`` and ``importlib.metadata`` take it.
DISTRIBUTION: str = _PROJECT["name"]
#: The repository on GitHub, ``https://github.com/OWNER/REPO``.
HOMEPAGE: str = homepage(_PROJECT)
#: ``OWNER/REPO``, as Colab and Binder spell the repository.
GITHUB_PATH: str = HOMEPAGE.removeprefix("https://github.com/")


def colab_url(path: str) -> str:
    """The page that opens the repository file ``path`` (a notebook) on Colab."""
    return f"https://colab.research.google.com/github/{GITHUB_PATH}/blob/{BRANCH}/{path}"


def colab_badge(path: str) -> str:
    """The Open-in-Colab badge (Markdown) of the notebook at repository path ``path``."""
    return f"[![Open In Colab](https://colab.research.google.com/assets/colab-badge.svg)]({colab_url(path)})"


def binder_url(path: str) -> str:
    """The page that opens the repository file ``path`` in JupyterLab on Binder."""
    return f"https://mybinder.org/v2/gh/{GITHUB_PATH}/{BRANCH}?urlpath=lab/tree/{path}"


def ci_badge(workflow: str = "ci.yml") -> str:
    """The CI status badge (Markdown) of the GitHub workflow ``workflow``."""
    runs = f"{HOMEPAGE}/actions/workflows/{workflow}"
    return f"[![CI]({runs}/badge.svg)]({runs})"


#: Links that name a repository: on GitHub, on Colab and on Binder. Group 1 is ``OWNER/REPO``.
REPOSITORY_LINK = re.compile(
    r"(?:https?://)?(?:github\.com|colab\.research\.google\.com/github|mybinder\.org/v2/gh)/([A-Za-z0-9-]+/[A-Za-z0-9._-]+)")


def stale_links(text: str, home: str = GITHUB_PATH) -> list[tuple[int, str]]:
    """Where ``text`` links to this project under another home: ``(line number, OWNER/REPO)`` pairs.

    A link counts when it names a repository on GitHub, Colab or Binder whose owner or name contains
    ``gradlab`` (this project at an old home, or at the home before a fork changed pyproject.toml) and
    that is not ``home``.

    Example (a fork whose home is ``someone/fork``, reading a link to this home):
      >>> stale_links(f"see {HOMEPAGE}/blob/main/README.md", home="someone/fork") == [(1, GITHUB_PATH)]
      True
      >>> stale_links(f"{HOMEPAGE}/issues and https://github.com/tensorflow/tensorflow/issues/1")
      []
    """
    found = []
    for number, line in enumerate(text.splitlines(), 1):
        for match in REPOSITORY_LINK.finditer(line):
            repository = match[1].removesuffix(".git")
            if "gradlab" in repository.lower() and repository != home:
                found.append((number, repository))
    return found
