"""Builds the instructor edition (`make assignments`): every notebook as an otter-grader assignment.

One source of truth: everything is generated from the workbook's notebooks and their self-checks
(``notebooks/exercises/``), never from hand-kept copies. For each notebook the generator

1. finds its exercises by the workbook's conventions: the starter is a code cell tagged
   ``exercise`` that ends with the self-check call(s) ``check_exercise_N(...)``; the solution after
   it is a code cell tagged ``solution`` (first line ``# Solution ...`` or ``# @title Solution ...``)
   that defines the same names with the suffix ``_solution`` (classes: ``Solution``) and ends with
   ``check_exercise_N.confirm(...)``; the Markdown from the exercise's title (``### Exercise N ...``
   or ``**Exercise N ...``) down to the starter states it;
2. writes otter's source notebook ``source/NN_name.ipynb``: the lesson as it is, less the workbook's
   Colab cell, and one otter question per exercise (its points from ``points.toml``) whose answer
   cell holds the starter as otter's prompt and the solution (suffix stripped, confirm line dropped)
   as otter's solution, and whose test asserts the same self-check on the learner's names; where the
   check takes a ``seed``, a hidden test asserts it on the held-out cases; the written questions of
   ``points.toml`` become otter's manual questions;
3. runs ``otter assign`` on it (in this process), which writes ``student/`` (the notebook with the
   starter code, no solution, and the tests) and ``autograder/`` (the solutions notebook and the
   autograder zip, renamed ``NN_name-autograder.zip``);
4. writes ``colab/NN_name.ipynb``: the student notebook whose first cell installs, on Colab, what it
   needs: the workbook cloned from ``[colab] repository`` in ``points.toml`` (default: pyproject.toml's
   Homepage) and checked out at the commit the edition is built from, gradlab from it, otter-grader at
   its pin, and the question's tests.
5. writes ``grader/``: what ``make grade`` (``grade.py``) grades with, and ``manifest.json``, the
   SHA-256 of each of its files; prints the manifest's own SHA-256 and records it beside the folder
   (``grader-manifest.sha256``), where ``make grade`` checks it.

The Chinese edition is built the same way from ``notebooks/zh/NN_name.ipynb`` into ``<out>/zh/NN_name/``
(``--language``: ``all``, the default, ``en`` or ``zh_CN``). Its lesson, prompts and answer cells are the
Chinese notebook's (whose setup line chooses zh_CN, so the self-checks' verdicts are Chinese), and what the
generator and otter write into a student's notebook (the written question's prompt and answer placeholder,
the tests' messages, the Colab cell's comments, otter's initialisation comment) comes from the
``assignments`` gettext domain, ``tools/assignments/locale/`` (tools/i18n.py extracts every ``_("...")`` of
this file into it); a written question's Chinese prompt is ``prompt_zh_CN`` in points.toml.

Usage: python tools/assignments/make_assignments.py [--out build/assignments] [--language all|en|zh_CN]
                                                    [--run-tests] [NN_name ...]

``--run-tests`` lets otter assign also execute each solutions notebook and check that every test
passes (about a notebook's run time each); ``make test-assignments`` grades a sample instead.
"""
from __future__ import annotations

import argparse
import ast
import builtins
import copy
import dataclasses
import functools
import gettext
import hashlib
import io
import json
import logging
import re
import secrets
import shutil
import subprocess
import sys
import textwrap
import time
import tokenize
import tomllib
from pathlib import Path

import nbformat

ROOT = Path(__file__).resolve().parents[2]
if str(ROOT / "tools") not in sys.path:
    sys.path.insert(0, str(ROOT / "tools"))
from nblint import EDITIONS as NBLINT_EDITIONS  # noqa: E402  (each edition's words: 练习, 参考答案)
from nblint import bound_names  # noqa: E402  (the linter's reading of what a cell defines)
import project_home  # noqa: E402  (the workbook's home, from pyproject.toml: what the Colab version clones)

NOTEBOOKS = ROOT / "notebooks"
OUT = ROOT / "build" / "assignments"
TOOL_REQUIREMENTS = Path(__file__).with_name("requirements.txt")
POINTS_TABLE = Path(__file__).with_name("points.toml")   # the instructor's table: points, written questions, seed
# The workbook's pins an autograder image needs to run a notebook (otter grade builds its Docker image from
# the zip's environment.yml, which otter fills from them); gradlab itself travels in the zip, so nothing is
# installed by name (gradlab-tf is not on PyPI yet, and the name gradlab on PyPI is another project's).
RUNTIME_PINS = ("tensorflow-cpu", "tensorflow", "keras", "numpy", "matplotlib", "ipywidgets", "scikit-learn")
TITLE = r"^(?:#{{2,6}}\s+|\*\*){word}\s+{n}\b"
#: The languages the edition is built in: language -> the folder of its notebooks under notebooks/ and of its
#: assignments under the output ("" for English), as tools/i18n.py's EDITIONS names them.
LANGUAGES = {"en": "", "zh_CN": "zh"}
LOCALE = Path(__file__).with_name("locale")      # the assignments domain: what the generator writes, translated
DOMAIN = "assignments"
#: The workbook's "**Solution** ..." announcement above a solution cell, per language.
ANNOUNCEMENTS = {"en": re.compile(r"^\*\*Solution\*\*( \(click to expand the hidden cell below\))?"),
                 "zh_CN": re.compile(r"^\*\*参考答案\*\*(（见?下一个单元格，[^）]*）)?")}
#: What otter writes into a student's notebook, replaced in a translated edition.
OTTER_INIT_COMMENT = "# Initialize Otter"
PLACEHOLDER = "_Type your answer here, replacing this text._"
SOLUTION_HEADER = re.compile(r"^#\s*(?:@title\s+)?(Solution\b.*)$")
BADGE = re.compile(r"^\[!\[Open In Colab\]\([^)]*\)\]\([^)]*\)\n?", re.M)
SOLUTION_SUFFIX = "_solution"
CLASS_SUFFIX = "Solution"


