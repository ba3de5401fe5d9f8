"""Project-level checks: the pins agree everywhere, CI and Binder configs are valid, notebooks are
stored as clean runs, and `make lab` really serves the workbook."""
from __future__ import annotations

import ast
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
    post_build = (binder / "postBuild").read_text()
    assert re.search(r"pip install .*-e \.", post_build), "postBuild must install gradlab itself"
    assert os.access(binder / "postBuild", os.X_OK) and os.access(binder / "start", os.X_OK)
    assert "jupyter/overrides.json" in post_build, "Binder's JupyterLab must not ask about Jupyter news"
    start = (binder / "start").read_text()
    assert "TF_CPP_MIN_LOG_LEVEL=2" in start and "TF_ENABLE_ONEDNN_OPTS=0" in start
    assert 'exec "$@"' in start


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


# --- notebooks --------------------------------------------------------------------------------------

NOISE = re.compile(r"(^[IWE]\d{4} \d\d:\d\d|oneDNN custom operations|absl::InitializeLog|cuda_|TF-TRT|"
                   r"This TensorFlow binary is optimized|rebuild TensorFlow|WARNING:tensorflow)", re.M)
PATHS = re.compile(r"(/root/|/home/\w+|/tmp/|/work/|site-packages|\.venv/)")
ADDRESS = re.compile(r"\bat 0x[0-9a-fA-F]{6,}")


def output_text(output: dict) -> str:
    if output.get("output_type") == "stream":
        return "".join(output.get("text", ""))
    if output.get("output_type") == "error":
        return "\n".join(output.get("traceback", []))
    return "".join(output.get("data", {}).get("text/plain", ""))


def test_there_are_notebooks():
    assert (ROOT / "notebooks" / "00_start_here.ipynb") in NOTEBOOKS


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.name)
def test_notebook_is_stored_as_one_clean_run(path):
    nb = json.loads(path.read_text())
    cells = nb["cells"]
    assert cells[0]["cell_type"] == "markdown" and "".join(cells[0]["source"]).startswith("# "), "title first"
    assert nb["metadata"]["kernelspec"]["name"] == "python3"
    code = [c for c in cells if c["cell_type"] == "code"]
    counts = [c["execution_count"] for c in code]
    assert counts == list(range(1, len(code) + 1)), f"execution counts {counts}: re-run top to bottom"
    for index, cell in enumerate(code, 1):
        tags = set(cell.get("metadata", {}).get("tags", []))
        for output in cell.get("outputs", []):
            text = output_text(output)
            if output["output_type"] == "error":
                assert "raises-exception" in tags, f"cell [{index}] stores an error it does not declare"
            assert not NOISE.search(text), f"cell [{index}] shows TensorFlow log noise: {NOISE.search(text)[0]!r}"
            assert not PATHS.search(text), f"cell [{index}] shows a machine path: {PATHS.search(text)[0]!r}"
            assert not ADDRESS.search(text), f"cell [{index}] shows a memory address"


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.name)
def test_only_unstable_cells_escape_nbval(path):
    """Cells excused from output comparison say why: widgets, timings, and cells tagged `trained`.

    A cell that prints numbers from training is tagged `trained` and `nbval-ignore-output` (its
    digits differ from CPU to CPU; its asserts are still checked). CI's nudged nbval run
    (tests/workbook/test_nudge.py) finds a trained number printed by a cell that is still compared.
    """
    nb = json.loads(path.read_text())
    for index, cell in enumerate((c for c in nb["cells"] if c["cell_type"] == "code"), 1):
        tags = set(cell.get("metadata", {}).get("tags", []))
        source = "".join(cell["source"])
        assert "nbval-skip" not in tags and "# NBVAL_SKIP" not in source, f"cell [{index}] is skipped by nbval"
        if "trained" in tags:
            assert "nbval-ignore-output" in tags, f"cell [{index}] is tagged trained but its output is compared"
        elif "nbval-ignore-output" in tags or "# NBVAL_IGNORE_OUTPUT" in source:
            assert re.search(r"(?i)(widget|explorer|timing|time|benchmark)", source), (
                f"cell [{index}] ignores its output but is neither a widget, a timing nor a trained cell")


