"""A real browser moves an explorer's slider in JupyterLab and sees the plot redrawn in place, finds a
solution's code hidden, opens and saves every notebook without changing a byte of a learner's clone,
and runs all of two notebooks (Restart and Run All) and saves them, the clone still clean.

Runs Debian's chromium (``apt-get install chromium``; the binary is ``/usr/bin/chromium``) through
pip's playwright against a JupyterLab started here on 127.0.0.1 with a token. Under CI (the ``CI``
environment variable is set) a missing browser or playwright is a failure, not a skip.

The harness (:class:`JupyterLab`, :func:`launch_chromium`, :func:`chromium`, :func:`open_and_run_all`,
:class:`ExplorerView`) is also used by ``benchmarks/explorer_latency.py``.
"""
from __future__ import annotations

import contextlib
import io
import json
import os
import secrets
import shutil
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
from pathlib import Path
from typing import Optional

import numpy as np
import pytest

ROOT = Path(__file__).resolve().parents[2]

#: The notebook to open: the workbook's first notebook, whose first explorer (scale_gradient's
#: factor slider) is driven. Its folder is copied to a temporary directory, so the stored notebook
#: is never modified. None: a small generated notebook (setup cell + one explorer cell) instead.
NOTEBOOK: Optional[Path] = ROOT / "notebooks" / "00_start_here.ipynb"

CHROMIUM = os.environ.get("GRADLAB_CHROMIUM", "/usr/bin/chromium")
CHROMIUM_ARGS = ["--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
                 "--disable-background-networking", "--disable-component-update", "--disable-sync"]
EXPLORER = ".gradlab-explorer"  # gradlab.widgets.CSS_CLASS

SETUP_CELL = """\
import os
os.environ["TF_CPP_MIN_LOG_LEVEL"] = "2"
os.environ["TF_ENABLE_ONEDNN_OPTS"] = "0"
import gradlab, gradlab.widgets"""
EXPLORER_CELL = """\
explorer = gradlab.widgets.scale_explorer(factor=0.5)
explorer"""


def write_test_notebook(path: Path, cells=(SETUP_CELL, EXPLORER_CELL)) -> Path:
    """Writes a notebook of code cells (the Python 3 kernel) to ``path``."""
    import nbformat

    notebook = nbformat.v4.new_notebook()
    notebook.metadata["kernelspec"] = {"name": "python3", "display_name": "Python 3", "language": "python"}
    notebook.cells = [nbformat.v4.new_code_cell(source) for source in cells]
    nbformat.write(notebook, path)
    return path


def require_browser() -> None:
    """Skips (locally) or fails (under CI) when chromium or playwright is missing."""
    problems = []
    if not (Path(CHROMIUM).is_file() and os.access(CHROMIUM, os.X_OK)):
        problems.append(f"no chromium at {CHROMIUM} (Debian/Ubuntu: apt-get install -y chromium)")
    try:
        import playwright.sync_api  # noqa: F401
    except ImportError:
        problems.append("playwright is not installed (pip install -r requirements.txt)")
    if problems:
        message = "the browser test cannot run: " + "; ".join(problems)
        if os.environ.get("CI"):
            pytest.fail(message + ". CI must run it: install the missing piece.", pytrace=False)
        pytest.skip(message)


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


