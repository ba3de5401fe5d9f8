"""The workbook's notebook linter: every rule its notebooks follow, one small function each.

Usage:
  python tools/nblint.py [notebooks/NN_name.ipynb ... | folder]   findings; exit 1 on any (default: notebooks/)
  python tools/nblint.py --stats [...]   size and shape per notebook against the workbook's limits
  python tools/nblint.py --list          the rules (their docstrings' first lines; DEVELOPERS.md lists them)

``make lint`` runs it (after ruff, before ``tools/nbfmt.py --check``). Each finding is one line:
``notebooks/NN_name.ipynb: cell N: what is wrong and what to do [rule]``, where N counts every cell
from 1 at the top. A rule is a function decorated with ``@rule``: it gets one notebook (or, for
``scope="workbook"``, all of them) and yields ``(cell index or None, message)``.
"""
from __future__ import annotations

import argparse
import ast
import inspect
import json
import os
import re
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Callable, Iterable, Iterator

sys.path.insert(0, str(Path(__file__).resolve().parent))  # nbfmt and project_home sit beside this file
import nbfmt  # noqa: E402
import project_home  # noqa: E402  (the repository's home, read from pyproject.toml's [project.urls])

ROOT = Path(__file__).resolve().parents[1]

#: The learner-first bounds (issue 11): short notebooks, short cells.
MAX_WORDS, MAX_CELLS, MAX_CODE_LINES, MAX_TOTAL_WORDS = 2000, 40, 25, 28000
MAX_BYTES = 3_000_000

#: Every notebook's first code cell, stored in form view (Colab shows its title; JupyterLab its first
#: line): on Colab (or when GRADLAB_COLAB=1 forces it) it clones the workbook, installs gradlab without
#: touching the TensorFlow there, and puts the workbook's helper modules on sys.path; elsewhere nothing.
#: It clones pyproject.toml's Homepage (tools/project_home.py), so a fork that changes that line is told
#: here which notebooks still clone the old home.
COLAB_CELL = f"""# @title Colab only: fetch the workbook and install gradlab into Colab's TensorFlow (elsewhere: nothing)
import os
import sys

if "google.colab" in sys.modules or os.environ.get("GRADLAB_COLAB") == "1":
    repo = os.environ.get("GRADLAB_REPO", "{project_home.HOMEPAGE}")
    if not os.path.isdir("gradlab-workbook"):
        !git clone -q {{repo}} gradlab-workbook
    %pip install -q "./gradlab-workbook[notebook]"
    sys.path.insert(0, os.path.abspath("gradlab-workbook/notebooks"))   # the workbook's helper modules"""
#: The Colab cell's default home (group 1), which GRADLAB_REPO overrides.
COLAB_REPO = re.compile(r'os\.environ\.get\("GRADLAB_REPO", "([^"]*)"\)')
#: The setup, one line, opens the second code cell (notebooks/workbook.py; notebook 00 explains it).
SETUP_LINE = "import workbook; workbook.setup()"
#: The translated editions (tools/i18n.py builds them): the folder under notebooks/, its setup line, and the
#: words the skeleton's rules look for in its prose. The English twin carries the word bounds (the rules
#: max-words and workbook-words count English words; Chinese writes none with spaces).
EDITIONS = {
    "zh": {
        "setup": 'import workbook; workbook.setup(language="zh_CN")',
        "parts": {"Learning objectives": "学习目标", "Run time": "运行时间", "Setup": "环境设置",
                  "Exercise": "练习", "Summary": "小结"},
        "solution": "参考答案",
        "passes": r"这个参考答案通过了 check_\w+。",
    },
}
ENGLISH = {"setup": SETUP_LINE, "parts": {}, "solution": "solution", "passes": r"This solution passes check_\w+\."}

NOISE = re.compile(r"(^[IWE]\d{4} \d\d:\d\d|oneDNN custom operations|absl::InitializeLog|cuda_|TF-TRT|"
                   r"This TensorFlow binary is optimized|rebuild TensorFlow|WARNING:tensorflow)", re.M)
PATHS = re.compile(r"(/root/|/home/\w+|/tmp/|/work/|site-packages|\.venv/)")
ADDRESS = re.compile(r"\bat 0x[0-9a-fA-F]{6,}")
WIDGET_VIEW = "application/vnd.jupyter.widget-view+json"
LEGACY_APIS = ("tf.compat.v1", "gradient_override_map", "tf.RegisterGradient")


# --- the notebook as the rules see it ------------------------------------------------------------