def test_every_notebook_opens_on_colab_from_its_title_cell_and_from_the_readme():
    readme = (ROOT / "README.md").read_text()
    for path in NOTEBOOKS:
        url = f"https://colab.research.google.com/github/gradlab/gradlab/blob/main/notebooks/{path.name}"
        badge = f"[![Open In Colab](https://colab.research.google.com/assets/colab-badge.svg)]({url})"
        title = "".join(json.loads(path.read_text())["cells"][0]["source"])
        assert badge in title, f"{path.name}: its first cell has no Open-in-Colab badge"
        row = next(line for line in readme.splitlines() if line.startswith(f"| [{path.stem}]("))
        assert row.endswith(f"| {badge} |"), f"README: the row of {path.stem} has no Colab badge"


#: Every notebook's first code cell, stored collapsed (JupyterLab shows its first line): on Colab (or
#: when GRADLAB_COLAB=1 forces it) it clones the workbook, installs gradlab without touching the
#: TensorFlow there, and puts the workbook's helper modules on sys.path; elsewhere it does nothing.
COLAB_CELL = """# Colab only: fetch the workbook and install gradlab into Colab's TensorFlow (elsewhere: nothing)
import os
import sys

if "google.colab" in sys.modules or os.environ.get("GRADLAB_COLAB") == "1":
    repo = os.environ.get("GRADLAB_REPO", "https://github.com/gradlab/gradlab")
    if not os.path.isdir("gradlab-workbook"):
        !git clone -q {repo} gradlab-workbook
    %pip install -q "./gradlab-workbook[notebook]"
    sys.path.insert(0, os.path.abspath("gradlab-workbook/notebooks"))   # the workbook's helper modules"""
#: The setup, one line, opens the second code cell (notebooks/workbook.py; notebook 00 explains it).
SETUP_LINE = "import workbook; workbook.setup()"


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.name)
def test_notebook_follows_the_skeleton(path):
    nb = json.loads(path.read_text())
    markdown = "\n".join("".join(c["source"]) for c in nb["cells"] if c["cell_type"] == "markdown")
    for heading in ("Learning objectives", "Run time", "Setup", "Exercise", "Summary"):
        assert re.search(heading, markdown, re.I), f"{path.name} has no '{heading}' part"
    colab, setup = ("".join(c["source"]) for c in [c for c in nb["cells"] if c["cell_type"] == "code"][:2])
    # The Colab-only install comes first, collapsed; then the shared setup (notebooks/workbook.py: log
    # level, threads, seed) in one line, before TensorFlow loads, the same way in every notebook.
    first = next(c for c in nb["cells"] if c["cell_type"] == "code")
    assert colab == COLAB_CELL, f"{path.name}'s first code cell is not the Colab cell"
    assert first["metadata"].get("jupyter", {}).get("source_hidden") is True and "colab" in first["metadata"].get("tags", []), (
        f"{path.name}: the Colab cell is not stored collapsed with the tag 'colab'; run make execute")
    assert setup.splitlines()[0].startswith(SETUP_LINE), f"{path.name}'s second code cell does not start with {SETUP_LINE!r}"
    assert "import tensorflow" not in colab, f"{path.name}: the Colab cell imports TensorFlow before the setup"
    # At least two exercises, each solution stored collapsed (source and output hidden in JupyterLab)
    # and still executed by nbval (tag `solution`), announced by the markdown cell before it.
    cells = nb["cells"]
    solutions = [i for i, c in enumerate(cells)
                 if c["cell_type"] == "code" and "solution" in c.get("metadata", {}).get("tags", [])]
    assert len(solutions) >= 2, f"{path.name} has {len(solutions)} executed solutions; it needs two exercises or more"
    for i in solutions:
        hidden = cells[i]["metadata"].get("jupyter", {})
        assert hidden.get("source_hidden") is True and hidden.get("outputs_hidden") is True, (
            f"{path.name}: the solution in cell {i} is visible; run make execute (tools/hide_solutions.py)")
        # JupyterLab shows a collapsed cell's first line: it must not give the answer away.
        assert "".join(cells[i]["source"]).startswith("# Solution"), (
            f"{path.name}: the solution in cell {i} does not start with a '# Solution' comment")
        assert cells[i - 1]["cell_type"] == "markdown" and "solution" in "".join(cells[i - 1]["source"]).lower(), (
            f"{path.name}: the solution in cell {i} is not announced by a markdown cell")
        assert cells[i]["outputs"], f"{path.name}: the solution in cell {i} was not executed"


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.name)
def test_every_widget_is_followed_by_a_static_picture(path):
    """Readers on GitHub see no widgets: the next code cell after one shows a stored picture, and no
    stale widget state bloats the file (each widget output carries its own PNG fallback)."""
    nb = json.loads(path.read_text())
    assert "widgets" not in nb["metadata"], (
        f"{path.name} stores widget state: re-run it with make execute (store_widget_state=False)")
    code = [c for c in nb["cells"] if c["cell_type"] == "code"]
    for index, cell in enumerate(code):
        if any("application/vnd.jupyter.widget-view+json" in o.get("data", {}) for o in cell["outputs"]):
            later = code[index + 1:index + 2]
            assert later and any("image/png" in o.get("data", {}) for o in later[0]["outputs"]), (
                f"{path.name}: the widget in code cell [{index + 1}] is not followed by a static picture")


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