class JupyterLab:
    """A JupyterLab server on 127.0.0.1 with a random token, serving ``root``; stop() ends it.

    Its kernels run this Python (the venv's: ``import gradlab`` and, from ``notebooks/``, ``import
    workbook`` work) with the environment of this process, less the variables named in ``unset``."""

    def __init__(self, root: Path, workdir: Path, unset: tuple[str, ...] = ()):
        self.root, self.port, self.token = root, free_port(), secrets.token_hex(16)
        self.base = f"http://127.0.0.1:{self.port}"
        workdir.mkdir(parents=True, exist_ok=True)
        env = {
            **{name: value for name, value in os.environ.items() if name not in unset},
            "TF_CPP_MIN_LOG_LEVEL": "2",
            "TF_ENABLE_ONEDNN_OPTS": "0",
            "JUPYTER_CONFIG_DIR": str(workdir / "config"),  # no user or machine settings
            "JUPYTER_CONFIG_PATH": str(ROOT / "jupyter"),  # the workbook's server settings, as make lab has them
            "JUPYTER_RUNTIME_DIR": str(workdir / "runtime"),
        }
        args = [
            sys.executable, "-m", "jupyterlab", "--no-browser",
            "--ServerApp.ip=127.0.0.1", f"--ServerApp.port={self.port}", "--ServerApp.port_retries=0",
            f"--IdentityProvider.token={self.token}", f"--ServerApp.root_dir={root}",
            f"--LabApp.workspaces_dir={workdir / 'workspaces'}",
        ]
        if os.geteuid() == 0:
            args.append("--allow-root")
        self.log_path = workdir / "jupyterlab.log"
        self._log = open(self.log_path, "w")
        self.process = subprocess.Popen(args, cwd=root, env=env, stdout=self._log, stderr=subprocess.STDOUT)
        try:
            self._wait_until_ready(timeout=90)
        except BaseException:
            self.stop()
            raise

    def api(self, path: str, method: str = "GET"):
        request = urllib.request.Request(f"{self.base}{path}", method=method,
                                         headers={"Authorization": f"token {self.token}"})
        with urllib.request.urlopen(request, timeout=30) as reply:
            body = reply.read()
        return json.loads(body) if body else None

    def _wait_until_ready(self, timeout: float) -> None:
        deadline = time.monotonic() + timeout
        while True:
            if self.process.poll() is not None:
                raise RuntimeError(f"JupyterLab exited with {self.process.returncode}:\n{self.log()}")
            try:
                self.api("/api/status")
                return
            except (urllib.error.URLError, ConnectionError):
                if time.monotonic() > deadline:
                    raise RuntimeError(f"JupyterLab did not start in {timeout} s:\n{self.log()}") from None
                time.sleep(0.25)

    def url(self, notebook: str) -> str:
        return f"{self.base}/lab/tree/{notebook}?token={self.token}"

    def log(self) -> str:
        self._log.flush()
        return self.log_path.read_text()[-4000:]

    def stop(self) -> None:
        """Shuts the kernels down, then ends the server by its own PID: terminate, wait, kill."""
        if self.process.poll() is None:
            try:
                for kernel in self.api("/api/kernels") or []:
                    self.api(f"/api/kernels/{kernel['id']}", method="DELETE")
            except (urllib.error.URLError, ConnectionError, OSError):
                pass  # the server terminates its kernels on SIGTERM as well
            self.process.terminate()
            try:
                self.process.wait(timeout=20)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait(timeout=20)
        self._log.close()


def launch_chromium(playwright):
    return playwright.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)


@contextlib.contextmanager
def chromium():
    """Debian's Chromium under Playwright for one test, closed however the test ends."""
    from playwright.sync_api import sync_playwright

    with sync_playwright() as playwright:
        browser = launch_chromium(playwright)
        try:
            yield browser
        finally:
            browser.close()


def page_errors(page) -> list[str]:
    """The list that collects the page's uncaught JavaScript errors from now on."""
    errors = []
    page.on("pageerror", lambda error: errors.append(str(error)))
    return errors


def run_command(page, menu: str, command: str) -> None:
    """Runs a JupyterLab command from the menu bar, as a user would (once it is enabled)."""
    page.locator(".lm-MenuBar-item", has_text=menu).first.click()
    page.locator(f"li.lm-Menu-item[data-command='{command}']:not(.lm-mod-disabled)").click()