class ConventionError(ValueError):
    """A notebook does not follow the conventions the edition is generated from; says what to change."""


@functools.lru_cache(maxsize=None)
def translator(language: str = "en"):
    """The ``gettext`` of the assignments domain in ``language`` (English: the message itself).

    Example:
      >>> translator("en")("Run this cell first.")
      'Run this cell first.'
    """
    if language not in LANGUAGES:
        raise ValueError(f"language must be one of {sorted(LANGUAGES)}; got {language!r}")
    if language == "en":
        return lambda message: message
    try:
        return gettext.translation(DOMAIN, localedir=str(LOCALE), languages=[language]).gettext
    except OSError as error:
        raise ConventionError(f"no {DOMAIN}.mo for {language} in {LOCALE}: run `make translations`") from error


def notebooks_folder(language: str = "en") -> Path:
    """Where the notebooks of ``language`` are: ``notebooks/``, or ``notebooks/zh/`` for Chinese."""
    return NOTEBOOKS / LANGUAGES[language] if LANGUAGES[language] else NOTEBOOKS


def edition_words(language: str = "en") -> tuple[str, str]:
    """The title word of an exercise and the solution announcement's, in ``language`` (nblint's EDITIONS)."""
    if language == "en":
        return "Exercise", "Solution"
    words = NBLINT_EDITIONS[LANGUAGES[language]]
    return words["parts"]["Exercise"], words["solution"]


@dataclasses.dataclass
class Question:
    """One exercise, split the way otter needs it."""

    number: int
    module: str                 # the self-check module, e.g. "exercises.start_here"
    prompt: list[str]           # Markdown sources from the exercise's title down to the starter
    head: str                   # starter lines shared by every version (the import, given code)
    starter: str                # what the learner changes (otter's prompt)
    tail: str                   # shared lines after it, ending with the self-check call(s)
    solution: str               # the instructor's solution, under the learner's names
    checks: list[str]           # the self-check calls, e.g. "check_exercise_1(scale_and_clip)"
    params: list[str]           # the notebook names the test reads from the graded notebook
    notes: str | None = None    # the workbook's "**Solution** ..." note, kept for the instructor only
    language: str = "en"        # the notebook's: the language of the test's own messages
    points: float = 1           # from points.toml
    hidden: bool = False        # its check takes a seed: held-out cases decide the grade

    @property
    def name(self) -> str:
        return f"exercise_{self.number}"

    def answer(self, body: str) -> str:
        """The answer cell as a learner hands it in with ``body`` in place of the starter."""
        return self.head + body + self.tail

    def answer_cell(self) -> str:
        """The answer cell in otter's notation: starter as the prompt, then the solution."""
        delimiter = '"""' if '"""' not in self.starter else "'''"
        if delimiter in self.starter:
            raise ConventionError(f"exercise {self.number}: the starter holds both kinds of triple quotes")
        raw = "r" if "\\" in self.starter else ""
        starter = self.starter if self.starter.endswith("\n") else self.starter + "\n"
        solution = self.solution.rstrip("\n") + "\n"
        return (self.head + f"{raw}{delimiter} # BEGIN PROMPT\n" + starter + f"{delimiter}; # END PROMPT\n"
                + "# BEGIN SOLUTION NO PROMPT\n" + solution + "\n# END SOLUTION\n" + self.tail)

    def test(self) -> str:
        """otter's exception-based test: the notebook's own self-check, asserted.

        The check is imported afresh from its module (a notebook that rebinds ``check_exercise_N``
        does not grade itself); the verdict it prints becomes the failure message, so otter's
        feedback shows it once. otter reads the learner's names from the graded notebook by the
        test's parameter names.
        """
        return self._test(f"test_{self.name}", "")

    def hidden_test(self, seed: int) -> str:
        """otter's hidden test: the same check on held-out cases drawn from ``seed`` (its ``seed`` argument)."""
        return self._test(f"test_{self.name}_held_out", f", seed={seed}")

    def _test(self, function: str, extra: str) -> str:
        checks = ", ".join(sorted({call.split("(")[0] for call in self.checks}))
        # otter passes None for a name the notebook never defined (its cell failed): say so, not a TypeError.
        starter_none = set(re.findall(r"^(\w+) = None\b", self.starter, re.M))
        _ = translator(self.language)
        undefined = _("`{name}` is not defined: did its cell run?")
        defined = "".join(f"    if {name} is None:\n"
                          f"        raise AssertionError({json.dumps(undefined.format(name=name), ensure_ascii=False)})\n"
                          for name in self.params if name not in starter_none)
        calls = "".join("    shown = io.StringIO()\n"
                        "    with contextlib.redirect_stdout(shown):\n"
                        f"        passed = bool({call[:-1]}{extra}))\n"
                        "    if not passed:\n"
                        "        raise AssertionError(shown.getvalue().strip())\n" for call in self.checks)
        return (f"def {function}({', '.join(self.params)}):\n"
                "    import contextlib\n    import io\n"
                f"    from {self.module} import {checks}\n" + defined + calls)


# ------------------------------------------------------------------------------------------------
# Reading the workbook's conventions
# ------------------------------------------------------------------------------------------------

def _source(cell) -> str:
    return cell["source"] if isinstance(cell["source"], str) else "".join(cell["source"])


def _tags(cell) -> list[str]:
    return cell.get("metadata", {}).get("tags", [])


