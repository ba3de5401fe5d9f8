"""Project-level checks: the pins agree everywhere, CI and Binder configs are valid, the README and the
claims ledgers agree with the notebooks, and `make lab` really serves the workbook. (The notebook rules
themselves are tools/nblint.py's, tested in tests/project/test_nblint.py.)"""
from __future__ import annotations

import importlib.metadata
import json
import os
import re
import signal
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
from pathlib import Path

import pytest
import yaml

try:
    import tomllib
except ModuleNotFoundError:  # Python 3.10
    tomllib = pytest.importorskip("tomli")
from packaging.markers import default_environment
from packaging.requirements import Requirement

ROOT = Path(__file__).resolve().parents[2]
NOTEBOOKS = sorted((ROOT / "notebooks").glob("*.ipynb"))
if str(ROOT / "tools") not in sys.path:
    sys.path.insert(0, str(ROOT / "tools"))
import project_home  # noqa: E402  (the distribution's name and the home, read from pyproject.toml)
BIN = Path(sys.executable).parent

# The packages the workbook must pin exactly (the list), by distribution name.
MUST_PIN = {
    "tensorflow-cpu", "tensorflow", "keras", "jupyterlab", "ipywidgets", "matplotlib",
    "nbval", "pytest", "hypothesis",
}


def read_requirements(path: Path, seen: set | None = None) -> list[Requirement]:
    """Parses a pip requirements file, following -r includes relative to the including file."""
    seen = set() if seen is None else seen
    path = path.resolve()
    assert path not in seen, f"requirements include cycle at {path}"
    seen.add(path)
    requirements = []
    for raw in path.read_text().splitlines():
        line = raw.split("#", 1)[0].strip() if not raw.lstrip().startswith("#") else ""
        # A marker may contain '#'-free text; re-read the line without comment stripping inside quotes.
        if not line:
            continue
        if line.startswith(("-r ", "--requirement ")):
            requirements += read_requirements(path.parent / line.split(None, 1)[1], seen)
        elif line.startswith("-"):
            continue
        else:
            requirements.append(Requirement(line))
    return requirements


def applicable(requirements: list[Requirement], env: dict | None = None) -> dict[str, Requirement]:
    env = env or default_environment()
    result = {}
    for req in requirements:
        if req.marker is None or req.marker.evaluate(env):
            name = req.name.lower()
            assert name not in result, f"{name} is pinned twice for the same environment"
            result[name] = req
    return result


ROOT_PINS = read_requirements(ROOT / "requirements.txt")

PLATFORMS = {
    "linux-x86_64-py311": dict(sys_platform="linux", platform_machine="x86_64", python_version="3.11"),
    "linux-aarch64-py311": dict(sys_platform="linux", platform_machine="aarch64", python_version="3.11"),
    "macos-arm64-py312": dict(sys_platform="darwin", platform_machine="arm64", python_version="3.12"),
    "windows-py310": dict(sys_platform="win32", platform_machine="AMD64", python_version="3.10"),
}


# --- pins ----------------------------------------------------------------------------------------

@pytest.mark.parametrize("platform", sorted(PLATFORMS))
def test_every_platform_gets_one_exact_pin_of_each_package(platform):
    env = {**default_environment(), **PLATFORMS[platform]}
    pins = applicable(ROOT_PINS, env)
    tf_names = {"tensorflow", "tensorflow-cpu"} & set(pins)
    assert len(tf_names) == 1, f"{platform}: exactly one TensorFlow build, got {tf_names}"
    expected_tf = "tensorflow-cpu" if PLATFORMS[platform]["sys_platform"] == "linux" and \
        PLATFORMS[platform]["platform_machine"] == "x86_64" else "tensorflow"
    assert tf_names == {expected_tf}
    assert str(pins[expected_tf].specifier) == "==2.21.0"
    for name in MUST_PIN - {"tensorflow", "tensorflow-cpu"}:
        assert name in pins, f"{platform}: {name} is not pinned"
    for name, req in pins.items():
        specs = list(req.specifier)
        assert len(specs) == 1 and specs[0].operator == "==", f"{name} must be pinned with ==, got {req}"
    assert pins["keras"].specifier.contains("3.0.0") is False and str(pins["keras"].specifier).startswith("==3.")
    assert str(pins["jupyterlab"].specifier).startswith("==4.")
    assert str(pins["ipywidgets"].specifier).startswith("==8.")