def open_and_run_all(page, lab: JupyterLab, notebook: str, timeout_ms: int = 90_000) -> None:
    """Opens the notebook, waits for an idle kernel, runs all cells and waits until they are done."""
    page.goto(lab.url(notebook))
    page.wait_for_selector(".jp-NotebookPanel .jp-Cell", timeout=timeout_ms)
    idle = ".jp-NotebookPanel .jp-Notebook-ExecutionIndicator[data-status='idle']"
    page.wait_for_selector(idle, timeout=timeout_ms)
    page.locator(".jp-NotebookPanel .jp-Cell .jp-InputPrompt").first.click()  # make it the current notebook
    # Clear the stored outputs and execution counts first, so that "done" below means this run.
    run_command(page, "Edit", "editmenu:clear-all")
    run_command(page, "Run", "runmenu:run-all")
    # Every code cell gets an execution count once it has run ("[*]" while queued or running); the
    # prompt of a collapsed cell's placeholder (`.jp-InputPrompt` too) never does, so it is left out.
    page.wait_for_function(
        """() => {
            const prompts = [...document.querySelectorAll('.jp-NotebookPanel .jp-CodeCell .jp-InputArea-prompt')];
            return prompts.length > 0 && prompts.every(p => /\\[\\d+\\]/.test(p.textContent));
        }""",
        timeout=timeout_ms,
    )
    page.wait_for_selector(f"{EXPLORER} img", state="visible", timeout=timeout_ms)
    page.wait_for_selector(idle, timeout=timeout_ms)


class ExplorerView:
    """The first explorer with a slider on the page: its slider handle, plot image and readout."""

    def __init__(self, page):
        self.page = page
        self.root = page.locator(EXPLORER, has=page.locator(".noUi-handle")).first  # has a slider
        self.image = self.root.locator("img").first
        self.handle = self.root.locator(".noUi-handle").first
        self.readout = self.root.locator(".widget-readout").first

    def src(self) -> str:
        return self.image.get_attribute("src")

    def pixels(self) -> np.ndarray:
        from PIL import Image

        return np.asarray(Image.open(io.BytesIO(self.image.screenshot())).convert("RGB")).astype(int)

    def step(self, key: str = "ArrowRight", timeout_ms: int = 30_000) -> None:
        """Presses a key on the focused slider and waits until the image shows a new, loaded PNG."""
        before = self.src()
        self.page.keyboard.press(key)
        self.page.wait_for_function(
            "([img, before]) => img.src !== before && img.complete && img.naturalWidth > 0",
            arg=[self.image.element_handle(), before], timeout=timeout_ms,
        )


# --- the test ---------------------------------------------------------------------------------------

@pytest.fixture(scope="module")
def lab(tmp_path_factory):
    root = tmp_path_factory.mktemp("lab-root")
    if NOTEBOOK is None:
        notebook = write_test_notebook(root / "explorer.ipynb").name
    else:
        shutil.copytree(NOTEBOOK.parent, root, dirs_exist_ok=True,
                        ignore=shutil.ignore_patterns(".ipynb_checkpoints"))
        notebook = NOTEBOOK.name
    server = JupyterLab(root, tmp_path_factory.mktemp("lab-state"))
    yield server, notebook
    server.stop()


@pytest.mark.browser
def test_keyboard_slider_step_redraws_the_plot_in_place(request):
    require_browser()  # first, so that a missing browser under CI is this test's failure

    server, notebook = request.getfixturevalue("lab")
    with chromium() as browser:
        page = browser.new_page(viewport={"width": 1400, "height": 1000})
        errors = page_errors(page)
        open_and_run_all(page, server, notebook)
        view = ExplorerView(page)
        # The explorer's cell shows one output (no second figure) and no error or warning.
        cell = page.locator(".jp-CodeCell", has=view.root).first
        assert cell.locator(".jp-OutputArea-output").count() == 1
        stderr = cell.locator("[data-mime-type='application/vnd.jupyter.stderr']")
        assert stderr.count() == 0, stderr.first.inner_text()
        assert view.root.locator("img").count() == 1

        view.handle.focus()
        readout, before = view.readout.inner_text(), view.pixels()
        view.step("ArrowRight")
        after = view.pixels()
        assert view.readout.inner_text() != readout, "the slider did not move"
        assert before.shape == after.shape and before.shape[1] >= 600
        changed = np.any(before != after, axis=2)
        half = changed.shape[1] // 2
        assert changed[:, half:].sum() > 200, "the gradient panel did not change"
        assert not changed[:, :half].any(), "the forward panel changed, but the forward pass did not"

        for key in ("ArrowRight", "ArrowLeft", "ArrowLeft"):  # +1 +1 -1 -1: back where it began
            view.step(key)
        assert view.readout.inner_text() == readout
        np.testing.assert_array_equal(view.pixels(), before)
        # Still one output and one image: updates happen in place.
        assert cell.locator(".jp-OutputArea-output").count() == 1
        assert view.root.locator("img").count() == 1
        assert errors == []
        # No pop-up asked the learner about Jupyter news (jupyter/overrides.json, installed by
        # make and by Binder's postBuild); by now JupyterLab would have shown it.
        assert page.get_by_text("official Jupyter news").count() == 0

        # After Run All, JupyterLab shows what each solution printed: never its exercise's answer.
        for index in solution_indices(Path(server.root) / notebook):
            solution = walk_to_cell(page, index)
            shown = solution.inner_text()
            assert "Correct" not in shown and "dL/dx =" not in shown, f"cell {index} shows its answer: {shown}"
            output = solution.locator(".jp-OutputArea")
            if output.is_visible():
                assert "This solution passes check_exercise_" in output.inner_text()