def _statements(source: str) -> list[tuple[ast.stmt, str]]:
    """The top-level statements of ``source``, each with its text (up to the next statement)."""
    try:
        tree = ast.parse(source)
    except SyntaxError as error:
        raise ConventionError(f"an exercise or solution cell must be plain Python (no IPython magics): {error}") from error
    lines = source.splitlines(keepends=True)
    starts = [min([node.lineno] + [d.lineno for d in getattr(node, "decorator_list", [])]) - 1 for node in tree.body]
    if starts:
        starts[0] = 0                            # leading comments belong to the first statement
    ends = starts[1:] + [len(lines)]
    return [(node, "".join(lines[a:b])) for node, a, b in zip(tree.body, starts, ends)]


def _check_call(node: ast.stmt, attribute: str | None = None) -> int | None:
    """N if ``node`` is the statement ``check_exercise_N(...)`` (or ``check_exercise_N.<attribute>(...)``)."""
    if not (isinstance(node, ast.Expr) and isinstance(node.value, ast.Call)):
        return None
    func = node.value.func
    if attribute is not None:
        if not (isinstance(func, ast.Attribute) and func.attr == attribute):
            return None
        func = func.value
    match = re.fullmatch(r"check_exercise_(\d+)", func.id) if isinstance(func, ast.Name) else None
    return int(match.group(1)) if match else None


def _renamed(solution: str) -> str:
    """The solution under the learner's names: ``scale_and_clip_solution`` -> ``scale_and_clip``."""
    tokens = [t.string for t in tokenize.generate_tokens(io.StringIO(solution).readline) if t.type == tokenize.NAME]
    classes = {node.name for node in ast.walk(ast.parse(solution)) if isinstance(node, ast.ClassDef)}
    renames = {name: name[: -len(SOLUTION_SUFFIX)] for name in tokens
               if name.endswith(SOLUTION_SUFFIX) and len(name) > len(SOLUTION_SUFFIX)}
    renames.update({name: name[: -len(CLASS_SUFFIX)] for name in classes
                    if name.endswith(CLASS_SUFFIX) and len(name) > len(CLASS_SUFFIX)})
    clashes = sorted(new for new in renames.values() if new in tokens)
    if clashes:
        raise ConventionError(f"the solution uses {clashes} beside their _solution versions: renaming would merge them")
    for old, new in renames.items():
        solution = re.sub(rf"\b{re.escape(old)}\b", new, solution)
    return solution


def _free_names(call: ast.Call) -> list[str]:
    """The notebook names a self-check call reads (its function aside), in order of appearance."""
    found = [node for arg in [*call.args, *(k.value for k in call.keywords)] for node in ast.walk(arg)
             if isinstance(node, ast.Name) and not hasattr(builtins, node.id)]
    names: list[str] = []
    for node in sorted(found, key=lambda n: (n.lineno, n.col_offset)):
        if node.id not in names:
            names.append(node.id)
    return names


def _prompt(cells, exercise: int, number: int, floor: int, path: Path,
            language: str = "en") -> tuple[int, str, list[str]]:
    """Where the exercise's statement starts: (cell index, text before the title in that cell, prompt)."""
    word = edition_words(language)[0]
    title = re.compile(TITLE.format(word=re.escape(word), n=number), re.M)
    index = exercise - 1
    while index > floor and cells[index]["cell_type"] == "markdown":
        text = _source(cells[index])
        match = title.search(text)
        if match:
            prompt = [text[match.start():]] + [_source(c) for c in cells[index + 1:exercise]]
            return index, text[:match.start()], prompt
        index -= 1
    raise ConventionError(f"{path.name}: no Markdown title '{word} {number}' (a heading or bold) "
                          f"in the Markdown cells right above its exercise cell (cell {exercise})")


def read_questions(path: Path, language: str = "en") -> tuple[nbformat.NotebookNode, list[tuple[int, int, str, Question]]]:
    """The notebook and its exercises as (first cell, last cell, text kept before the title, question).

    ``language``: the notebook's (its exercise titles and solution announcements are in it).
    """
    announcement = ANNOUNCEMENTS[language]
    notebook = nbformat.read(path, as_version=4)
    cells = notebook.cells
    exercises = [i for i, c in enumerate(cells) if c.cell_type == "code" and "exercise" in _tags(c)]
    if not exercises:
        raise ConventionError(f"{path.name}: no code cell tagged 'exercise'")
    module = None
    found, floor = [], -1
    for position, exercise in enumerate(exercises):
        limit = exercises[position + 1] if position + 1 < len(exercises) else len(cells)
        solutions = [i for i in range(exercise + 1, limit) if cells[i].cell_type == "code" and "solution" in _tags(cells[i])]
        if len(solutions) != 1:
            raise ConventionError(f"{path.name}: the exercise in cell {exercise} needs one code cell tagged "
                                  f"'solution' before the next exercise; found {len(solutions)}")
        solution_index = solutions[0]
        between = cells[exercise + 1:solution_index]
        if any(c.cell_type != "markdown" or not announcement.match(_source(c)) for c in between):
            raise ConventionError(f"{path.name}: between the exercise (cell {exercise}) and its solution "
                                  f"(cell {solution_index}) only the '**{edition_words(language)[1]}** ...' "
                                  "announcement may stand")
        question = _question(path, _source(cells[exercise]), _source(cells[solution_index]), module,
                             notes=[_source(c) for c in between], language=language)
        module = question.module
        start, before, question.prompt = _prompt(cells, exercise, question.number, floor, path, language)
        found.append((start, solution_index, before, question))
        floor = solution_index
    numbers = [q.number for *_, q in found]
    if numbers != list(range(1, len(found) + 1)):
        raise ConventionError(f"{path.name}: exercises must be numbered 1, 2, ... in order; found {numbers}")
    return notebook, found


