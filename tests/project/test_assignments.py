"""The instructor edition (`make assignments`, tools/assignments/) has the right structure for every notebook.

Without otter-grader: every notebook converts, each question has a prompt, a starter, a solution and
a test, and the student's answer cell is the workbook's exercise cell as it stands. With otter-grader
installed (`make assignments` installs it; `make test-assignments` runs this file then): otter assign
runs on every notebook, and no student notebook holds a ``_solution`` name or a line of solution
code, and the Colab version's first cell installs what it needs. No grading here: `make
test-assignments` grades a sample with `otter run`.
"""
from __future__ import annotations

import ast
import importlib.util
import re
import sys
import zipfile
from pathlib import Path

import nbformat
import pytest

ROOT = Path(__file__).resolve().parents[2]
_spec = importlib.util.spec_from_file_location("make_assignments", ROOT / "tools" / "assignments" / "make_assignments.py")
edition = sys.modules.setdefault("make_assignments", importlib.util.module_from_spec(_spec))
_spec.loader.exec_module(edition)
NOTEBOOKS = sorted((ROOT / "notebooks").glob("*.ipynb"))


def _tags(cell) -> list[str]:
    return cell.get("metadata", {}).get("tags", [])


def _solution_lines(path: Path) -> set[str]:
    """Lines of the workbook's solution cells that appear in no other code cell of the notebook."""
    notebook = nbformat.read(path, as_version=4)
    code = [c for c in notebook.cells if c.cell_type == "code"]
    elsewhere = {line.strip() for c in code if "solution" not in _tags(c) for line in c.source.splitlines()}
    lines = set()
    for cell in code:
        if "solution" in _tags(cell):
            for line in cell.source.splitlines():
                text = line.strip()
                if text and not text.startswith("#") and text not in elsewhere:
                    lines.add(text)
    return lines


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.stem)
def test_every_exercise_becomes_a_question_with_a_prompt_a_solution_and_a_test(path):
    notebook = nbformat.read(path, as_version=4)
    exercise_cells = [c.source for c in notebook.cells if c.cell_type == "code" and "exercise" in _tags(c)]
    master, questions = edition.source_notebook(path)
    assert [q.number for q in questions] == list(range(1, len(exercise_cells) + 1)) and len(questions) >= 2
    for question, exercise in zip(questions, exercise_cells):
        assert re.match(rf"(#+ |\*\*)Exercise {question.number}\b", question.prompt[0]), question.prompt[0][:80]
        assert question.answer(question.starter) == exercise, "the student must get the workbook's exercise cell"
        assert question.starter.strip() and question.solution.strip()
        assert "_solution" not in question.solution and ".confirm(" not in question.solution
        assert question.solution.startswith("# Solution")
        solved = set().union(*(edition.bound_names(node) for node, _ in edition._statements(question.solution)))
        learner = set().union(*(edition.bound_names(node) for node, _ in edition._statements(question.starter)))
        assert learner <= solved, f"exercise {question.number}: the solution leaves {learner - solved} undefined"
        test = ast.parse(question.test())
        assert len(test.body) == 1 and isinstance(test.body[0], ast.FunctionDef)   # otter's exception-based format
        assert question.test().count("assert passed, shown.getvalue().strip()") == len(question.checks) >= 1
        assert [c for c in question.checks if c.startswith(f"check_exercise_{question.number}(")] == question.checks
    sources = [c.source for c in master.cells]
    assert sources[0].startswith("# ASSIGNMENT CONFIG") and master.cells[0].cell_type == "raw"
    for marker in ("BEGIN QUESTION", "END QUESTION", "BEGIN SOLUTION", "END SOLUTION", "BEGIN TESTS", "END TESTS"):
        assert sum(s.startswith(f"# {marker}") for s in sources) == len(questions), marker
    assert not any("colab" in _tags(c) for c in master.cells), "the workbook's Colab cell stays out of the edition"
    assert "colab.research.google.com/assets/colab-badge" not in "".join(sources), "the badge opens the workbook's solutions"
    assert all(c.outputs == [] for c in master.cells if c.cell_type == "code")


def _notebook(tmp_path, exercise_1: str, solution_1: str) -> Path:
    """A two-exercise notebook in the workbook's conventions (exercise 1 as given, exercise 2 plain)."""
    def code(source, tag):
        cell = nbformat.v4.new_code_cell(source)
        cell.metadata["tags"] = [tag]
        return cell
    cells = [nbformat.v4.new_markdown_cell("# 99 · A test\n\n## Exercises\n\n### Exercise 1 · One\n\nDo one."),
             code(exercise_1, "exercise"),
             nbformat.v4.new_markdown_cell("**Solution** (click to expand the hidden cell below)."),
             code(solution_1, "solution"),
             nbformat.v4.new_markdown_cell("**Exercise 2 · Two.** Predict a number."),
             code("answer = None\n\ncheck_exercise_2(answer)\n", "exercise"),
             code("# Solution to exercise 2\nanswer_solution = 2.0\n\ncheck_exercise_2.confirm(answer_solution)\n", "solution")]
    path = tmp_path / "99_test.ipynb"
    nbformat.write(nbformat.v4.new_notebook(cells=cells), path)
    return path