def walk_to_cell(page, index: int):
    """Scrolls to cell ``index`` as a learner does and returns its locator.

    JupyterLab renders only the cells near the viewport: walk down with the arrow key to the cell
    above it (command mode skips cells whose input is hidden), then bring it into view.
    """
    page.locator(".jp-NotebookPanel .jp-Cell .jp-InputPrompt").first.click()
    page.keyboard.press("Escape")
    active = """() => Number(document.querySelector('.jp-NotebookPanel .jp-Cell.jp-mod-active')
                                ?.getAttribute('data-windowed-list-index'))"""
    while (position := page.evaluate(active)) < index - 1:
        page.keyboard.press("ArrowDown")
        page.wait_for_function(f"() => ({active})() !== {position}", timeout=10_000)
    cell = page.locator(f".jp-NotebookPanel .jp-Cell[data-windowed-list-index='{index}']")
    cell.scroll_into_view_if_needed(timeout=30_000)
    return cell


def solution_indices(path: Path) -> list[int]:
    """Indices (among all cells) of the code cells tagged ``solution``."""
    cells = json.loads(path.read_text())["cells"]
    return [i for i, c in enumerate(cells) if c["cell_type"] == "code" and "solution" in c["metadata"].get("tags", [])]


def first_solution(path: Path) -> tuple[int, str]:
    """Index (among all cells) and source of the first code cell tagged ``solution``."""
    cells = json.loads(path.read_text())["cells"]
    for index, cell in enumerate(cells):
        if cell["cell_type"] == "code" and "solution" in cell.get("metadata", {}).get("tags", []):
            return index, "".join(cell["source"])
    raise AssertionError(f"{path.name} has no solution cell")


@pytest.mark.browser
def test_a_solutions_code_stays_hidden_until_the_learner_expands_it(request):
    """Opened in JupyterLab, an exercise's solution shows its title, not its code, and its output is
    collapsed too (tools/nbfmt.py; the server settings keep it so after Run All): JupyterLab shows
    the title alone. One click on it reveals the code, one more on the output's placeholder the
    output. That says only that the solution passes its check, which strict nbval re-computes, so the
    hidden cell is still run by CI."""
    require_browser()

    server, notebook = request.getfixturevalue("lab")
    index, source = first_solution(Path(server.root) / notebook)
    # The longest line of the answer's code (JupyterLab shows a collapsed cell's first line, which
    # is its title: '# @title Solution to exercise 1', tools/nbfmt.py).
    code = [line.strip() for line in source.splitlines() if line.strip() and not line.lstrip().startswith("#")]
    answer = max(code, key=len)
    with chromium() as browser:
        page = browser.new_page(viewport={"width": 1400, "height": 1000})
        page.goto(server.url(notebook))
        page.wait_for_selector(".jp-NotebookPanel .jp-Cell", timeout=90_000)
        cell = walk_to_cell(page, index)
        input_placeholder = cell.locator(".jp-InputPlaceholder")
        input_placeholder.wait_for(state="visible", timeout=30_000)
        assert input_placeholder.inner_text().strip().startswith("# @title Solution to exercise 1")
        assert not cell.locator(".jp-InputArea-editor").is_visible()
        # Code and output both collapsed: JupyterLab shows the title and nothing under it.
        assert not cell.locator(".jp-Cell-outputWrapper").is_visible(), "the solution's output is stored collapsed"
        assert answer not in cell.inner_text(), "the answer is on screen"
        assert not page.get_by_text(answer, exact=False).first.is_visible(), "the answer is on screen"

        input_placeholder.click()  # the learner asks for the solution: its code appears
        editor = cell.locator(".jp-InputArea-editor")
        editor.wait_for(state="visible", timeout=30_000)
        assert answer in editor.inner_text()

        output_placeholder = cell.locator(".jp-OutputPlaceholder")  # and its output, one click more
        output_placeholder.wait_for(state="visible", timeout=30_000)
        output_placeholder.click()
        output = cell.locator(".jp-OutputArea")
        output.wait_for(state="visible", timeout=30_000)
        assert output.inner_text().strip() == "This solution passes check_exercise_1.", (
            "the stored solution output must say only that the solution passes")