def _question(path: Path, starter_cell: str, solution_cell: str, module: str | None, notes: list[str],
              language: str = "en") -> Question:
    statements = _statements(starter_cell)
    checks = [(node, text) for node, text in statements if _check_call(node) is not None]
    numbers = {_check_call(node) for node, _ in checks}
    if len(numbers) != 1:
        raise ConventionError(f"{path.name}: an exercise cell must call one self-check, check_exercise_N(...); "
                              f"found {sorted(numbers)} in:\n{starter_cell}")
    (number,) = numbers
    imports = [node for node, _ in statements
               if isinstance(node, ast.ImportFrom) and (node.module or "").startswith("exercises.")]
    if imports:
        module = imports[0].module
    if module is None:
        raise ConventionError(f"{path.name}: the first exercise cell must import its checks, "
                              "'from exercises.<module> import check_exercise_1, check_exercise_2'")

    lines = solution_cell.splitlines(keepends=True)
    header = SOLUTION_HEADER.match(lines[0].rstrip("\n")) if lines else None
    if not header:
        raise ConventionError(f"{path.name}: a solution cell starts with '# Solution ...' or '# @title Solution ...'; "
                              f"exercise {number}'s starts with {lines[:1]}")
    kept = [text for node, text in _statements(solution_cell) if _check_call(node, "confirm") is None]
    if len(kept) == len(_statements(solution_cell)):
        raise ConventionError(f"{path.name}: exercise {number}'s solution must end with check_exercise_{number}.confirm(...)")
    body = "".join(kept)
    body = f"# {header.group(1)}\n" + body.split("\n", 1)[1] if body.startswith(lines[0]) else body
    try:
        solution = _renamed(body).rstrip("\n") + "\n"
    except ConventionError as error:
        raise ConventionError(f"{path.name}, exercise {number}: {error}") from error
    if SOLUTION_SUFFIX in solution:
        raise ConventionError(f"{path.name}: exercise {number}'s solution still names '{SOLUTION_SUFFIX}' after renaming")
    solved = set().union(*(bound_names(node) for node, _ in _statements(solution)))

    roles = []
    for node, _ in statements:
        if _check_call(node) is not None or (isinstance(node, ast.ImportFrom) and node in imports):
            roles.append("shared")
        else:
            roles.append("change" if bound_names(node) & solved else "shared")
    if "change" not in roles:
        raise ConventionError(f"{path.name}: exercise {number}'s solution defines none of the names its exercise cell "
                              f"defines ({sorted(set().union(*(bound_names(n) for n, _ in statements)))})")
    first, last = roles.index("change"), len(roles) - 1 - roles[::-1].index("change")
    if "shared" in roles[first:last + 1]:
        given = [text.strip().splitlines()[0] for (node, text), role in zip(statements[first:last + 1], roles[first:last + 1])
                 if role == "shared"]
        raise ConventionError(f"{path.name}: in exercise {number}'s cell, given code ({given}) stands between the "
                              "definitions the solution replaces; move it above them")
    texts = [text for _, text in statements]
    calls = [ast.get_source_segment(starter_cell, node.value) for node, _ in checks]
    params: list[str] = []
    for node, _ in checks:
        params += [name for name in _free_names(node.value) if name not in params]
    # The workbook's note on its solution, for the instructor only, unless it is just the announcement or
    # speaks of the `_solution` names (which the instructor's solution does not use).
    remarks = [ANNOUNCEMENTS[language].sub("", text, count=1).strip() for text in notes]
    word = edition_words(language)[1]
    note = "\n\n".join(f"**{word}**{r}" for r in remarks if r.strip(" .。") and SOLUTION_SUFFIX not in r) or None
    return Question(number=number, module=module, prompt=[], head="".join(texts[:first]),
                    starter="".join(texts[first:last + 1]), tail="".join(texts[last + 1:]),
                    solution=solution, checks=calls, params=params, notes=note, language=language)


# ------------------------------------------------------------------------------------------------
# Writing otter's source notebook
# ------------------------------------------------------------------------------------------------

def helpers() -> list[Path]:
    """What the notebooks import from beside them (workbook.py, exercises/, papers/): not the translated editions
    (notebooks/zh/ and their catalogs, notebooks/locale/; tools/i18n.py), which an English assignment has no use for."""
    return sorted(p for p in NOTEBOOKS.iterdir() if p.suffix != ".ipynb" and not p.name.startswith((".", "_"))
                  and p.name not in ("zh", "locale"))


def copy_helpers(folder: Path, language: str = "en") -> list[str]:
    """Copies :func:`helpers` into ``folder``; a translated edition also gets ``locale/<language>/LC_MESSAGES/workbook.mo``
    (what its setup line and the self-checks' verdicts read). Returns the top-level names copied."""
    ignore = shutil.ignore_patterns("__pycache__", "*.pyc", ".ipynb_checkpoints")
    folder.mkdir(parents=True, exist_ok=True)
    for helper in helpers():
        if helper.is_dir():
            shutil.copytree(helper, folder / helper.name, ignore=ignore)
        else:
            shutil.copy2(helper, folder / helper.name)
    names = [p.name for p in helpers()]
    if language != "en":
        mo = Path("locale") / language / "LC_MESSAGES" / "workbook.mo"
        (folder / mo).parent.mkdir(parents=True)
        shutil.copy2(NOTEBOOKS / mo, folder / mo)
        names.append("locale")
    return names


def runtime_requirements() -> str:
    """The workbook's pins of what a graded notebook imports (for otter grade's Docker image)."""
    keep = []
    for line in (ROOT / "requirements.txt").read_text().splitlines():
        name = re.split(r"[=<>;\s\[]", line.strip(), maxsplit=1)[0]
        if name in RUNTIME_PINS:
            keep.append(line.strip())
    header = "# The workbook's pins (requirements.txt) of what the notebooks import; gradlab is in the zip.\n"
    return header + "\n".join(keep) + "\n"