def test_a_colab_form_title_a_solution_class_and_given_code_convert(tmp_path):
    exercise = ("from exercises.test import check_exercise_1, check_exercise_2\n\n\n"
                "def given(x):\n    return x\n\n\n"
                "def build(x):\n    return given(x)        # change this\n\n"
                "check_exercise_1(build, data[:2])\n")
    solution = ("# @title Solution to exercise 1\n"
                "class ScaleSolution:\n    pass\n\n\n"
                "def build_solution(x):\n    return ScaleSolution(), given(x)\n\n"
                "check_exercise_1.confirm(build_solution, data[:2])\n")
    _, found = edition.read_questions(_notebook(tmp_path, exercise, solution))
    first, second = (q for *_, q in found)
    assert first.head.endswith("def given(x):\n    return x\n\n\n") and first.starter.startswith("def build(x):")
    assert first.tail == "check_exercise_1(build, data[:2])\n" and first.answer(first.starter) == exercise
    assert first.solution == ("# Solution to exercise 1\nclass Scale:\n    pass\n\n\n"
                              "def build(x):\n    return Scale(), given(x)\n")
    assert first.params == ["build", "data"] and first.module == second.module == "exercises.test"
    assert second.prompt == ["**Exercise 2 · Two.** Predict a number."] and second.solution.endswith("answer = 2.0\n")
    assert "from exercises.test import check_exercise_2" in second.test()


@pytest.mark.parametrize("exercise, solution, message", [
    ("def build(x):\n    return x\n\nGIVEN = 1\n\n\ndef other(x):\n    return x\n\ncheck_exercise_1(build)\n",
     "# Solution to exercise 1\ndef build_solution(x):\n    return 2 * x\n\n\ndef other_solution(x):\n    return x\n\n"
     "check_exercise_1.confirm(build_solution)\n", "move it above them"),
    ("def build(x):\n    return x\n\ncheck_exercise_1(build)\n",
     "# Solution to exercise 1\ndef build_solution(x):\n    return 2 * x\n", "must end with check_exercise_1.confirm"),
    ("def build(x):\n    return x\n\ncheck_exercise_1(build)\n",
     "def build_solution(x):\n    return 2 * x\n\ncheck_exercise_1.confirm(build_solution)\n", "starts with '# Solution"),
    ("def build(x):\n    return x\n\ncheck_exercise_1(build)\n",
     "# Solution to exercise 1\ndef rebuilt_solution(x):\n    return 2 * x\n\ncheck_exercise_1.confirm(rebuilt_solution)\n",
     "defines none of the names"),
])
def test_an_exercise_that_cannot_be_converted_says_what_to_change(tmp_path, exercise, solution, message):
    exercise = "from exercises.test import check_exercise_1, check_exercise_2\n\n" + exercise
    with pytest.raises(edition.ConventionError, match=re.escape(message)):
        edition.read_questions(_notebook(tmp_path, exercise, solution))


def test_a_module_only_the_colab_cell_imports_is_refused(tmp_path):
    """The edition drops the workbook's Colab cell: a notebook must import what it uses itself."""
    path = _notebook(tmp_path, "from exercises.test import check_exercise_1, check_exercise_2\n\n"
                               "x = os.getcwd()\ncheck_exercise_1(x)\n", "# Solution to exercise 1\nx_solution = 1\n"
                               "check_exercise_1.confirm(x_solution)\n")
    notebook = nbformat.read(path, as_version=4)
    colab = nbformat.v4.new_code_cell("# @title Colab only: set up\nimport os\nimport sys")
    colab.metadata["tags"] = ["colab"]
    notebook.cells.insert(0, colab)
    nbformat.write(notebook, path)
    with pytest.raises(edition.ConventionError, match=re.escape("uses ['os'] but only its Colab cell imports them")):
        edition.source_notebook(path)


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.stem)
def test_the_colab_version_clones_the_workbook_from_its_home_in_pyproject(path):
    source = edition.colab_cell(path, {})
    assert f'os.environ.get("GRADLAB_REPO", "{edition.project_home.HOMEPAGE}")' in source
    assert "!git clone -q {repo} gradlab-workbook" in source


def test_a_colab_cell_that_clones_another_home_is_refused(tmp_path):
    notebook = nbformat.read(NOTEBOOKS[0], as_version=4)
    colab = next(c for c in notebook.cells if "colab" in _tags(c))
    colab.source = colab.source.replace(edition.project_home.HOMEPAGE, "https://github.com/someone/elsewhere")
    path = tmp_path / NOTEBOOKS[0].name
    nbformat.write(notebook, path)
    refusal = "clones https://github.com/someone/elsewhere, not pyproject.toml's Homepage"
    with pytest.raises(edition.ConventionError, match=refusal):
        edition.colab_cell(path, {})