# --- The learner-first bounds (issue 11): short notebooks, short cells, checkers in modules. ---
MAX_WORDS, MAX_CELLS, MAX_CODE_LINES, MAX_TOTAL_WORDS = 2000, 40, 25, 28000


def _markdown_words(cell) -> int:
    """Words as a reader counts them: HTML tags dropped, code spans and maths included."""
    return len(re.sub(r"<[^>]+>", " ", "".join(cell["source"])).split())


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.name)
def test_notebook_stays_within_the_size_bounds(path):
    cells = json.loads(path.read_text())["cells"]
    words = sum(_markdown_words(c) for c in cells if c["cell_type"] == "markdown")
    assert len(cells) <= MAX_CELLS, f"{path.name} has {len(cells)} cells (at most {MAX_CELLS})"
    assert words <= MAX_WORDS, f"{path.name} has {words} markdown words (at most {MAX_WORDS})"
    for index, cell in enumerate(cells):
        if cell["cell_type"] == "code":
            lines = [line for line in "".join(cell["source"]).splitlines() if line.strip()]
            assert len(lines) <= MAX_CODE_LINES, (
                f"{path.name} cell {index} has {len(lines)} code lines (at most {MAX_CODE_LINES}): "
                "move helpers into gradlab or notebooks/exercises")


def test_the_whole_workbook_stays_within_its_word_budget():
    total = sum(_markdown_words(c) for p in NOTEBOOKS for c in json.loads(p.read_text())["cells"]
                if c["cell_type"] == "markdown")
    assert total <= MAX_TOTAL_WORDS, f"the workbook has {total} markdown words (at most {MAX_TOTAL_WORDS})"


def test_the_learner_writes_a_custom_gradient_first():
    """The modern mechanism comes first: notebook 00 defines a tf.custom_gradient before any gradlab op."""
    cells = json.loads((ROOT / "notebooks" / "00_start_here.ipynb").read_text())["cells"]
    code = ["".join(c["source"]) for c in cells if c["cell_type"] == "code"]
    first_custom = next(i for i, s in enumerate(code) if "@tf.custom_gradient" in s)
    first_op = next(i for i, s in enumerate(code) if re.search(r"gradlab\.(scale|clip|map)_gradient\(", s))
    assert first_custom < first_op


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.name)
def test_exercise_checks_live_in_modules(path):
    """A notebook shows the call to its self-check, not the checker; no answer sits in plain view."""
    cells = json.loads(path.read_text())["cells"]
    for index, cell in enumerate(cells):
        source = "".join(cell["source"])
        if cell["cell_type"] == "code":
            assert not re.search(r"^def check_exercise", source, re.M), (
                f"{path.name} cell {index} defines a checker inline: move it to notebooks/exercises/")
        else:
            assert not re.search(r"<details><summary>Solution", source), (
                f"{path.name} cell {index} shows a solution in markdown: store it in a hidden solution cell")
    uses = [m for c in cells if c["cell_type"] == "code"
            for m in re.findall(r"from exercises\.(\w+) import", "".join(c["source"]))]
    assert uses, f"{path.name} imports no self-checks from notebooks/exercises/"
    for module in set(uses):
        assert (ROOT / "notebooks" / "exercises" / f"{module}.py").exists()
        assert (ROOT / "tests" / "workbook" / f"test_exercises_{module}.py").exists(), f"exercises/{module}.py has no tests"


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.name)
def test_legacy_tf1_code_lives_in_the_appendix(path):
    """TF1 graph-mode APIs run in the legacy appendix, or in a cell labelled LEGACY."""
    if path.name.startswith("10_"):
        title = "".join(json.loads(path.read_text())["cells"][0]["source"])
        assert "legacy" in title.lower() and "appendix" in title.lower()
        return
    for index, cell in enumerate(json.loads(path.read_text())["cells"]):
        source = "".join(cell["source"])
        for api in ("tf.compat.v1", "gradient_override_map", "tf.RegisterGradient"):
            if cell["cell_type"] == "code" and api in source:
                # Elsewhere a legacy call is a labelled one-cell comparison, never a recipe to copy.
                assert "legacy" in source.lower(), f"{path.name} cell {index} runs {api} without a LEGACY label"