def otter_version() -> str:
    for line in TOOL_REQUIREMENTS.read_text().splitlines():
        if line.startswith("otter-grader=="):
            return line.split("==", 1)[1].strip()
    raise SystemExit(f"{TOOL_REQUIREMENTS}: no 'otter-grader==<version>' line")


def _config(stem: str, language: str = "en") -> str:
    files = "".join(f"  - {p.name}\n" for p in helpers()) + ("  - locale\n" if language != "en" else "")
    return ("# ASSIGNMENT CONFIG\n"
            f"name: {stem}\n"
            "requirements: requirements.txt\n"
            "export_cell: false\n"
            "check_all_cell: false\n"
            "tests:\n  files: true\n  ok_format: false\n"
            f"files:\n{files}"
            "autograder_files:\n  - gradlab\n"
            "generate:\n  show_stdout: true\n")


def _raw(text: str):
    return nbformat.v4.new_raw_cell(text)


def _clean(cell):
    cell = copy.deepcopy(cell)
    if cell.cell_type == "code":
        cell.outputs, cell.execution_count = [], None
    return cell


def _require_own_imports(path: Path, cells) -> None:
    """Refuses a notebook that uses a module only its Colab cell imports: the edition drops that cell."""
    colab = [i for i, c in enumerate(cells) if c.cell_type == "code" and "colab" in _tags(c)]
    if not colab:
        return
    imported = set(re.findall(r"^import (\w+)$", _source(cells[colab[0]]), re.M))     # it holds IPython magics
    rest = "\n".join(_source(c) for i, c in enumerate(cells) if c.cell_type == "code" and i != colab[0])
    missing = sorted(name for name in imported if re.search(rf"\b{name}\.", rest)
                     and not re.search(rf"^\s*import\s+(\w+\s*,\s*)*{name}\b", rest, re.M))
    if missing:
        raise ConventionError(f"{path.name} uses {missing} but only its Colab cell imports them: import them "
                              "in the notebook's own imports")


def points_table(path: Path = POINTS_TABLE) -> dict:
    """The instructor's table (points.toml): points per exercise, written questions, the held-out seed."""
    return tomllib.loads(path.read_text()) if path.exists() else {}


def written_questions(stem: str, table: dict | None = None) -> list[dict]:
    """The written (hand-graded) questions of notebook ``stem``, as the table states them.

    A question's ``prompt`` is English; ``prompt_zh_CN`` is its prompt in the Chinese edition.
    """
    table = points_table() if table is None else table
    written = table.get(stem, {}).get("written", [])
    for question in written:
        missing = {"name", "points", "after", "prompt"} - set(question)
        if missing or not re.fullmatch(r"written_\d+", str(question.get("name", ""))):
            raise ConventionError(f"{POINTS_TABLE.name}, {stem}: a written question needs name = \"written_N\", "
                                  f"points, after and prompt; {question.get('name')!r} lacks {sorted(missing)}")
    return written


def takes_seed(module: str, number: int) -> bool:
    """Whether ``check_exercise_<number>`` in ``module`` takes ``seed`` (held-out cases), read from its source."""
    path = NOTEBOOKS / (module.replace(".", "/") + ".py")
    if not path.exists():
        return False
    tree = ast.parse(path.read_text())
    for node in tree.body:
        if isinstance(node, ast.FunctionDef) and node.name == f"check_exercise_{number}":
            return any(arg.arg == "seed" for arg in node.args.kwonlyargs)
    return False


def _apply_table(stem: str, questions: list[Question], table: dict) -> None:
    default = table.get("default", {}).get("exercise", 1)
    own = {k: v for k, v in table.get(stem, {}).items() if k != "written"}
    unknown = sorted(set(own) - {q.name for q in questions})
    if unknown:
        raise ConventionError(f"{POINTS_TABLE.name}: {stem} has no {unknown}")
    for question in questions:
        question.points = own.get(question.name, default)
        question.hidden = takes_seed(question.module, question.number)


def _points(value: float) -> str:
    return str(int(value)) if float(value).is_integer() else str(value)


def seed(table: dict | None = None) -> int:
    """The held-out cases' seed: the table's, or a new one at every build."""
    table = points_table() if table is None else table
    return int(table.get("hidden", {}).get("seed", secrets.randbelow(2**31)))


def written_prompt(question: dict, language: str = "en") -> str:
    """A written question's prompt in ``language``: ``prompt_<language>`` in points.toml (else, with a warning, the English)."""
    if language == "en":
        return question["prompt"]
    prompt = question.get(f"prompt_{language}")
    if not prompt:
        print(f"warning: {POINTS_TABLE.name}: {question['name']} has no prompt_{language}; its English prompt stands "
              f"in the {language} edition")
        return question["prompt"]
    return prompt