def test_installed_environment_matches_the_pins():
    """The running environment is the pinned one (catches a stale .venv and drift)."""
    mismatches = []
    for name, req in applicable(ROOT_PINS).items():
        try:
            installed = importlib.metadata.version(name)
        except importlib.metadata.PackageNotFoundError:
            mismatches.append(f"{name}: not installed")
            continue
        if not req.specifier.contains(installed, prereleases=True):
            mismatches.append(f"{name}: installed {installed}, pinned {req.specifier}")
    assert not mismatches, "run `make install` again:\n" + "\n".join(mismatches)


def test_pyproject_ranges_admit_the_pins():
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    pins = applicable(ROOT_PINS)
    extras = project["optional-dependencies"]
    for line in project["dependencies"] + extras["cpu"] + extras["notebook"]:
        req = Requirement(line)
        if req.marker is not None and not req.marker.evaluate():
            continue
        pinned = pins[req.name.lower()]
        version = next(iter(pinned.specifier)).version
        assert req.specifier.contains(version), f"pyproject wants {req}, requirements pin {pinned}"
    assert project["requires-python"] == ">=3.10"


def test_binder_installs_exactly_the_root_pins_and_gradlab():
    binder = ROOT / "binder"
    binder_pins = read_requirements(binder / "requirements.txt")
    assert [str(r) for r in binder_pins] == [str(r) for r in ROOT_PINS]
    # repo2docker runs postBuild and start only when they are executable.
    assert os.access(binder / "postBuild", os.X_OK) and os.access(binder / "start", os.X_OK)


BINDER_PYTHON_STUB = """#!/bin/bash
case "$*" in
    *sys.prefix*) echo "$STUB_PREFIX" ;;
    *) echo "python $*" >> "$STUB_LOG" ;;
esac
"""


def test_binder_postbuild_installs_gradlab_and_the_workbooks_jupyter_settings(tmp_path):
    """postBuild, run with a stub python: gradlab installed editable without touching the pins, and
    JupyterLab's settings (no news pop-up) and the server settings (language_info kept) in place."""
    bin_dir, prefix, log = tmp_path / "bin", tmp_path / "prefix", tmp_path / "calls.log"
    bin_dir.mkdir()
    (bin_dir / "python").write_text(BINDER_PYTHON_STUB)
    (bin_dir / "python").chmod(0o755)
    result = subprocess.run(["bash", "binder/postBuild"], cwd=ROOT, capture_output=True, text=True, timeout=60,
                            env={**os.environ, "PATH": f"{bin_dir}:{os.environ['PATH']}",
                                 "STUB_PREFIX": str(prefix), "STUB_LOG": str(log)})
    assert result.returncode == 0, result.stdout + result.stderr
    installs = [line.split() for line in log.read_text().splitlines() if " pip install" in line]
    assert any("-e" in i and "." in i and "--no-deps" in i for i in installs), installs
    settings = prefix / "share" / "jupyter" / "lab" / "settings" / "overrides.json"
    assert settings.read_bytes() == (ROOT / "jupyter" / "overrides.json").read_bytes()
    server = prefix / "etc" / "jupyter" / "jupyter_server_config.py"
    assert server.read_bytes() == (ROOT / "jupyter" / "jupyter_server_config.py").read_bytes()


def test_binder_start_silences_tensorflow_and_runs_the_command():
    result = subprocess.run(["bash", "binder/start", "env"], cwd=ROOT, capture_output=True, text=True, timeout=60,
                            env={k: v for k, v in os.environ.items() if not k.startswith("TF_")})
    assert result.returncode == 0, result.stderr
    assert {"TF_CPP_MIN_LOG_LEVEL=2", "TF_ENABLE_ONEDNN_OPTS=0"} <= set(result.stdout.splitlines())