# --- a learner's clone stays clean (issue 32.4) -----------------------------------------------------

#: The notebook's kernel has started and is idle (the indicator says idle before a kernel exists too).
KERNEL_READY = """() => {
    const panel = document.querySelector('.jp-NotebookPanel:not(.lm-mod-hidden)');
    const name = panel?.querySelector('.jp-Toolbar-kernelName')?.textContent;
    const status = panel?.querySelector('.jp-Notebook-ExecutionIndicator')?.dataset.status;
    return !!name && name !== 'No Kernel' && status === 'idle';
}"""
DIRTY_TAB = ".lm-TabBar-tab.jp-mod-current.jp-mod-dirty"


def open_save_close(page, lab: JupyterLab, notebook: str, timeout_ms: int = 90_000) -> bool:
    """Opens the notebook as a learner does (its kernel starts; nothing runs), saves it with Ctrl+S,
    closes its tab and shuts its kernel down. Returns whether JupyterLab marked it modified on opening
    (then its autosave would write it two minutes later)."""
    saved = lab.api(f"/api/contents/{notebook}?content=0")["last_modified"]
    page.goto(lab.url(notebook) + "&reset")  # a fresh workspace: only this notebook opens
    page.wait_for_selector(".jp-NotebookPanel .jp-Cell", timeout=timeout_ms)
    page.wait_for_function(KERNEL_READY, timeout=timeout_ms)
    # The kernel's spec and language_info reach the notebook's metadata just after the kernel is idle.
    page.wait_for_timeout(1000)
    dirty = page.locator(DIRTY_TAB).count() > 0
    save_and_close(page, lab, notebook, saved, timeout_ms)
    return dirty


def save_and_close(page, lab: JupyterLab, notebook: str, saved: str, timeout_ms: int = 90_000) -> None:
    """Saves the open notebook with Ctrl+S and waits until the server has written it (its
    ``last_modified`` was ``saved``), then closes its tab and shuts its kernel down."""
    page.locator(".jp-NotebookPanel .jp-Cell .jp-InputPrompt").first.click()
    page.keyboard.press("Escape")
    page.keyboard.press("Control+s")
    deadline = time.monotonic() + timeout_ms / 1000
    while lab.api(f"/api/contents/{notebook}?content=0")["last_modified"] == saved:  # the server wrote it
        assert time.monotonic() < deadline, f"{notebook} was not saved"
        time.sleep(0.1)
    page.wait_for_selector(DIRTY_TAB, state="detached", timeout=timeout_ms)
    run_command(page, "File", "application:close")  # a modified notebook would ask first, and time out here
    page.wait_for_selector(".jp-NotebookPanel", state="detached", timeout=timeout_ms)
    for session in lab.api("/api/sessions") or []:
        lab.api(f"/api/sessions/{session['id']}", method="DELETE")