def source_notebook(path: Path, held_out: int = 0, language: str = "en") -> tuple[nbformat.NotebookNode, list[Question]]:
    """otter's source notebook for the workbook notebook at ``path`` (in ``language``), and its questions."""
    _ = translator(language)
    notebook, found = read_questions(path, language)
    table = points_table()
    _apply_table(path.stem, [q for *_, q in found], table)
    written = written_questions(path.stem, table)
    names = {q.name for *_, q in found}
    for question in written:
        if question["after"] not in names:
            raise ConventionError(f"{POINTS_TABLE.name}: {path.stem}'s {question['name']} follows "
                                  f"{question['after']!r}, which is not one of {sorted(names)}")
    cells = notebook.cells
    out = [_raw(_config(path.stem, language))]
    spans = {start: (end, before, question) for start, end, before, question in found}
    _require_own_imports(path, cells)
    index = 0
    while index < len(cells):
        cell = cells[index]
        if index in spans:
            end, before, question = spans[index]
            if before.strip():
                kept = _clean(cell)
                kept.source = before.rstrip("\n") + "\n"
                out.append(kept)
            out.append(_raw(f"# BEGIN QUESTION\nname: {question.name}\npoints: {_points(question.points)}"))
            out += [nbformat.v4.new_markdown_cell(text) for text in question.prompt]
            out.append(_raw("# BEGIN SOLUTION"))
            answer = nbformat.v4.new_code_cell(question.answer_cell())
            answer.metadata["tags"] = ["exercise"]
            out.append(answer)
            if question.notes:
                out.append(nbformat.v4.new_markdown_cell(question.notes))
            out.append(_raw("# END SOLUTION"))
            tests = [nbformat.v4.new_code_cell(question.test())]
            if question.hidden:
                tests.append(nbformat.v4.new_code_cell('""" # BEGIN TEST CONFIG\nhidden: true\n""" # END TEST CONFIG\n'
                                                       + question.hidden_test(held_out)))
            out += [_raw("# BEGIN TESTS"), *tests, _raw("# END TESTS")]
            out.append(_raw("# END QUESTION"))
            for extra in (w for w in written if w["after"] == question.name):
                out += [_raw(f"# BEGIN QUESTION\nname: {extra['name']}\nmanual: true\npoints: {_points(extra['points'])}"),
                        nbformat.v4.new_markdown_cell(written_prompt(extra, language)), _raw("# BEGIN SOLUTION"),
                        nbformat.v4.new_markdown_cell(_("_Graded by hand: the instructor's reading._")),
                        _raw("# END SOLUTION"), _raw("# END QUESTION")]
            index = end + 1
            continue
        if cell.cell_type == "code" and "colab" in _tags(cell):
            index += 1                      # the workbook's Colab cell: the Colab version has its own
            continue
        cell = _clean(cell)
        if cell.cell_type == "markdown" and BADGE.search(cell.source):
            # The workbook's "Open in Colab" badge opens the workbook itself, solutions included.
            cell.source = BADGE.sub("", cell.source).replace("\n\n\n", "\n\n")
        out.append(cell)
        index += 1
    master = copy.deepcopy(notebook)
    master.cells = out
    return master, [q for *_, q in found]


# ------------------------------------------------------------------------------------------------
# The Colab version
# ------------------------------------------------------------------------------------------------

def colab_repository(table: dict | None = None) -> str:
    """What the Colab version clones: ``[colab] repository`` in points.toml, else pyproject.toml's Homepage.

    Any URL ``git clone`` takes (``https://github.com/<you>/<repo>``, ``file:///...``). The commit the
    clone is pinned to must be reachable there: push it before handing the notebooks out.
    """
    table = points_table() if table is None else table
    repository = table.get("colab", {}).get("repository", project_home.HOMEPAGE)
    if not isinstance(repository, str) or not repository.strip() or any(c in repository for c in "\n\"'{}"):
        raise ConventionError(f"{POINTS_TABLE.name}: [colab] repository is {repository!r}; it must be a URL git "
                              "clones, e.g. \"https://github.com/<you>/<repo>\"")
    return repository.strip()


def repository_origin(repository: str, table: dict | None = None, language: str = "en") -> str:
    """Where ``repository`` comes from, as ``make assignments`` and the Colab cell say it (in ``language``)."""
    table = points_table() if table is None else table
    _ = translator(language)
    if "repository" in table.get("colab", {}):
        return _("[colab] repository in {table}").format(table=POINTS_TABLE.name)
    if repository == project_home.HOMEPAGE:
        return _("pyproject.toml's Homepage; set [colab] repository in {table} to change it").format(table=POINTS_TABLE.name)
    return _("the repository this edition was built for")


def colab_cell(notebook_path: Path, tests: dict[str, str], repository: str | None = None,
               commit: str | None = None, language: str = "en") -> str:
    """The Colab version's first cell: the workbook at ``commit`` from ``repository``, then otter-grader and the tests.

    ``repository`` defaults to :func:`colab_repository` and ``commit`` to the full hash of ``HEAD``, the commit
    the autograder is built from; both are baked in, since nothing can be set on Colab before the cell runs.
    The clone is checked out at that commit; a clone that lacks it (a shallow one, or one made earlier)
    fetches it first. Its comments are in ``language``.
    """
    workbook = nbformat.read(notebook_path, as_version=4)
    own = [c for c in workbook.cells if c.cell_type == "code" and "colab" in _tags(c)]
    if len(own) != 1:
        raise ConventionError(f"{notebook_path.name}: expected one code cell tagged 'colab'; found {len(own)}")
    repository = colab_repository() if repository is None else repository
    commit = full_commit() if commit is None else commit
    if not re.fullmatch(r"[0-9a-f]{40}", commit):
        raise ConventionError(f"the Colab version pins the workbook to a commit: {commit!r} is not a full commit "
                              "hash (build the edition in a git clone of the workbook)")
    files = json.dumps(tests, indent=4)
    _ = translator(language)
    comment = {
        "first": _("# Run this cell first. On Colab it fetches the workbook at the commit this assignment was built from,\n"
                   "# installs gradlab and otter-grader, and puts this assignment's tests beside the notebook (elsewhere\n"
                   "# it writes the tests if they are missing).\n"),
        "commit": _("the autograder's"),
        "shallow": _("a shallow or older clone"),
        "helpers": _("the workbook's helper modules"),
        "otter": _("the version the autograder was built with"),
        "tests": _("where otter has put them (grading, the student folder), they stay"),
    }
    return (comment["first"] +
            "import os\nimport subprocess\nimport sys\n\n"
            'if "google.colab" in sys.modules or os.environ.get("GRADLAB_COLAB") == "1":\n'
            f"    repository = {json.dumps(repository)}   # {repository_origin(repository, language=language)}\n"
            f"    commit = {json.dumps(commit)}   # {comment['commit']}\n"
            '    git = ["git", "-C", "gradlab-workbook"]\n'
            '    if not os.path.isdir("gradlab-workbook"):\n'
            '        subprocess.run(["git", "clone", "-q", repository, "gradlab-workbook"], check=True)\n'
            '    if subprocess.run(git + ["cat-file", "-e", commit + "^{commit}"], capture_output=True).returncode:\n'
            f"        subprocess.run(git + [\"fetch\", \"-q\", \"origin\", commit], check=True)   # {comment['shallow']}\n"
            '    subprocess.run(git + ["-c", "advice.detachedHead=false", "checkout", "-q", commit], check=True)\n'
            '    %pip install -q "./gradlab-workbook[notebook]"\n'
            f'    sys.path.insert(0, os.path.abspath("gradlab-workbook/notebooks"))   # {comment["helpers"]}\n'
            f'    %pip install -q "otter-grader=={otter_version()}"   # {comment["otter"]}\n'
            f"if not os.path.isdir(\"tests\"):          # {comment['tests']}\n"
            "    os.makedirs(\"tests\")\n"
            f"    for name, text in {textwrap.indent(files, '    ').lstrip()}.items():\n"
            "        with open(os.path.join(\"tests\", name), \"w\") as test_file:\n"
            "            test_file.write(text)\n")