def test_conda_environment_installs_the_same_pins_and_python():
    env = yaml.safe_load((ROOT / "environment.yml").read_text())
    deps = env["dependencies"]
    pip_section = next(d["pip"] for d in deps if isinstance(d, dict) and "pip" in d)
    assert "-r requirements.txt" in pip_section and "-e ." in pip_section
    assert "pip" in deps
    conda_python = next(d for d in deps if isinstance(d, str) and d.startswith("python="))
    runtime = (ROOT / "binder" / "runtime.txt").read_text().strip()
    assert conda_python.split("=", 1)[1] == runtime.removeprefix("python-"), (conda_python, runtime)
    assert env["variables"] == {"TF_CPP_MIN_LOG_LEVEL": "2", "TF_ENABLE_ONEDNN_OPTS": "0"}


# --- CI --------------------------------------------------------------------------------------------

WORKFLOWS = sorted((ROOT / ".github" / "workflows").glob("*.yml"))


def test_there_is_a_workflow():
    assert WORKFLOWS


@pytest.mark.parametrize("workflow", WORKFLOWS, ids=lambda p: p.name)
def test_workflow_validates_against_the_github_schema(workflow):
    result = subprocess.run(
        [str(BIN / "check-jsonschema"), "--builtin-schema", "vendor.github-workflows", str(workflow)],
        capture_output=True, text=True, timeout=120,
    )
    assert result.returncode == 0, result.stdout + result.stderr


# What CI runs (the scripts run with their tools stubbed): tests/project/test_ci.py.


def test_readme_shows_the_two_commands_binder_conda_and_every_notebook():
    readme = (ROOT / "README.md").read_text()
    assert "make lab" in readme and "make test" in readme
    assert re.search(r"mybinder\.org/v2/gh/[^)\s]+\?urlpath=lab/tree/notebooks/00_start_here\.ipynb", readme)
    assert "conda env create -f environment.yml" in readme
    for notebook in NOTEBOOKS:
        assert f"(notebooks/{notebook.name})" in readme, f"{notebook.name} is missing from README's table"


# --- Binder ---------------------------------------------------------------------------------------

@pytest.fixture(scope="module")
def dockerfile() -> str:
    """The Dockerfile repo2docker would build (it prints it with --no-build; no Docker needed)."""
    result = subprocess.run(
        [str(BIN / "jupyter-repo2docker"), "--no-build", "--no-run", "--debug", str(ROOT)],
        capture_output=True, text=True, timeout=300, cwd=ROOT,
    )
    assert result.returncode == 0, result.stderr[-3000:]
    return result.stdout + result.stderr


def test_repo2docker_accepts_binder_and_installs_the_pinned_stack_and_gradlab(dockerfile):
    assert "Building conda environment for python=3.11" in dockerfile  # from binder/runtime.txt
    copy_repo = dockerfile.index("COPY --chown=0:0 src/ ${REPO_DIR}/")
    install = dockerfile.index('pip install --no-cache-dir -r "binder/requirements.txt"')
    assert copy_repo < install, "binder/requirements.txt includes ../requirements.txt, so it must run after the repo is copied"
    assert dockerfile.index("./binder/postBuild") > install
    assert 'R2D_ENTRYPOINT="${REPO_DIR}/binder/start"' in dockerfile


# --- notebooks ---------------------------------------------------------------------------------------
# The notebook rules (skeleton, bounds, nbval tags, storage, ...) are tools/nblint.py's; tests/project/test_nblint.py
# checks that every stored notebook passes them and that each rule catches what it is meant to.

def test_there_are_notebooks():
    assert (ROOT / "notebooks" / "00_start_here.ipynb") in NOTEBOOKS