class Notebook:
    """One notebook file: its path, text and JSON, with the helpers the rules share."""

    def __init__(self, path: Path):
        self.path = Path(path)
        self.text = self.path.read_text(encoding="utf-8")
        self.json = json.loads(self.text)
        self.cells = self.json.get("cells", [])
        self.metadata = self.json.get("metadata", {})

    @property
    def name(self) -> str:
        return self.path.name

    @property
    def edition(self) -> str | None:
        """The translated edition's folder (``"zh"``) for ``notebooks/zh/NN_name.ipynb``; None for English."""
        return self.path.parent.name if self.path.parent.name in EDITIONS else None

    @property
    def words(self) -> dict:
        """What the rules look for in this notebook's language (``EDITIONS``, or English)."""
        return EDITIONS[self.edition] if self.edition else ENGLISH

    @property
    def repository_path(self) -> str:
        """``notebooks/NN_name.ipynb``, or ``notebooks/zh/NN_name.ipynb`` for an edition."""
        return f"notebooks/{self.edition + '/' if self.edition else ''}{self.name}"

    @property
    def display(self) -> str:
        """The path as a contributor would type it (relative to the working directory when inside it)."""
        try:
            return str(self.path.resolve().relative_to(Path.cwd().resolve()))
        except ValueError:
            return str(self.path)

    @staticmethod
    def source(cell: dict) -> str:
        return "".join(cell.get("source", ""))

    @staticmethod
    def tags(cell: dict) -> set:
        return set(cell.get("metadata", {}).get("tags", []))

    def code(self) -> list[tuple[int, dict]]:
        """(index, cell) of every code cell."""
        return [(i, c) for i, c in enumerate(self.cells) if c.get("cell_type") == "code"]

    def solutions(self) -> list[tuple[int, dict]]:
        """(index, cell) of every code cell tagged ``solution``."""
        return [(i, c) for i, c in self.code() if "solution" in self.tags(c)]

    def markdown(self) -> str:
        return "\n".join(self.source(c) for c in self.cells if c.get("cell_type") == "markdown")


def markdown_words(cell: dict) -> int:
    """Words as a reader counts them: HTML tags dropped, code spans and maths included."""
    return len(re.sub(r"<[^>]+>", " ", Notebook.source(cell)).split())


def code_lines(cell: dict) -> int:
    """A code cell's non-blank lines."""
    return sum(1 for line in Notebook.source(cell).splitlines() if line.strip())


def output_text(output: dict) -> str:
    if output.get("output_type") == "stream":
        return "".join(output.get("text", ""))
    if output.get("output_type") == "error":
        return "\n".join(output.get("traceback", []))
    return "".join(output.get("data", {}).get("text/plain", ""))


def outputs(nb: Notebook) -> Iterator[tuple[int, dict, dict]]:
    """(index, cell, output) for every stored output."""
    for index, cell in nb.code():
        for output in cell.get("outputs", []):
            yield index, cell, output


# --- the rule registry ---------------------------------------------------------------------------

@dataclass(frozen=True)
class Rule:
    name: str
    scope: str       # "notebook": check(nb) for each notebook; "workbook": check(notebooks) once
    check: Callable
    doc: str


@dataclass(frozen=True)
class Finding:
    path: str
    cell: int | None  # counted from 1 at the top; None: the notebook (or the workbook) as a whole
    rule: str
    message: str

    def __str__(self) -> str:
        where = f"{self.path}: cell {self.cell}" if self.cell is not None else self.path
        return f"{where}: {self.message} [{self.rule}]"


RULES: dict[str, Rule] = {}


def rule(name: str, scope: str = "notebook"):
    """Registers a rule under ``name``; its docstring's first line documents it (``--list``)."""
    def register(check):
        assert name not in RULES, f"two rules named {name}"
        RULES[name] = Rule(name, scope, check, inspect.getdoc(check).splitlines()[0])
        return check
    return register


# --- hygiene: what a learner notices first -----------------------------------------------------------

@rule("title-cell")
def title_cell(nb: Notebook):
    """The first cell is the markdown title, `# NN · Title`."""
    first = nb.cells[0] if nb.cells else {}
    number = re.match(r"(\d\d)_", nb.name)
    heading = f"# {number[1]} · " if number else "# "
    if first.get("cell_type") != "markdown" or not nb.source(first).startswith(heading):
        yield 0 if nb.cells else None, f"the first cell must be a markdown title starting with '{heading}'"