def colab_notebook(student: nbformat.NotebookNode, notebook_path: Path, tests: dict[str, str],
                   repository: str | None = None, commit: str | None = None,
                   language: str = "en") -> nbformat.NotebookNode:
    """The student notebook with the Colab cell first and otter opened without a notebook path."""
    colab = copy.deepcopy(student)
    init = [c for c in colab.cells if c.cell_type == "code" and re.search(r"^grader = otter\.Notebook\(", _source(c), re.M)]
    if len(init) != 1:
        raise ConventionError("the student notebook has no otter initialisation cell")
    # On Colab the notebook is not a file beside the kernel: otter reads the tests from ./tests.
    init[0].source = re.sub(r"otter\.Notebook\([^)]*\)", 'otter.Notebook(tests_dir="tests")', _source(init[0]))
    cell = nbformat.v4.new_code_cell(colab_cell(notebook_path, tests, repository, commit, language))
    cell.metadata["tags"] = ["colab"]
    colab.cells.insert(0, cell)
    return colab


# ------------------------------------------------------------------------------------------------
# Running otter assign
# ------------------------------------------------------------------------------------------------

def stage(path: Path, out: Path, held_out: int = 0, language: str = "en") -> tuple[Path, list[Question]]:
    """Writes ``out/<stem>/source/``: otter's source notebook with what it ships beside it."""
    master, questions = source_notebook(path, held_out, language)
    source = out / path.stem / "source"
    shutil.rmtree(out / path.stem, ignore_errors=True)
    source.mkdir(parents=True)
    ignore = shutil.ignore_patterns("__pycache__", "*.pyc", ".ipynb_checkpoints")
    copy_helpers(source, language)
    shutil.copytree(ROOT / "gradlab", source / "gradlab", ignore=ignore)
    (source / "requirements.txt").write_text(runtime_requirements())
    master_path = source / path.name
    nbformat.write(master, master_path)
    return master_path, questions