def test_every_notebook_opens_on_colab_from_the_readme():
    """The README's row of each notebook carries the Open-in-Colab badge its title cell carries
    (the title cell's badge is the linter's rule colab-badge)."""
    readme = (ROOT / "README.md").read_text()
    for path in NOTEBOOKS:
        badge = project_home.colab_badge(f"notebooks/{path.name}")
        row = next(line for line in readme.splitlines() if line.startswith(f"| [{path.stem}]("))
        assert row.endswith(f"| {badge} |"), f"README: the row of {path.stem} should end with | {badge} |"


# --- the home and the name: pyproject.toml's, everywhere ---------------------------------------------

def tracked_text_files() -> dict[str, str]:
    """Every file git tracks (or would: untracked, not ignored) that is text, by repository path."""
    try:
        listed = subprocess.run(["git", "ls-files", "--cached", "--others", "--exclude-standard"], cwd=ROOT,
                                capture_output=True, text=True, check=True).stdout.splitlines()
    except (OSError, subprocess.CalledProcessError):
        pytest.skip("not a git checkout: the repository's files are unknown")
    texts = {}
    for name in listed:
        try:
            texts[name] = (ROOT / name).read_text(encoding="utf-8")
        except (UnicodeDecodeError, FileNotFoundError, IsADirectoryError):
            continue
    return texts


def test_every_link_to_the_project_names_the_homepage_in_pyproject():
    """A fork changes pyproject.toml's Homepage alone; this names every other place that still links to
    the old home (README badges, docs, notebooks, tools), file and line."""
    stale = [f"{name}:{line}: {repository}" for name, text in sorted(tracked_text_files().items())
             for line, repository in project_home.stale_links(text)]
    assert not stale, (f"these link to a home other than pyproject.toml's Homepage {project_home.HOMEPAGE}; "
                       "point them there:\n" + "\n".join(stale))


def test_a_changed_homepage_is_named_in_the_readme_and_the_notebooks():
    """What the check above reports for a fork: the README's and every notebook's links to the old home."""
    fork = "someone/workbook-fork"
    readme = project_home.stale_links((ROOT / "README.md").read_text(), home=fork)
    assert {repository for _, repository in readme} == {project_home.GITHUB_PATH}
    assert len(readme) >= len(NOTEBOOKS) + 3     # the Binder and CI badges, Binder's link, each notebook's row
    for path in NOTEBOOKS:
        assert len(project_home.stale_links(path.read_text(), home=fork)) == 2, path.name   # badge and Colab cell


def test_the_readme_badges_are_generated_from_the_homepage():
    readme = (ROOT / "README.md").read_text()
    binder = f"[![Binder](https://mybinder.org/badge_logo.svg)]({project_home.binder_url('notebooks/00_start_here.ipynb')})"
    assert readme.splitlines()[2:4] == [binder, project_home.ci_badge()], "README: the badges under the title"
    assert (ROOT / ".github" / "workflows" / "ci.yml").is_file()


def test_the_project_urls_all_start_at_the_homepage():
    urls = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["urls"]
    assert urls["Homepage"] == project_home.HOMEPAGE
    for label, url in urls.items():
        assert url.startswith(project_home.HOMEPAGE), f"pyproject.toml: [project.urls] {label} = {url!r} is not under Homepage"


def test_the_homepage_must_be_a_github_repository():
    assert project_home.homepage({"urls": {"Homepage": "https://github.com/gradlab-tf/gradlab-tf"}})
    for bad in ("https://github.com/gradlab-tf/gradlab-tf/", "https://gitlab.com/a/b", "https://github.com/a", None):
        with pytest.raises(SystemExit, match="Homepage"):
            project_home.homepage({"urls": {"Homepage": bad}} if bad else {})