@rule("colab-badge")
def colab_badge(nb: Notebook):
    """The title cell carries the Open-in-Colab badge with the notebook's own URL."""
    badge = project_home.colab_badge(nb.repository_path)
    if not nb.cells or badge not in nb.source(nb.cells[0]):
        stale = project_home.REPOSITORY_LINK.search(nb.source(nb.cells[0])) if nb.cells else None
        why = (f" (it names {stale[1]}, not pyproject.toml's Homepage {project_home.HOMEPAGE})"
               if stale and stale[1] != project_home.GITHUB_PATH else "")
        yield 0 if nb.cells else None, f"the title cell has no Open-in-Colab badge for this notebook{why}: add {badge}"


@rule("kernelspec")
def kernelspec(nb: Notebook):
    """The notebook runs on the `python3` kernel."""
    name = nb.metadata.get("kernelspec", {}).get("name")
    if name != "python3":
        yield None, f"kernelspec is {name!r}: store it with the python3 kernel (Kernel > Change Kernel > Python 3)"


@rule("clean-run")
def clean_run(nb: Notebook):
    """Stored as one clean top-to-bottom run: execution counts 1, 2, ..., n."""
    counts = [c.get("execution_count") for _, c in nb.code()]
    if counts != list(range(1, len(counts) + 1)):
        first = next(i for (i, c), n in zip(nb.code(), range(1, len(counts) + 1)) if c.get("execution_count") != n)
        yield first, (f"execution counts {counts[:6]}{'...' if len(counts) > 6 else ''} are not 1..{len(counts)}: "
                      "re-run it top to bottom (make execute NB=...)")


@rule("undeclared-error")
def undeclared_error(nb: Notebook):
    """A stored error comes from a cell tagged `raises-exception`."""
    for index, cell, output in outputs(nb):
        if output.get("output_type") == "error" and "raises-exception" not in nb.tags(cell):
            yield index, (f"stores an error ({output.get('ename')}): fix it, or tag the cell raises-exception "
                          "if it fails on purpose")


# Text no stored output may show: (rule, its documentation, pattern, what a match is, what to do).
FORBIDDEN_OUTPUT = (
    ("log-noise", "No TensorFlow log noise in outputs.", NOISE, "TensorFlow log noise",
     "call workbook.setup() before TensorFlow loads"),
    ("machine-path", "No machine paths in outputs.", PATHS, "a machine path",
     "print names relative to a temporary directory, not paths"),
    ("memory-address", "No memory addresses in outputs.", ADDRESS, "a memory address",
     "print a name or a value instead of the object"),
)


def forbidden_output_rule(doc: str, pattern: re.Pattern, what: str, fix: str):
    """A rule that reports every stored output in which ``pattern`` occurs."""
    def check(nb: Notebook):
        for index, _, output in outputs(nb):
            if match := pattern.search(output_text(output)):
                yield index, f"shows {what} {match[0]!r}: {fix}"
    check.__doc__ = doc
    return check


for _name, _doc, _pattern, _what, _fix in FORBIDDEN_OUTPUT:
    rule(_name)(forbidden_output_rule(_doc, _pattern, _what, _fix))


@rule("file-size")
def file_size(nb: Notebook):
    """The file stays under 3 MB."""
    size = len(nb.text.encode("utf-8"))
    if size > MAX_BYTES:
        yield None, f"{size / 1e6:.1f} MB (at most {MAX_BYTES / 1e6:.0f} MB): smaller figures, fewer stored images"


# --- nbval: what CI compares ---------------------------------------------------------------------------

@rule("nbval-skip")
def nbval_skip(nb: Notebook):
    """No cell is skipped by nbval."""
    for index, cell in nb.code():
        if "nbval-skip" in nb.tags(cell) or "# NBVAL_SKIP" in nb.source(cell):
            yield index, "is skipped by nbval: every cell runs in CI (tag nbval-ignore-output if its output cannot be stable)"


@rule("trained-compared")
def trained_compared(nb: Notebook):
    """A cell tagged `trained` is also tagged `nbval-ignore-output`."""
    for index, cell in nb.code():
        if "trained" in nb.tags(cell) and "nbval-ignore-output" not in nb.tags(cell):
            yield index, "is tagged trained but nbval compares its output: tag it nbval-ignore-output too"


#: A printed negative zero: ``-0``, ``-0.`` or ``-0.0000`` as a whole number (not ``-0.0001``, not ``-0.5``).
NEGATIVE_ZERO = re.compile(r"(?<![\w.])-0(?:\.0*)?(?![\d.])")