def store_as_this_machine_would(path: Path) -> None:
    """Formats a copied notebook (tools/nbfmt.py) with the language_info of this machine's kernel, as
    `make execute` here would store it: JupyterLab rewrites language_info (the Python version) from
    the kernel, so only a Python of the stored version keeps a clone clean."""
    import nbformat

    sys.path.insert(0, str(ROOT / "tools"))
    import nbfmt

    notebook = nbformat.reads(path.read_text(encoding="utf-8"), as_version=4)
    notebook.metadata.setdefault("language_info", {})["version"] = sys.version.split()[0]
    nbfmt.format_notebook(notebook)
    path.write_text(nbfmt.serialise(notebook), encoding="utf-8")


def ignored_by_git(relative: Path) -> bool:
    """Whether the repository's .gitignore ignores notebooks/<relative> (the file need not exist)."""
    check = subprocess.run(["git", "check-ignore", "-q", "--no-index", f"notebooks/{relative.as_posix()}"], cwd=ROOT)
    return check.returncode == 0


@pytest.mark.browser
def test_opening_and_saving_every_notebook_leaves_a_learners_clone_clean(request):
    """A learner opens each notebook in JupyterLab and saves it without editing: every file stays
    byte for byte what tools/nbfmt.py stored, and JupyterLab marks none modified (its autosave would
    write it). Only files that .gitignore ignores (.ipynb_checkpoints/) appear. A control notebook
    stored without nbfmt's JupyterLab conventions (kernel display name, `scrolled: false`) must change,
    and into exactly what nbfmt writes: the check sees a real save, and nbfmt stores what JupyterLab does."""
    require_browser()

    server, _ = request.getfixturevalue("lab")
    clone = Path(server.root) / "clean-clone"
    shutil.copytree(ROOT / "notebooks", clone, ignore=shutil.ignore_patterns(".ipynb_checkpoints", "__pycache__"))
    notebooks = sorted(p.relative_to(clone).as_posix() for p in [*clone.glob("*.ipynb"), *clone.glob("zh/*.ipynb")])
    for name in notebooks:
        store_as_this_machine_would(clone / name)
    control = clone / "zz_control_unformatted.ipynb"
    data = json.loads((clone / notebooks[0]).read_text(encoding="utf-8"))
    data["metadata"]["kernelspec"]["display_name"] = "Python 3"
    for cell in data["cells"]:
        if cell["cell_type"] == "code":
            cell["metadata"]["scrolled"] = False
    control.write_text(json.dumps(data, indent=1, sort_keys=True, ensure_ascii=False) + "\n", encoding="utf-8")
    expected_control = (clone / notebooks[0]).read_bytes()
    before = {p.relative_to(clone): p.read_bytes() for p in clone.rglob("*") if p.is_file()}

    with chromium() as browser:
        page = browser.new_page(viewport={"width": 1400, "height": 1000})
        dirty = [name for name in [*notebooks, control.name]
                 if open_save_close(page, server, f"clean-clone/{name}")]

    after = {p.relative_to(clone): p.read_bytes() for p in clone.rglob("*") if p.is_file()}
    changed = sorted(str(p) for p in before if after.get(p) != before[p])
    assert control.read_bytes() == expected_control, "JupyterLab saved the control differently from nbfmt"
    assert dirty == [control.name], f"JupyterLab marks these modified on opening: {dirty}"
    assert changed == [control.name], f"opening and saving changed {changed}: run python tools/nbfmt.py on them"
    new = sorted(p for p in after if p not in before)
    assert new, "JupyterLab wrote no checkpoints: were the notebooks saved?"
    assert all(ignored_by_git(p) for p in new), [str(p) for p in new if not ignored_by_git(p)]


@pytest.mark.browser
def test_a_learner_on_another_python_version_also_keeps_a_clean_clone(request):
    """JupyterLab rewrites language_info from the running kernel, so a learner whose Python differs
    from the one that stored the outputs would see every notebook they opened change. The server
    settings make lab and Binder load (jupyter/jupyter_server_config.py) keep the stored one on save."""
    require_browser()

    server, notebook = request.getfixturevalue("lab")
    copy = Path(server.root) / "other-python.ipynb"
    data = json.loads((Path(server.root) / notebook).read_text(encoding="utf-8"))
    data["metadata"]["language_info"]["version"] = "3.10.0"    # not this kernel's Python
    copy.write_text(json.dumps(data, indent=1, sort_keys=True, ensure_ascii=False) + "\n", encoding="utf-8")
    before = copy.read_bytes()
    with chromium() as browser:
        page = browser.new_page(viewport={"width": 1400, "height": 1000})
        assert open_save_close(page, server, copy.name), "JupyterLab did not see another Python version"
    assert copy.read_bytes() == before, "saving the notebook changed it"