def test_no_command_installs_the_other_gradlab_from_pypi():
    """On PyPI, gradlab is an unrelated project: no install command in what users read (the docs, the
    notebooks, gradlab's own messages, the install files) names it; they name gradlab-tf or a path."""
    assert project_home.DISTRIBUTION == "gradlab-tf"
    command = re.compile(r"""pip install (?:-[-\w]+ )*["']?gradlab(?:\[[\w,]+\])?["']?(?![-\w./])""")
    read = re.compile(r"(\.md|\.ipynb|\.txt|\.yml|\.toml|^gradlab/.*\.py|^binder/.*|^tools/assignments/.*)$")
    warning = "**Not `pip install gradlab`.**"    # the README's one deliberate mention, which says why not
    found = [f"{name}:{number}: {line.strip()}" for name, text in sorted(tracked_text_files().items()) if read.search(name)
             for number, line in enumerate(text.splitlines(), 1) if command.search(line.replace(warning, ""))]
    assert not found, "these install another project called gradlab; name gradlab-tf:\n" + "\n".join(found)


# --- the package's import cost and side effects -----------------------------------------------------

def test_import_gradlab_loads_no_plotting_or_widgets():
    """gradlab.plots and gradlab.widgets load matplotlib.pyplot and ipywidgets on first use only.

    (TensorFlow itself imports parts of matplotlib and IPython; only what gradlab adds counts.)"""
    code = ("import sys, tensorflow; before = set(sys.modules); import gradlab; "
            "added = sorted(m for m in set(sys.modules) - before if m.split('.')[0] in "
            "('matplotlib', 'ipywidgets', 'ipympl', 'IPython', 'keras') or m == 'matplotlib.pyplot'); "
            "print(added)")
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == "[]"


# --- make lab ----------------------------------------------------------------------------------------

def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


@pytest.mark.slow
def test_make_lab_serves_the_workbook_on_localhost_with_a_token():
    port = free_port()
    env = {**os.environ, "JUPYTER_CONFIG_DIR": str(ROOT / ".venv" / "test-jupyter-config")}
    server = subprocess.Popen(
        ["make", "--no-print-directory", "lab",
         f"LAB_ARGS=--ServerApp.port={port} --ServerApp.port_retries=0 --ServerApp.open_browser=False"],
        cwd=ROOT, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
        start_new_session=True,
    )
    try:
        token, log = None, []
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline and token is None:
            line = server.stdout.readline()
            if not line:
                break
            log.append(line)
            match = re.search(rf"http://127\.0\.0\.1:{port}/lab\?token=([0-9a-f]+)", line)
            token = match.group(1) if match else None
        assert token, "no URL with a token in the output of make lab:\n" + "".join(log[-30:])
        base = f"http://127.0.0.1:{port}"
        model = None
        while model is None:  # Jupyter Server prints its URL a moment before it accepts connections
            try:
                with urllib.request.urlopen(f"{base}/api/contents/00_start_here.ipynb?token={token}", timeout=30) as reply:
                    model = json.load(reply)
            except urllib.error.URLError as err:
                if isinstance(err, urllib.error.HTTPError) or time.monotonic() > deadline:
                    raise
                time.sleep(0.25)
        assert model["type"] == "notebook" and model["content"]["cells"]
        with pytest.raises(urllib.error.HTTPError) as refused:
            urllib.request.urlopen(f"{base}/api/contents/00_start_here.ipynb", timeout=30)
        assert refused.value.code == 403
        with socket.socket() as sock:  # bound to loopback only
            addresses = {info[4][0] for info in socket.getaddrinfo(socket.gethostname(), None, socket.AF_INET)}
            outside = sorted(a for a in addresses if not a.startswith("127."))
            if outside:
                assert sock.connect_ex((outside[0], port)) != 0
    finally:
        os.killpg(server.pid, signal.SIGTERM)
        try:
            server.wait(timeout=30)
        except subprocess.TimeoutExpired:
            os.killpg(server.pid, signal.SIGKILL)
            server.wait(timeout=30)


def _ledger_verdicts(markdown: str) -> dict:
    verdicts = {}
    for line in markdown.splitlines():
        cells = [c.strip() for c in line.strip().strip("|").split(" | ")]
        if len(cells) >= 3 and cells[0].isdigit():
            verdict = re.match(r"\*\*(.+?)\*\*", cells[2])
            assert verdict, f"claim {cells[0]}: no bold verdict in {cells[2]!r}"
            verdicts[int(cells[0])] = verdict[1].lower()
    return verdicts