@rule("signed-zero")
def signed_zero(nb: Notebook):
    """A compared output shows no negative zero, unless its cell is tagged `signed-zero` (shown on purpose)."""
    for index, cell, output in outputs(nb):
        tags = nb.tags(cell)
        if output.get("output_type") == "error" or tags & {"nbval-ignore-output", "signed-zero"}:
            continue
        if match := NEGATIVE_ZERO.search(output_text(output)):
            line = output_text(output)[:match.end()].splitlines()[-1].strip()
            yield index, (f"prints a negative zero ({line[-40:]!r}): which of -0.0 and +0.0 a sort or a reduction "
                          "keeps can depend on the CPU, and it puzzles a reader; print `value + 0.0` (which makes "
                          "-0.0 +0.0), or tag the cell signed-zero if the sign is the point and exact by IEEE rules")


@rule("ignore-output-reason")
def ignore_output_reason(nb: Notebook):
    """Only widgets, timings and `trained` cells escape output comparison."""
    for index, cell in nb.code():
        source, tags = nb.source(cell), nb.tags(cell)
        if "trained" not in tags and ("nbval-ignore-output" in tags or "# NBVAL_IGNORE_OUTPUT" in source):
            if not re.search(r"(?i)(widget|explorer|timing|time|benchmark)", source):
                yield index, ("ignores its output but is neither a widget, a timing nor a trained cell: "
                              "make its output stable and drop nbval-ignore-output")


# --- the skeleton ------------------------------------------------------------------------------------

@rule("skeleton-parts")
def skeleton_parts(nb: Notebook):
    """The markdown has the skeleton's parts: Learning objectives, Run time, Setup, Exercise, Summary."""
    markdown = nb.markdown()
    for part in ("Learning objectives", "Run time", "Setup", "Exercise", "Summary"):
        part = nb.words["parts"].get(part, part)
        if not re.search(part, markdown, re.I):
            yield None, f"has no '{part}' part: follow the skeleton in DEVELOPERS.md"


@rule("colab-cell")
def colab_cell(nb: Notebook):
    """The first code cell is the Colab set-up cell, tagged `colab`, the same in every notebook."""
    code = nb.code()
    if not code:
        yield None, "has no code cells: the first one must be the Colab set-up cell"
        return
    index, cell = code[0]
    title, _, body = COLAB_CELL.partition("\n")
    first, _, rest = nb.source(cell).partition("\n")
    wording = re.sub(r"^#\s*(@title\s*)?", "", first)
    if "colab" not in nb.tags(cell):
        yield index, "the first code cell is not tagged colab: it must be the Colab set-up cell"
    if rest != body or wording != re.sub(r"^#\s*(@title\s*)?", "", title):
        cloned = COLAB_REPO.search(rest)
        if cloned and cloned[1] != project_home.HOMEPAGE and COLAB_REPO.sub("", rest) == COLAB_REPO.sub("", body):
            yield index, (f"the Colab cell clones {cloned[1]}, not pyproject.toml's Homepage {project_home.HOMEPAGE}: "
                          "change that URL in its GRADLAB_REPO line (copy COLAB_CELL from tools/nblint.py)")
        else:
            yield index, "the first code cell is not the Colab set-up cell: copy it from COLAB_CELL in tools/nblint.py"


@rule("setup-line")
def setup_line(nb: Notebook):
    """The second code cell opens with `import workbook; workbook.setup()`."""
    code, line = nb.code(), nb.words["setup"]
    if len(code) < 2 or not nb.source(code[1][1]).startswith(line):
        yield code[1][0] if len(code) > 1 else None, f"the second code cell must open with {line!r}"


@rule("form-view")
def form_view(nb: Notebook):
    """Solutions and the Colab cell are stored in form view: `cellView: form`, `# @title` first line, source hidden."""
    fix = f"run python tools/nbfmt.py {nb.display}"
    for index, cell in nb.code():
        if "colab" not in nb.tags(cell):
            continue
        missing = _form_missing(cell, lambda first: first.startswith(nbfmt.TITLE + "Colab only"))
        if missing:
            yield index, f"the Colab cell is not in form view (missing: {', '.join(missing)}): {fix}"
    for number, (index, cell) in enumerate(nb.solutions(), 1):
        title = f"{nbfmt.TITLE}Solution to exercise {number}"
        missing = _form_missing(cell, lambda first: first == title)
        if missing:
            yield index, (f"solution {number} is not stored in form view under {title!r} "
                          f"(missing: {', '.join(missing)}): {fix}")