def test_the_grading_tool_is_pinned_and_installed_constrained_by_the_workbook_pins():
    pins = [line for line in edition.TOOL_REQUIREMENTS.read_text().splitlines() if line and not line.startswith("#")]
    assert pins == [f"otter-grader=={edition.otter_version()}"]
    # How make installs it and that CI grades the sample: tests/project/test_ci.py (run with stubs).


# ------------------------------------------------------------------------------------------------
# otter assign's output (skipped where otter-grader is not installed: before `make assignments`)
# ------------------------------------------------------------------------------------------------

@pytest.fixture(scope="module")
def generated(tmp_path_factory):
    pytest.importorskip("otter", reason="otter-grader is installed by make assignments")
    out = tmp_path_factory.mktemp("assignments")
    return {path.stem: edition.assign(path, out) for path in NOTEBOOKS}


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.stem)
def test_student_notebook_has_the_starter_code_and_no_solution(generated, path):
    versions = generated[path.stem]
    _, questions = edition.source_notebook(path)
    solution_lines = _solution_lines(path)
    for kind in ("student", "colab"):
        text = versions[kind].read_text()
        assert "_solution" not in text, f"{kind}: a _solution name"
        notebook = nbformat.read(versions[kind], as_version=4)
        assert not any("solution" in _tags(c) or "otter_assign_solution_cell" in _tags(c) for c in notebook.cells)
        answers = [c.source for c in notebook.cells if "otter_answer_cell" in _tags(c)]
        assert answers == [q.answer(q.starter) for q in questions]
        code = [line.strip() for c in notebook.cells if c.cell_type == "code" for line in c.source.splitlines()]
        leaked = solution_lines & set(code)
        assert not leaked, f"{kind}: solution code in the student notebook: {sorted(leaked)}"
        assert not any(c.get("outputs") for c in notebook.cells if c.cell_type == "code")
        checks = [c.source for c in notebook.cells if c.source.startswith("grader.check(")]
        assert checks == [f'grader.check("{q.name}")' for q in questions]
    student_dir = versions["student"].parent
    for helper in ("workbook.py", f"{questions[0].module.replace('.', '/')}.py"):
        assert (student_dir / helper).is_file(), f"the student folder lacks {helper}"
    for question in questions:
        test = ast.parse((student_dir / "tests" / f"{question.name}.py").read_text())
        functions = [node for node in test.body if isinstance(node, ast.FunctionDef)]
        assert len(functions) == 1 and functions[0].decorator_list, "one test case, decorated by otter's @test_case"
        functions[0].decorator_list = []
        assert ast.dump(functions[0]) == ast.dump(ast.parse(question.test()).body[0])
        assert f"points = {edition.POINTS}" in ast.unparse(test)


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.stem)
def test_solutions_notebook_and_autograder_zip(generated, path):
    versions = generated[path.stem]
    _, questions = edition.source_notebook(path)
    cells = [c.source for c in nbformat.read(versions["solutions"], as_version=4).cells]
    for question in questions:
        assert any(question.solution.rstrip() in cell for cell in cells), f"exercise {question.number}'s solution"
    with zipfile.ZipFile(versions["autograder"]) as archive:
        names = set(archive.namelist())
        assert {f"tests/{q.name}.py" for q in questions} <= names
        assert {"files/workbook.py", f"files/{questions[0].module.replace('.', '/')}.py", "files/gradlab/__init__.py",
                "environment.yml", "otter_config.json"} <= names
        environment = archive.read("environment.yml").decode()
    # otter grade's Docker image: otter-grader and the workbook's pins of what the notebooks import.
    pins = [line.strip().removeprefix("- ") for line in environment.splitlines()]
    assert f"otter-grader[grading,plugins]=={edition.otter_version()}" in pins
    assert {line for line in edition.runtime_requirements().splitlines() if "==" in line} <= set(pins)


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.stem)
def test_colab_version_installs_what_it_needs_in_its_first_cell(generated, path):
    versions = generated[path.stem]
    colab = nbformat.read(versions["colab"], as_version=4)
    first = colab.cells[0]
    assert first.cell_type == "code" and "colab" in _tags(first)
    source = first.source
    for needed in ("!git clone -q {repo} gradlab-workbook", '%pip install -q "./gradlab-workbook[notebook]"',
                   'sys.path.insert(0, os.path.abspath("gradlab-workbook/notebooks"))',
                   f'%pip install -q "otter-grader=={edition.otter_version()}"'):
        assert needed in source, f"the Colab cell lacks {needed!r}"
    # It writes the student version's tests (otter on Colab reads them from ./tests).
    tests = {p.name: p.read_text() for p in sorted((versions["student"].parent / "tests").glob("*.py"))}
    literal = re.search(r"for name, text in (\{.*?\n    \})\.items\(\):", source, re.S).group(1)
    assert ast.literal_eval(literal) == tests
    assert colab.cells[1].source.endswith('grader = otter.Notebook(tests_dir="tests")')
    assert colab.cells[2].source.startswith(f"# {path.stem[:2]} · ")