def _python(source: str) -> str:
    """A code cell's source as plain Python: IPython's `!shell` and `%magic` lines become `pass`."""
    return "\n".join(re.sub(r"^(\s*)[!%].*$", r"\1pass", line) for line in source.splitlines())


def _bound_names(tree) -> set:
    """The names a cell binds at its top level (defs, classes, assignments, imports, loop targets)."""
    names = set()
    for node in tree.body:
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            names.add(node.name)
        elif isinstance(node, (ast.Import, ast.ImportFrom)):
            names.update((a.asname or a.name).split(".")[0] for a in node.names)
        else:
            for sub in ast.walk(node):
                if isinstance(sub, ast.Name) and isinstance(sub.ctx, ast.Store):
                    names.add(sub.id)
                if isinstance(sub, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef, ast.Lambda)):
                    break
    return names


def _check_calls(tree) -> list:
    """(checker, names passed to it) for every top-level call of a `check_...` function."""
    calls = []
    for node in ast.walk(tree):
        if not isinstance(node, ast.Call):
            continue
        func, confirms = node.func, False
        if isinstance(func, ast.Attribute) and func.attr == "confirm":
            func, confirms = func.value, True
        if isinstance(func, ast.Name) and func.id.startswith("check"):
            args = [a for a in list(node.args) + [k.value for k in node.keywords]]
            calls.append((func.id, {n.id for a in args for n in ast.walk(a) if isinstance(n, ast.Name)}, confirms))
    return calls


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.name)
def test_solutions_check_under_their_own_names_and_keep_the_learners_work(path):
    """After Run All, the learner's attempt is still in force and its self-check reported on it.

    A solution cell binds only names no other cell binds (the convention: the learner's name plus
    ``_solution``), and checks them with the same self-check that the exercise cell calls on the
    learner's own definition.
    """
    cells = json.loads(path.read_text())["cells"]
    code = [(i, c) for i, c in enumerate(cells) if c["cell_type"] == "code"]
    trees = {i: ast.parse(_python("".join(c["source"]))) for i, c in code}
    is_solution = {i: "solution" in c["metadata"].get("tags", []) for i, c in code}
    learner_names = set().union(*(_bound_names(trees[i]) for i, _ in code if not is_solution[i]))
    for i, _ in code:
        if not is_solution[i]:
            continue
        clash = _bound_names(trees[i]) & learner_names
        assert not clash, (f"{path.name}: the solution in cell {i} redefines {sorted(clash)}, which the "
                           "learner's cells define: name it <name>_solution so that Run All keeps the learner's work")
        exercise = max(j for j, _ in code if j < i and not is_solution[j])
        checked = {name for name, _, _ in _check_calls(trees[exercise])}
        solution_checks = _check_calls(trees[i])
        assert solution_checks, f"{path.name}: the solution in cell {i} runs no self-check"
        for name, _, confirms in solution_checks:
            assert name in checked, (f"{path.name}: the solution in cell {i} calls {name}, but the exercise cell "
                                     f"{exercise} before it does not call it on the learner's definition")
            assert confirms, (f"{path.name}: the solution in cell {i} calls {name}(...), whose verdict states the "
                              f"answer: call {name}.confirm(...), which says only that the solution passes")
        solution_names = {n for s in is_solution if is_solution[s] for n in _bound_names(trees[s])}
        for name, args, confirms in _check_calls(trees[exercise]):
            assert not confirms, f"{path.name}: cell {exercise} confirms {name} on the learner's answer; call {name}(...)"
            assert not args & solution_names, (
                f"{path.name}: the self-check {name} in cell {exercise} is called on a solution's name")


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