def _form_missing(cell: dict, title_ok: Callable[[str], bool]) -> list[str]:
    """What a cell lacks of form view. Its output stays visible (JupyterLab shows it again when the cell
    runs; a solution prints only that it passes its check, the rule `solution-executed`)."""
    meta = cell.get("metadata", {})
    jupyter = meta.get("jupyter", {})
    missing = [] if meta.get("cellView") == "form" else ["cellView form"]
    missing += [] if title_ok(Notebook.source(cell).partition("\n")[0]) else ["the '# @title' first line"]
    missing += [] if jupyter.get("source_hidden") is True else ["jupyter.source_hidden"]
    return missing


@rule("two-exercises")
def two_exercises(nb: Notebook):
    """At least two exercises, each with a solution cell (tag `solution`) that CI executes."""
    if len(nb.solutions()) < 2:
        yield None, f"has {len(nb.solutions())} solution cells: write two exercises or more, each with a cell tagged solution"


@rule("solution-announced")
def solution_announced(nb: Notebook):
    """A markdown cell announcing the solution ("**Solution** ...") comes right before it."""
    for index, _ in nb.solutions():
        before = nb.cells[index - 1] if index else {}
        if before.get("cell_type") != "markdown" or nb.words["solution"] not in nb.source(before).lower():
            yield index, "the solution is not announced: put a markdown cell ('**Solution** ...') right before it"


@rule("solution-executed")
def solution_executed(nb: Notebook):
    """A solution is stored executed, and its output states no answer: only "This solution passes check_...".

    A solution hides only its code: JupyterLab shows its output (running a cell shows it again, so
    none is stored hidden, tools/nbfmt.py), and so does Colab, so anything else it printed (the
    check's verdict, values, plots) would give the answer away.
    """
    for index, cell in nb.solutions():
        outputs = cell.get("outputs", [])
        if not outputs:
            yield index, "the solution has no stored output: it must confirm its self-check; re-run the notebook (make execute)"
        for output in outputs:
            text = "".join(output.get("text", "")) if output.get("output_type") == "stream" else None
            lines = (text or "").splitlines()
            if text is None or output.get("name") != "stdout" or not lines or not all(
                    re.fullmatch(nb.words["passes"], line) for line in lines):
                shown = (text or output.get("output_type", "")).strip().splitlines()[:1]
                yield index, (f"the solution shows {shown[0][:60] if shown else 'an output'!r}, which may state the "
                              "answer: print nothing, and end with check_exercise_N.confirm(...)")
                break


def _python(source: str) -> str:
    """A code cell's source as plain Python: IPython's `!shell` and `%magic` lines become `pass`."""
    return "\n".join(re.sub(r"^(\s*)[!%].*$", r"\1pass", line) for line in source.splitlines())