# --- ... and stays clean after Restart and Run All (issue 38) -----------------------------------------

#: Notebooks a learner restarts and runs in full, then saves: 01 (stream outputs), 08 (stream
#: outputs and a matplotlib PNG) and 00 (two explorers: a widget output names a model id that differs
#: on every run, which the server settings' pre-save hook puts back when its PNG fallback is unchanged).
#: And 00's Chinese edition, whose kernel starts in notebooks/zh/ (notebooks/zh/workbook.py finds the workbook).
RUN_ALL_NOTEBOOKS = ("01_custom_gradient.ipynb", "08_higher_order_forward_mode.ipynb", "00_start_here.ipynb",
                     "zh/00_start_here.ipynb")
#: Variables that change what a notebook computes (tests/workbook: the nudge; the Colab branch):
#: the learner's server runs without them.
WORKBOOK_SWITCHES = ("GRADLAB_NUDGE", "GRADLAB_COLAB")

#: Every code cell shows an execution count ("[*]" while queued or running; the prompt of a
#: source-hidden cell's placeholder, `.jp-InputPrompt` too, never does, so it is left out).
PROMPTS = "[...document.querySelectorAll('.jp-NotebookPanel .jp-CodeCell .jp-InputArea-prompt')].map(p => p.textContent)"
EXECUTION_INDICATOR = ".jp-NotebookPanel .jp-Notebook-ExecutionIndicator"


def learners_clone(destination: Path) -> Path:
    """A git repository holding this checkout's files as a learner's clone has them (tracked and
    untracked files, not ignored ones: what is being changed is what gets tested), committed once."""
    listed = subprocess.run(["git", "ls-files", "-z", "--cached", "--others", "--exclude-standard"],
                            cwd=ROOT, capture_output=True, check=True).stdout
    for name in filter(None, listed.split(b"\0")):
        source = ROOT / os.fsdecode(name)
        if source.is_file():  # a tracked file deleted in the checkout is not copied
            (destination / os.fsdecode(name)).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(source, destination / os.fsdecode(name))
    git = ["git", "-c", "user.name=gradlab", "-c", "user.email=dev@gradlab.invalid", "-c", "commit.gpgsign=false"]
    for command in (["init", "-q"], ["add", "-A"], ["commit", "-q", "-m", "a learner's clone"]):
        subprocess.run([*git, *command], cwd=destination, check=True, capture_output=True)
    return destination


@pytest.fixture(scope="module")
def clone_lab(tmp_path_factory):
    """A learner's clone of the repository and `make lab` on it: JupyterLab serving its notebooks/."""
    clone = learners_clone(tmp_path_factory.mktemp("learners-clone"))
    server = JupyterLab(clone / "notebooks", tmp_path_factory.mktemp("clone-lab-state"), unset=WORKBOOK_SWITCHES)
    yield server, clone
    server.stop()


def restart_and_run_all(page, lab: JupyterLab, notebook: str, timeout_ms: int = 300_000) -> None:
    """Opens the notebook, then Kernel > Restart Kernel and Run All Cells (confirmed), and waits until
    every code cell has run and the notebook is idle."""
    page.goto(lab.url(notebook) + "&reset")  # a fresh workspace: only this notebook opens
    page.wait_for_selector(".jp-NotebookPanel .jp-Cell", timeout=90_000)
    page.wait_for_function(KERNEL_READY, timeout=90_000)
    page.locator(".jp-NotebookPanel .jp-Cell .jp-InputPrompt").first.click()  # make it the current notebook
    page.keyboard.press("Escape")
    run_command(page, "Kernel", "runmenu:restart-and-run-all")
    page.locator(".jp-Dialog .jp-mod-accept").click()  # "Confirm Kernel Restart"
    # The stored counts are 1..n, as the run's will be: first see the run start ("[*]"), then end.
    page.wait_for_function(f"() => {PROMPTS}.some(p => p.includes('*'))", timeout=90_000)
    page.wait_for_function(f"() => {{ const p = {PROMPTS}; return p.length > 0 && p.every(t => /\\[\\d+\\]/.test(t)); }}",
                           timeout=timeout_ms)
    page.wait_for_selector(f"{EXECUTION_INDICATOR}[data-status='idle']", timeout=timeout_ms)