REFERENCE = ROOT / "notebooks" / "11_appendix_reference.ipynb"


def _reference_ledger() -> str:
    nb = json.loads(REFERENCE.read_text())
    return next("".join(c["source"]) for c in nb["cells"]
                if c["cell_type"] == "markdown" and "claims ledger" in "".join(c["source"]).lower()
                and "| 1 |" in "".join(c["source"]))


def test_readme_claims_ledger_matches_the_reference_notebook():
    """The README's ledger repeats the reference notebook's; each verdict is asserted by an executed
    cell in the notebook that the ledger links to."""
    readme = (ROOT / "README.md").read_text()
    ledger = readme[readme.index("## The claims ledger"):readme.index("## The package")]
    reference, shown = _ledger_verdicts(_reference_ledger()), _ledger_verdicts(ledger)
    assert sorted(reference) == list(range(1, 11)) and shown == reference
    allowed = {"holds", "holds with a caveat", "outdated", "wrong"}
    assert set(reference.values()) <= allowed, set(reference.values()) - allowed


@pytest.mark.parametrize("where", ["readme", "reference"])
def test_every_ledger_row_links_to_existing_notebooks(where):
    text = (ROOT / "README.md").read_text() if where == "readme" else _reference_ledger()
    if where == "readme":
        text = text[text.index("## The claims ledger"):text.index("## The package")]
    names = {p.name for p in NOTEBOOKS}
    for line in text.splitlines():
        if re.match(r"\|\s*\d+\s*\|", line):
            links = re.findall(r"\]\((?:notebooks/)?(\d\d_[\w]+\.ipynb)[)#]", line)
            assert links, f"a ledger row names no notebook: {line[:80]}"
            assert set(links) <= names, f"a ledger row links to a missing notebook: {set(links) - names}"


def test_readme_notebook_table_follows_the_sequence():
    """The README lists the notebooks in their order, under the core path, topics and appendix
    (the topic notebooks 04-09 and 12 come before the appendix, 10 and 11)."""
    readme = (ROOT / "README.md").read_text()
    table = readme[readme.index("## The notebooks"):readme.index("## The claims ledger")]
    listed = re.findall(r"\(notebooks/(\d\d_\w+\.ipynb)\)", table)
    assert listed == [p.name for p in sorted(NOTEBOOKS, key=lambda p: (p.name[:2] in ("10", "11"), p.name))]
    for part in ("Core path", "Topic", "Appendix"):
        assert part.lower() in table.lower(), f"the README's notebook table has no '{part}' part"


def test_the_ledgers_name_every_tensorflow_stack_their_verdicts_were_checked_on():
    """The claims ledger says on which stacks `make test-versions` checked each verdict (issue 20)."""
    stacks = []
    for pins in sorted((ROOT / "tools" / "versions").glob("*.txt")):
        text = pins.read_text()
        if "-r ../../requirements.txt" in text:
            text = (ROOT / "requirements.txt").read_text()
        found = {}
        for package, version in re.findall(r"^(tensorflow(?:-cpu)?|keras)==([\d.]+)", text, re.M):
            found.setdefault(package, version)       # the first pin (the workbook's platform and Python)
        stacks.append((found.get("tensorflow-cpu") or found["tensorflow"], found["keras"]))
    readme = (ROOT / "README.md").read_text()
    for ledger in (readme[readme.index("## The claims ledger"):readme.index("## The package")], _reference_ledger()):
        flat = " ".join(ledger.split())
        for tf_version, keras_version in stacks:
            assert f"TensorFlow {tf_version} with Keras {keras_version}" in flat or (
                f"TensorFlow {tf_version}" in flat and f"Keras {keras_version}" in flat), (tf_version, keras_version)
        assert "make test-versions" in flat