def sha256(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def grader_copy(path: Path, result: Path, questions: list[Question], held_out: int, language: str = "en",
                placeholder: str = PLACEHOLDER) -> Path:
    """Writes ``grader/``: what ``make grade`` grades with, and ``manifest.json``, its files' SHA-256.

    The notebook as handed out (its lesson cells run; only the answer cells come from a submission),
    the check modules and the helpers, and ``questions.json`` (each exercise's checks, the names they
    read, its points, whether held-out cases decide it; the written questions; the seed; the notebook's language
    and the placeholder of a written answer left blank).
    """
    grader = result / "grader"
    shutil.rmtree(grader, ignore_errors=True)
    grader.mkdir()
    shutil.copy2(result / "student" / path.name, grader / path.name)
    copy_helpers(grader / "files", language)
    spec = {"notebook": path.name, "seed": held_out, "commit": commit(), "language": language, "placeholder": placeholder,
            "questions": [{"name": q.name, "number": q.number, "module": q.module, "checks": q.checks,
                           "params": q.params, "points": q.points, "hidden": q.hidden} for q in questions],
            "written": [{"name": w["name"], "points": w["points"], "after": w["after"]}
                        for w in written_questions(path.stem)]}
    (grader / "questions.json").write_text(json.dumps(spec, indent=1) + "\n")
    files = sorted(p for p in grader.rglob("*") if p.is_file())
    manifest = {p.relative_to(grader).as_posix(): sha256(p) for p in files}
    (grader / "manifest.json").write_text(json.dumps(manifest, indent=1, sort_keys=True) + "\n")
    (result / "grader-manifest.sha256").write_text(sha256(grader / "manifest.json") + "\n")   # make grade checks it
    return grader


def localize(path: Path, language: str) -> str:
    """Puts otter's own English in the notebook at ``path`` (student's, solutions) into ``language``; returns the
    written answers' placeholder."""
    _ = translator(language)
    placeholder = _("_Type your answer here, replacing this text._")
    if language == "en":
        return placeholder
    notebook = nbformat.read(path, as_version=4)
    for cell in notebook.cells:
        if cell.cell_type == "code" and cell.source.startswith(OTTER_INIT_COMMENT + "\n"):
            cell.source = "# " + _("Initialize Otter") + cell.source[len(OTTER_INIT_COMMENT):]
        elif cell.cell_type == "markdown" and cell.source.strip() == PLACEHOLDER:
            cell.source = placeholder
    nbformat.write(notebook, path)
    return placeholder


def assign(path: Path, out: Path, run_tests: bool = False, held_out: int | None = None,
           repository: str | None = None, language: str = "en") -> dict[str, Path]:
    """Generates every version of one notebook into ``out/<stem>/``; returns their paths.

    ``repository``: what the Colab version clones (default: :func:`colab_repository`, from points.toml).
    ``language``: the notebook's (``path`` is then ``notebooks/zh/NN_name.ipynb`` for ``"zh_CN"``).
    """
    from otter.assign import main as otter_assign

    held_out = seed() if held_out is None else held_out
    master, questions = stage(path, out, held_out, language)
    result = out / path.stem
    otter_assign(str(master), str(result), no_pdfs=True, no_run_tests=not run_tests)
    zips = sorted((result / "autograder").glob(f"{path.stem}-autograder_*.zip"))
    if len(zips) != 1:
        raise SystemExit(f"otter assign left {len(zips)} autograder zips in {result / 'autograder'}")
    zip_path = zips[0].rename(result / "autograder" / f"{path.stem}-autograder.zip")
    student_path = result / "student" / path.name
    placeholder = localize(student_path, language)
    localize(result / "autograder" / path.name, language)
    student = nbformat.read(student_path, as_version=4)
    tests = {p.name: p.read_text() for p in sorted((result / "student" / "tests").glob("*.py"))}
    (result / "colab").mkdir()
    colab_path = result / "colab" / path.name
    nbformat.write(colab_notebook(student, path, tests, repository, full_commit(), language), colab_path)
    grader = grader_copy(path, result, questions, held_out, language, placeholder)
    return {"source": master, "student": student_path, "colab": colab_path,
            "solutions": result / "autograder" / path.name, "autograder": zip_path, "grader": grader}


def full_commit() -> str:
    """The full hash of ``HEAD``: the commit the edition is built from, which the Colab version checks out."""
    try:
        return subprocess.run(["git", "rev-parse", "HEAD"], cwd=ROOT, capture_output=True, text=True,
                              check=True).stdout.strip()
    except (OSError, subprocess.CalledProcessError) as error:
        raise ConventionError("the Colab version pins the workbook to the commit the edition is built from: "
                              "build it in a git clone of the workbook") from error


def uncommitted() -> list[str]:
    """The changed or new files of the working tree (what the Colab version's commit lacks), as git lists them."""
    try:
        status = subprocess.run(["git", "status", "--porcelain", "--untracked-files=normal"], cwd=ROOT,
                                capture_output=True, text=True, check=True).stdout
    except (OSError, subprocess.CalledProcessError):
        return []
    return [line[3:] for line in status.splitlines() if line.strip()]


def commit() -> str:
    try:
        return subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=ROOT, capture_output=True,
                              text=True, check=True).stdout.strip()
    except (OSError, subprocess.CalledProcessError):
        return "unknown"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("notebooks", nargs="*", help="notebook stems (default: every notebook)")
    parser.add_argument("--out", type=Path, default=OUT)
    parser.add_argument("--run-tests", action="store_true", help="let otter assign run the tests on each solutions notebook")
    parser.add_argument("--language", choices=["all", *LANGUAGES], default="all",
                        help="the edition(s) to build: English into OUT/NN_name, Chinese (zh_CN) into OUT/zh/NN_name")
    args = parser.parse_args(argv)
    languages = list(LANGUAGES) if args.language == "all" else [args.language]
    jobs = []                                    # (notebook, language, output folder)
    for language in languages:
        paths = sorted(notebooks_folder(language).glob("*.ipynb"))
        if args.notebooks:
            wanted = {Path(n).stem for n in args.notebooks}
            paths = [p for p in paths if p.stem in wanted]
            if len(paths) != len(wanted):
                raise SystemExit(f"no such notebook(s) in {notebooks_folder(language).relative_to(ROOT)}: "
                                 f"{sorted(wanted - {p.stem for p in paths})}")
        jobs += [(path, language, args.out / LANGUAGES[language]) for path in paths]
    logging.getLogger("otter").setLevel(logging.WARNING)
    args.out.mkdir(parents=True, exist_ok=True)
    started = time.monotonic()
    held_out = seed()
    repository = colab_repository()
    print(f"The Colab version clones {repository} at commit {full_commit()[:12]} ({repository_origin(repository)}); "
          "push that commit there before handing it out.")
    changed = uncommitted()
    if changed:
        print(f"warning: {len(changed)} file(s) differ from that commit ({', '.join(changed[:3])}"
              f"{', ...' if len(changed) > 3 else ''}): the Colab version runs the commit, not your working tree.")
    for path, language, out in jobs:
        began = time.monotonic()
        try:
            assign(path, out, run_tests=args.run_tests, held_out=held_out, repository=repository, language=language)
        except ConventionError as error:
            raise SystemExit(f"{error}\n(the instructor edition is generated from the workbook's exercise conventions: "
                             "see tools/assignments/make_assignments.py)") from error
        where = (out / path.stem).relative_to(args.out).as_posix()
        print(f"{where}: student, colab, autograder, grader in {time.monotonic() - began:.1f} s; grader "
              f"manifest SHA-256 {sha256(out / path.stem / 'grader' / 'manifest.json')}")
    (args.out / "README.md").write_text(
        f"# gradlab · instructor edition (otter-grader {otter_version()}), generated from commit {commit()}\n\n"
        "Per notebook: `student/` (hand out the folder), `colab/` (the Colab-ready student notebook),\n"
        "`autograder/` (the solutions notebook and `NN_name-autograder.zip` for `otter run` / `otter grade`),\n"
        "`source/` (otter's source notebook), `grader/` (what `make grade` grades with, and its manifest).\n"
        "`zh/NN_name/`: the same, built from the Chinese notebooks (notebooks/zh/).\n"
        "See docs/instructors.md.\n")
    print(f"{len(jobs)} assignment(s) in {args.out} ({time.monotonic() - started:.0f} s)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