def changed_fields(before: dict, after: dict) -> list[str]:
    """What differs between two notebooks' JSON, field by field: notebook metadata, then each cell's
    metadata, source, execution count and outputs (an output's text shortened)."""
    def short(value) -> str:
        text = json.dumps(value, sort_keys=True, ensure_ascii=False)
        return text if len(text) <= 300 else text[:300] + f"... ({len(text)} characters)"

    lines = [f"metadata.{key}: {short(before['metadata'].get(key))} -> {short(after['metadata'].get(key))}"
             for key in sorted(set(before["metadata"]) | set(after["metadata"]))
             if before["metadata"].get(key) != after["metadata"].get(key)]
    if len(before["cells"]) != len(after["cells"]):
        return lines + [f"{len(before['cells'])} cells -> {len(after['cells'])}"]
    for index, (old, new) in enumerate(zip(before["cells"], after["cells"]), 1):
        for field in ("metadata", "source", "execution_count", "outputs", "id"):
            if old.get(field) != new.get(field):
                if field == "outputs" and len(old[field]) == len(new[field]):
                    lines += [f"cell {index} outputs[{k}]: {short(a)} -> {short(b)}"
                              for k, (a, b) in enumerate(zip(old[field], new[field])) if a != b]
                else:
                    lines.append(f"cell {index} {field}: {short(old.get(field))} -> {short(new.get(field))}")
    return lines


def git_status(repository: Path) -> str:
    return subprocess.run(["git", "status", "--porcelain"], cwd=repository, capture_output=True, text=True,
                          check=True).stdout


@pytest.mark.browser
@pytest.mark.parametrize("notebook", RUN_ALL_NOTEBOOKS)
def test_restart_run_all_and_save_leaves_a_learners_clone_clean(request, notebook):
    """A learner runs a notebook from the top (Kernel > Restart Kernel and Run All Cells) without
    editing it and saves it (Ctrl+S, or the autosave two minutes later): `git status` in their clone
    stays empty. The stored notebook is one clean run whose outputs a browser run reproduces byte for
    byte, and it stores what JupyterLab writes after running a cell: no hidden outputs (running a
    cell shows its output, dropping `collapsed` and `jupyter.outputs_hidden`) but a solution's, which
    the server settings collapse again on save, while a solution's and the Colab cell's code stays
    hidden (`jupyter.source_hidden`, form view)."""
    require_browser()

    server, clone = request.getfixturevalue("clone_lab")
    path = Path(server.root) / notebook
    before = json.loads(path.read_text(encoding="utf-8"))
    saved = server.api(f"/api/contents/{notebook}?content=0")["last_modified"]
    assert git_status(clone) == "", "the clone is not clean to begin with"
    try:
        with chromium() as browser:
            page = browser.new_page(viewport={"width": 1400, "height": 1000})
            errors = page_errors(page)
            restart_and_run_all(page, server, notebook)
            save_and_close(page, server, notebook, saved)
        status = git_status(clone)
        after = json.loads(path.read_text(encoding="utf-8"))
    finally:  # the next notebook starts from a clean clone
        subprocess.run(["git", "checkout", "-q", "--", "."], cwd=clone, check=True)
    changes = changed_fields(before, after)
    assert status == "", (f"Restart and Run All, then save, changed the learner's clone:\n{status}"
                          + "\n".join(changes or ["(no field differs: the serialisation does; run python tools/nbfmt.py)"]))
    assert [cell.get("execution_count") for cell in after["cells"] if cell["cell_type"] == "code"] == \
        list(range(1, 1 + sum(cell["cell_type"] == "code" for cell in after["cells"]))), "not one clean run"
    assert errors == []