def bound_names(node: ast.stmt) -> set[str]:
    """Names a top-level statement binds in the notebook's namespace (not inside functions or comprehensions).

    Shared with the instructor edition (tools/assignments/make_assignments.py).
    """
    names: set[str] = set()

    def targets(target):
        if isinstance(target, ast.Name):
            names.add(target.id)
        elif isinstance(target, (ast.Tuple, ast.List)):
            for element in target.elts:
                targets(element)
        elif isinstance(target, ast.Starred):
            targets(target.value)

    def visit(stmt):
        if isinstance(stmt, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            names.add(stmt.name)
            return
        if isinstance(stmt, ast.Assign):
            for target in stmt.targets:
                targets(target)
        elif isinstance(stmt, (ast.AnnAssign, ast.AugAssign, ast.For, ast.AsyncFor)):
            targets(stmt.target)
        elif isinstance(stmt, (ast.With, ast.AsyncWith)):
            for item in stmt.items:
                if item.optional_vars is not None:
                    targets(item.optional_vars)
        elif isinstance(stmt, (ast.Import, ast.ImportFrom)):
            names.update((alias.asname or alias.name).split(".")[0] for alias in stmt.names)
        for field in ("body", "orelse", "finalbody", "handlers"):
            for child in getattr(stmt, field, []):
                visit(child)

    visit(node)
    return names


def _bound_names(tree: ast.Module) -> set:
    """The names a cell binds at its top level."""
    return set().union(*map(bound_names, tree.body))


def _check_calls(tree: ast.Module) -> list[tuple[str, set, bool]]:
    """(checker, names passed to it, whether it is `.confirm`) for every call of a `check...` function."""
    calls = []
    for node in ast.walk(tree):
        if not isinstance(node, ast.Call):
            continue
        func, confirms = node.func, False
        if isinstance(func, ast.Attribute) and func.attr == "confirm":
            func, confirms = func.value, True
        if isinstance(func, ast.Name) and func.id.startswith("check"):
            args = list(node.args) + [k.value for k in node.keywords]
            calls.append((func.id, {n.id for a in args for n in ast.walk(a) if isinstance(n, ast.Name)}, confirms))
    return calls


@rule("solution-own-names")
def solution_own_names(nb: Notebook):
    """A solution binds only its own names (`<name>_solution`) and confirms the exercise's self-check on them.

    The solution calls ``check_exercise_N.confirm(...)``, which says only that it passes (the check's
    verdict states the answer, and Colab shows a solution's output, and JupyterLab once the learner expands it);
    the exercise cell calls ``check_exercise_N(...)`` on the learner's own names.
    """
    code = nb.code()
    trees = {}
    for i, cell in code:
        try:
            trees[i] = ast.parse(_python(nb.source(cell)))
        except SyntaxError as error:
            yield i, f"does not parse as Python ({error.msg}, line {error.lineno})"
            return
    is_solution = {i: "solution" in nb.tags(c) for i, c in code}
    learner_names = set().union(*(_bound_names(trees[i]) for i, _ in code if not is_solution[i]))
    solution_names = set().union(*(_bound_names(trees[i]) for i, _ in code if is_solution[i]))
    for i, _ in code:
        if not is_solution[i]:
            continue
        clash = _bound_names(trees[i]) & learner_names
        if clash:
            yield i, (f"the solution redefines {sorted(clash)}, which the learner's cells define: "
                      "name it <name>_solution so that Run All keeps the learner's work")
        earlier = [j for j, _ in code if j < i and not is_solution[j]]
        if not earlier:
            yield i, "the solution has no exercise cell before it"
            continue
        exercise = max(earlier)
        checked = {name for name, _, _ in _check_calls(trees[exercise])}
        solution_checks = _check_calls(trees[i])
        if not solution_checks:
            yield i, "the solution runs no self-check: end it with check_exercise_N.confirm(<name>_solution)"
        for name, _, confirms in solution_checks:
            if name not in checked:
                yield i, (f"the solution calls {name}, but the exercise cell {exercise + 1} before it does not "
                          "call it on the learner's definition")
            if not confirms:
                yield i, (f"the solution calls {name}(...), whose verdict states the answer: call "
                          f"{name}.confirm(...), which says only that the solution passes")
        for name, args, confirms in _check_calls(trees[exercise]):
            if confirms:
                yield exercise, f"confirms {name} on the learner's answer: call {name}(...), which reports on it"
            if args & solution_names:
                yield exercise, f"the self-check {name} is called on a solution's name: call it on the learner's"


@rule("checks-in-modules")
def checks_in_modules(nb: Notebook):
    """Self-checks live in `notebooks/exercises/<topic>.py` with tests, never inline; no solution sits in markdown."""
    for index, cell in enumerate(nb.cells):
        source = nb.source(cell)
        if cell.get("cell_type") == "code" and re.search(r"^def check_exercise", source, re.M):
            yield index, "defines a self-check inline: move it to notebooks/exercises/<topic>.py and import it"
        elif cell.get("cell_type") != "code" and re.search(r"<details><summary>Solution", source):
            yield index, "shows a solution in markdown: store it in a code cell tagged solution"
    uses = [(i, m) for i, c in nb.code() for m in re.findall(r"from exercises\.(\w+) import", nb.source(c))]
    if not uses:
        yield None, "imports no self-checks: put them in notebooks/exercises/<topic>.py and import them from there"
    first_use = {}
    for index, module in uses:
        first_use.setdefault(module, index)
    folder = nb.path.parent.parent if nb.edition else nb.path.parent      # notebooks/, an edition's too
    for module, index in first_use.items():
        if not (folder / "exercises" / f"{module}.py").exists():
            yield index, f"imports exercises.{module}, but notebooks/exercises/{module}.py does not exist"
        elif not (folder.parent / "tests" / "workbook" / f"test_exercises_{module}.py").exists():
            yield index, f"exercises/{module}.py has no tests: add tests/workbook/test_exercises_{module}.py"


@rule("legacy-in-appendix")
def legacy_in_appendix(nb: Notebook):
    """TF1 graph-mode APIs run in the legacy appendix (10) or in a one-cell comparison labelled LEGACY."""
    if nb.name.startswith("10_"):
        title = nb.source(nb.cells[0]).lower() if nb.cells else ""
        if "legacy" not in title or "appendix" not in title:
            yield 0, "notebook 10 is the legacy appendix: its title must say 'Appendix' and 'legacy'"
        return
    for index, cell in nb.code():
        source = nb.source(cell)
        for api in LEGACY_APIS:
            if api in source and "legacy" not in source.lower():
                yield index, f"runs {api} without a LEGACY label: move it to notebook 10 or label the cell LEGACY"


@rule("custom-gradient-first")
def custom_gradient_first(nb: Notebook):
    """Notebook 00 has the learner write a `@tf.custom_gradient` before it uses any gradlab op."""
    if not nb.name.startswith("00_"):
        return
    code = [(i, nb.source(c)) for i, c in nb.code()]
    custom = next((i for i, s in code if "@tf.custom_gradient" in s), None)
    op = next((i for i, s in code if re.search(r"gradlab\.(scale|clip|map)_gradient\(", s)), None)
    if custom is None:
        yield None, "notebook 00 defines no @tf.custom_gradient: the modern mechanism comes first"
    elif op is not None and op < custom:
        yield op, "uses a gradlab op before notebook 00 defines a @tf.custom_gradient: teach the mechanism first"


# --- widgets -----------------------------------------------------------------------------------------

@rule("widget-state")
def widget_state(nb: Notebook):
    """No stored widget state (gradlab's explorers carry their own PNG fallback; every widget is followed by a static picture)."""
    if "widgets" in nb.metadata:
        yield None, f"stores widget state: run python tools/nbfmt.py {nb.display} (make execute does)"


@rule("widget-picture")
def widget_picture(nb: Notebook):
    """Every widget is followed by a static picture (the next code cell shows a PNG), for readers on GitHub."""
    code = nb.code()
    for position, (index, cell) in enumerate(code):
        if any(WIDGET_VIEW in o.get("data", {}) for o in cell.get("outputs", [])):
            later = code[position + 1:position + 2]
            if not later or not any("image/png" in o.get("data", {}) for o in later[0][1].get("outputs", [])):
                yield index, "the widget is not followed by a static picture: show a figure in the next code cell"


# --- the learner-first bounds ----------------------------------------------------------------------

@rule("max-cells")
def max_cells(nb: Notebook):
    """At most 40 cells per notebook."""
    if len(nb.cells) > MAX_CELLS:
        yield None, f"has {len(nb.cells)} cells (at most {MAX_CELLS}): split it, or link back instead of re-teaching"


@rule("max-words")
def max_words(nb: Notebook):
    """At most 2,000 markdown words per notebook."""
    if nb.edition:                   # a translation: its English twin is the one counted
        return
    words = sum(markdown_words(c) for c in nb.cells if c.get("cell_type") == "markdown")
    if words > MAX_WORDS:
        yield None, f"has {words} markdown words (at most {MAX_WORDS}): cut, or link back instead of re-teaching"


@rule("max-code-lines")
def max_code_lines(nb: Notebook):
    """Code cells have at most 25 non-blank lines."""
    for index, cell in nb.code():
        if (lines := code_lines(cell)) > MAX_CODE_LINES:
            yield index, f"has {lines} code lines (at most {MAX_CODE_LINES}): move helpers into gradlab or notebooks/exercises"


@rule("workbook-words", scope="workbook")
def workbook_words(notebooks: list[Notebook]):
    """The whole workbook has at most 28,000 markdown words."""
    total = sum(markdown_words(c) for nb in notebooks if not nb.edition for c in nb.cells if c.get("cell_type") == "markdown")
    if total > MAX_TOTAL_WORDS:
        yield None, None, f"the workbook has {total} markdown words (at most {MAX_TOTAL_WORDS}): cut where topics repeat"


# --- storage -------------------------------------------------------------------------------------------

@rule("formatted")
def formatted(nb: Notebook):
    """Stored as `tools/nbfmt.py` writes it (so that opening and saving it in JupyterLab changes nothing)."""
    text, changes = nbfmt.format_text(nb.text)
    if text != nb.text:
        yield None, f"not stored as tools/nbfmt.py writes it ({'; '.join(changes)}): run python tools/nbfmt.py {nb.display}"


# --- running the rules ---------------------------------------------------------------------------------

def lint(paths: Iterable[Path], rules: Iterable[str] | None = None) -> list[Finding]:
    """Every finding of the named rules (default: all) on the notebooks at ``paths``."""
    selected = [RULES[name] for name in (rules or RULES)]
    notebooks, findings = [], []
    for path in paths:
        try:
            notebooks.append(Notebook(path))
        except (OSError, ValueError) as error:
            findings.append(Finding(str(path), None, "readable", f"cannot be read as a notebook: {error}"))
    for check in selected:
        if check.scope == "workbook":
            for nb, index, message in check.check(notebooks):
                where = nb.display if nb else _folder(notebooks)
                findings.append(Finding(where, None if index is None else index + 1, check.name, message))
            continue
        for nb in notebooks:
            for index, message in check.check(nb):
                findings.append(Finding(nb.display, None if index is None else index + 1, check.name, message))
    return sorted(findings, key=lambda f: (f.path, f.cell or 0, f.rule))


def _folder(notebooks: list[Notebook]) -> str:
    folders = sorted({str(Path(nb.display).parent) for nb in notebooks})
    return folders[0] + os.sep if len(folders) == 1 else "the workbook"


def stats(paths: Iterable[Path]) -> str:
    """The size table: per notebook and in total, against the limits (over a limit: marked '!')."""
    def mark(value: int, limit: int) -> str:
        return f"{value}{'!' if value > limit else ' '}"

    rows = [f"{'notebook':42} {'cells':>6} {'words':>7} {'code lines':>11} {'longest':>8} {'visible sol.':>13}"]
    totals = dict(cells=0, words=0, code=0, visible=0)
    longest_overall = 0
    for path in paths:
        nb = Notebook(path)
        words = sum(markdown_words(c) for c in nb.cells if c.get("cell_type") == "markdown")
        lines = [code_lines(c) for _, c in nb.code()]
        visible = sum(1 for _, c in nb.solutions() if not _hidden(c))
        shown = f"{nb.edition}/{nb.name}" if nb.edition else nb.name
        word_limit = words if nb.edition else MAX_WORDS      # a translation: its English twin is the one bounded
        rows.append(f"{shown:42} {mark(len(nb.cells), MAX_CELLS):>6} {mark(words, word_limit):>7} {sum(lines):>10}  "
                    f"{mark(max(lines, default=0), MAX_CODE_LINES):>8} {mark(visible, 0):>13}")
        totals["cells"] += len(nb.cells)
        totals["words"] += 0 if nb.edition else words      # the workbook's words are the English ones
        totals["code"] += sum(lines)
        totals["visible"] += visible
        longest_overall = max(longest_overall, max(lines, default=0))
    rows.append(f"{'total':42} {totals['cells']:>5}  {mark(totals['words'], MAX_TOTAL_WORDS):>7} {totals['code']:>10}  "
                f"{mark(longest_overall, MAX_CODE_LINES):>8} {mark(totals['visible'], 0):>13}")
    rows.append(f"{'limits':42} {'<=' + str(MAX_CELLS):>5}  {'<=' + str(MAX_WORDS):>6}  {'':>10}  "
                f"{'<=' + str(MAX_CODE_LINES):>7}  {'0':>12}")
    rows.append(f"workbook: {totals['words']:,} of at most {MAX_TOTAL_WORDS:,} markdown words; '!' marks a value over its limit")
    return "\n".join(rows)


def _hidden(cell: dict) -> bool:
    """Whether a solution's code is hidden (its output, which states no answer, shows)."""
    return bool(cell.get("metadata", {}).get("jupyter", {}).get("source_hidden"))


def rule_list() -> str:
    """The rules as a markdown list (DEVELOPERS.md embeds it)."""
    return "\n".join(f"- `{r.name}`{' (workbook)' if r.scope == 'workbook' else ''}: {r.doc}" for r in RULES.values())


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("--stats", action="store_true", help="print the size table against the limits, lint nothing")
    parser.add_argument("--list", action="store_true", help="print the rules")
    parser.add_argument("paths", nargs="*", help="notebooks or folders (default: notebooks/)")
    args = parser.parse_args(argv)
    if args.list:
        print(rule_list())
        return 0
    paths = nbfmt.notebook_paths(args.paths)
    if not paths:
        print("no notebooks found", file=sys.stderr)
        return 1
    if args.stats:
        print(stats(paths))
        return 0
    findings = lint(paths)
    for finding in findings:
        print(finding)
    print(f"{len(paths)} notebooks, {len(RULES)} rules, {len(findings)} findings")
    return 1 if findings else 0


if __name__ == "__main__":
    sys.exit(main())
