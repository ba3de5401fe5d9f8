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
import json
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
sys.path.insert(0, str(ROOT / "tools" / "assignments"))
import grade  # noqa: E402  (make grade: tools/assignments/grade.py)
import grade_sample  # noqa: E402
NOTEBOOKS = sorted((ROOT / "notebooks").glob("*.ipynb"))
#: Every notebook of every edition, as (path, language): the English, then the Chinese (notebooks/zh/).
EDITIONS = [(path, language) for language in edition.LANGUAGES
            for path in sorted(edition.notebooks_folder(language).glob("*.ipynb"))]
ZH_CN = "zh_CN"
CJK = re.compile(r"[\u3400-\u9fff\uf900-\uff5f]")


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


def _id(value) -> str:
    return value.stem if isinstance(value, Path) else value


@pytest.mark.parametrize("path, language", EDITIONS, ids=lambda v: _id(v))
def test_every_exercise_becomes_a_question_with_a_prompt_a_solution_and_a_test(path, language):
    notebook = nbformat.read(path, as_version=4)
    exercise_cells = [c.source for c in notebook.cells if c.cell_type == "code" and "exercise" in _tags(c)]
    master, questions = edition.source_notebook(path, language=language)
    word = edition.edition_words(language)[0]
    assert [q.number for q in questions] == list(range(1, len(exercise_cells) + 1)) and len(questions) >= 2
    for question, exercise in zip(questions, exercise_cells):
        assert re.match(rf"(#+ |\*\*){word} {question.number}\b", question.prompt[0]), question.prompt[0][:80]
        assert question.answer(question.starter) == exercise, "the student must get the workbook's exercise cell"
        assert question.starter.strip() and question.solution.strip()
        assert "_solution" not in question.solution and ".confirm(" not in question.solution
        assert question.solution.startswith("# Solution")
        solved = set().union(*(edition.bound_names(node) for node, _ in edition._statements(question.solution)))
        learner = set().union(*(edition.bound_names(node) for node, _ in edition._statements(question.starter)))
        assert learner <= solved, f"exercise {question.number}: the solution leaves {learner - solved} undefined"
        test = ast.parse(question.test())
        assert len(test.body) == 1 and isinstance(test.body[0], ast.FunctionDef)   # otter's exception-based format
        assert question.test().count("raise AssertionError(shown.getvalue().strip())") == len(question.checks) >= 1
        assert ("seed=7" in question.hidden_test(7)) and "seed=" not in question.test()
        assert [c for c in question.checks if c.startswith(f"check_exercise_{question.number}(")] == question.checks
    sources = [c.source for c in master.cells]
    assert sources[0].startswith("# ASSIGNMENT CONFIG") and master.cells[0].cell_type == "raw"
    written = len(edition.written_questions(path.stem))             # manual questions: no tests
    for marker in ("BEGIN QUESTION", "END QUESTION", "BEGIN SOLUTION", "END SOLUTION", "BEGIN TESTS", "END TESTS"):
        assert sum(s.startswith(f"# {marker}") for s in sources) == len(questions) + ("TESTS" not in marker) * written, marker
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


_SHA = "0123456789abcdef0123456789abcdef01234567"


def test_the_colab_version_clones_the_configured_repository_at_the_autograders_commit():
    """points.toml's [colab] repository (default: pyproject's Homepage) and the commit, baked into the cell."""
    assert edition.colab_repository({}) == edition.project_home.HOMEPAGE
    assert edition.colab_repository() == edition.points_table().get("colab", {}).get(
        "repository", edition.project_home.HOMEPAGE)
    source = edition.colab_cell(NOTEBOOKS[0], {}, repository=edition.colab_repository({}), commit=_SHA)
    assert f'repository = "{edition.project_home.HOMEPAGE}"' in source and f'commit = "{_SHA}"' in source
    assert "GRADLAB_REPO" not in source                       # nothing can be set on Colab before the cell runs
    ours = edition.colab_repository({"colab": {"repository": "https://github.com/someone/course-copy"}})
    other = edition.colab_cell(NOTEBOOKS[0], {}, repository=ours, commit=_SHA[::-1])
    assert 'repository = "https://github.com/someone/course-copy"' in other and f'commit = "{_SHA[::-1]}"' in other
    assert edition.project_home.HOMEPAGE not in other
    assert f'commit = "{edition.full_commit()}"' in edition.colab_cell(NOTEBOOKS[0], {})    # default: HEAD
    for bad in ("", 'x"; import os', 3):
        with pytest.raises(edition.ConventionError, match=r"\[colab\] repository"):
            edition.colab_repository({"colab": {"repository": bad}})
    with pytest.raises(edition.ConventionError, match="not a full commit hash"):
        edition.colab_cell(NOTEBOOKS[0], {}, commit="HEAD")
    # make assignments and the cell's comment say where the URL comes from.
    assert edition.repository_origin(edition.project_home.HOMEPAGE, {}) == (
        "pyproject.toml's Homepage; set [colab] repository in points.toml to change it")
    assert edition.repository_origin(ours, {"colab": {"repository": ours}}) == "[colab] repository in points.toml"
    assert f"# {edition.repository_origin(edition.colab_repository())}\n" in edition.colab_cell(NOTEBOOKS[0], {}, commit=_SHA)


def _git(*args, cwd=None) -> str:
    import subprocess
    return subprocess.run(["git", "-c", "user.name=t", "-c", "user.email=t@t.invalid", *args], cwd=cwd, check=True,
                          capture_output=True, text=True).stdout.strip()


def _run_colab_cell(source: str, where: Path, monkeypatch) -> list[str]:
    """Runs a Colab cell as IPython would, with GRADLAB_COLAB=1 in ``where``; its %pip lines are recorded, not run."""
    from IPython.core.inputtransformer2 import TransformerManager
    magics: list[str] = []

    class Shell:
        def run_line_magic(self, name, line, *rest):
            magics.append(f"%{name} {line}")

        def system(self, command):
            raise AssertionError(f"the cell runs git through subprocess, not !{command}")
    monkeypatch.setenv("GRADLAB_COLAB", "1")
    monkeypatch.chdir(where)
    monkeypatch.setattr(sys, "path", list(sys.path))
    exec(TransformerManager().transform_cell(source), {"get_ipython": lambda: Shell()})
    return magics


def test_the_colab_cell_checks_out_the_commit_also_from_a_shallow_clone(tmp_path, monkeypatch):
    """A repository with two commits, the cell pinned to the first: a fresh clone and a shallow one end there."""
    work = tmp_path / "work"
    work.mkdir()
    _git("init", "-q", "-b", "main", cwd=work)
    (work / "version.txt").write_text("first\n")
    _git("add", ".", cwd=work)
    _git("commit", "-q", "-m", "first", cwd=work)
    first = _git("rev-parse", "HEAD", cwd=work)
    (work / "version.txt").write_text("second\n")
    _git("commit", "-q", "-am", "second", cwd=work)
    _git("clone", "-q", "--bare", str(work), str(tmp_path / "course.git"))
    url = (tmp_path / "course.git").as_uri()
    source = edition.colab_cell(NOTEBOOKS[0], {"q.py": "x = 1\n"}, repository=url, commit=first)
    for name, shallow in (("fresh", False), ("shallow", True)):
        student = tmp_path / name
        student.mkdir()
        if shallow:                                  # a clone made before, of the newest commit only
            _git("clone", "-q", "--depth", "1", url, str(student / "gradlab-workbook"))
            assert _git("rev-parse", "HEAD", cwd=student / "gradlab-workbook") != first
        magics = _run_colab_cell(source, student, monkeypatch)
        assert _git("rev-parse", "HEAD", cwd=student / "gradlab-workbook") == first, name
        assert (student / "gradlab-workbook" / "version.txt").read_text() == "first\n"
        assert magics[0] == '%pip install -q "./gradlab-workbook[notebook]"'
        assert (student / "tests" / "q.py").read_text() == "x = 1\n"


@pytest.mark.skipif(not (ROOT / ".git").exists(), reason="needs the workbook's git repository")
def test_the_generated_colab_cell_fetches_this_workbook_from_a_local_bare_clone(tmp_path, monkeypatch):
    """The proof on the workbook itself: its bare clone as the repository (file://), HEAD as the commit."""
    head = edition.full_commit()
    _git("clone", "-q", "--bare", str(ROOT), str(tmp_path / "workbook.git"))
    source = edition.colab_cell(NOTEBOOKS[0], {}, repository=(tmp_path / "workbook.git").as_uri())
    student = tmp_path / "student"
    student.mkdir()
    _run_colab_cell(source, student, monkeypatch)
    assert _git("rev-parse", "HEAD", cwd=student / "gradlab-workbook") == head
    assert (student / "gradlab-workbook" / "notebooks" / NOTEBOOKS[0].name).is_file()


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
    return {(path.stem, language): edition.assign(path, out / edition.LANGUAGES[language], language=language)
            for path, language in EDITIONS}


@pytest.mark.parametrize("path, language", EDITIONS, ids=lambda v: _id(v))
def test_student_notebook_has_the_starter_code_and_no_solution(generated, path, language):
    versions = generated[path.stem, language]
    _, questions = edition.source_notebook(path, language=language)
    solution_lines = _solution_lines(path)
    for kind in ("student", "colab"):
        text = versions[kind].read_text()
        assert "_solution" not in text, f"{kind}: a _solution name"
        notebook = nbformat.read(versions[kind], as_version=4)
        assert not any("solution" in _tags(c) or "otter_assign_solution_cell" in _tags(c) for c in notebook.cells)
        answers = [c.source for c in notebook.cells if c.cell_type == "code" and "otter_answer_cell" in _tags(c)]
        assert answers == [q.answer(q.starter) for q in questions]
        written = [c.source for c in notebook.cells if c.cell_type == "markdown" and "otter_answer_cell" in _tags(c)]
        assert len(written) == len(edition.written_questions(path.stem))     # where a written answer goes
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
        assert f"points = {edition._points(question.points)}" in ast.unparse(test)


@pytest.mark.parametrize("path, language", EDITIONS, ids=lambda v: _id(v))
def test_solutions_notebook_and_autograder_zip(generated, path, language):
    versions = generated[path.stem, language]
    _, questions = edition.source_notebook(path, language=language)
    cells = [c.source for c in nbformat.read(versions["solutions"], as_version=4).cells]
    for question in questions:
        assert any(question.solution.rstrip() in cell for cell in cells), f"exercise {question.number}'s solution"
    with zipfile.ZipFile(versions["autograder"]) as archive:
        names = set(archive.namelist())
        assert {f"tests/{q.name}.py" for q in questions} <= names
        assert {"files/workbook.py", f"files/{questions[0].module.replace('.', '/')}.py", "files/gradlab/__init__.py",
                "environment.yml", "otter_config.json"} <= names
        environment = archive.read("environment.yml").decode()
        for question in questions:       # the held-out cases are otter's hidden tests, in the zip only
            test = archive.read(f"tests/{question.name}.py").decode()
            assert ("hidden=True" in test) == question.hidden and ("seed=" in test) == question.hidden
    student_tests = (versions["student"].parent / "tests").glob("*.py")
    assert not any("hidden=True" in p.read_text() or "seed=" in p.read_text() for p in student_tests)
    # make grade's copy: every file as its manifest says, the questions as the edition reads them.
    grader = grade.load_grader(versions["grader"])
    assert [(q["name"], q["checks"], q["points"], q["hidden"]) for q in grader["spec"]["questions"]] == [
        (q.name, q.checks, q.points, q.hidden) for q in questions]
    assert grader["notebook"].cells == nbformat.read(versions["student"], as_version=4).cells
    # otter grade's Docker image: otter-grader and the workbook's pins of what the notebooks import.
    pins = [line.strip().removeprefix("- ") for line in environment.splitlines()]
    assert f"otter-grader[grading,plugins]=={edition.otter_version()}" in pins
    assert {line for line in edition.runtime_requirements().splitlines() if "==" in line} <= set(pins)


@pytest.mark.parametrize("path, language", EDITIONS, ids=lambda v: _id(v))
def test_colab_version_installs_what_it_needs_in_its_first_cell(generated, path, language):
    versions = generated[path.stem, language]
    colab = nbformat.read(versions["colab"], as_version=4)
    first = colab.cells[0]
    assert first.cell_type == "code" and "colab" in _tags(first)
    source = first.source
    for needed in ('subprocess.run(["git", "clone", "-q", repository, "gradlab-workbook"], check=True)',
                   f'repository = "{edition.colab_repository()}"', f'commit = "{edition.full_commit()}"',
                   '"checkout", "-q", commit], check=True)', '%pip install -q "./gradlab-workbook[notebook]"',
                   'sys.path.insert(0, os.path.abspath("gradlab-workbook/notebooks"))',
                   f'%pip install -q "otter-grader=={edition.otter_version()}"'):
        assert needed in source, f"the Colab cell lacks {needed!r}"
    # It writes the student version's tests (otter on Colab reads them from ./tests).
    tests = {p.name: p.read_text() for p in sorted((versions["student"].parent / "tests").glob("*.py"))}
    literal = re.search(r"for name, text in (\{.*?\n    \})\.items\(\):", source, re.S).group(1)
    assert ast.literal_eval(literal) == tests
    assert colab.cells[1].source.endswith('grader = otter.Notebook(tests_dir="tests")')
    assert colab.cells[2].source.startswith(f"# {path.stem[:2]} · ")


def _prose(markdown: str) -> str:
    """What a student reads as words (tests/project/test_i18n.py's reading): no code, maths, tags or cited pages."""
    text = re.sub(r"```.*?```", " ", markdown, flags=re.S)
    text = re.sub(r"`[^`]*`", " ", text)
    text = re.sub(r"\$\$.*?\$\$|\$[^$]*\$", " ", text, flags=re.S)
    text = re.sub(r"\[([^\]]*)\]\((?:https?:)[^)]*\)", " ", text)
    text = re.sub(r"\]\([^)]*\)", "]", text)
    return re.sub(r"<[^>]+>", " ", text)


def _reads_as_chinese(text: str) -> bool:
    """At least half CJK among its letters (test_i18n.py's heuristic)."""
    cjk, latin = len(CJK.findall(text)), len(re.findall(r"[A-Za-z]", text))
    return cjk > 0 and cjk / (cjk + latin) >= 0.5


@pytest.mark.parametrize("path", [p for p, language in EDITIONS if language == ZH_CN], ids=lambda p: p.stem)
def test_the_chinese_edition_leaves_no_english_prompt_and_keeps_the_setup_line(generated, path):
    """What the generator and otter write into a Chinese student's notebook is Chinese; the setup chooses zh_CN."""
    versions = generated[path.stem, ZH_CN]
    setup = 'workbook.setup(language="zh_CN")'
    lesson_code = {c.source for c in nbformat.read(path, as_version=4).cells if c.cell_type == "code"}
    for kind in ("student", "colab", "solutions"):
        notebook = nbformat.read(versions[kind], as_version=4)
        for cell in notebook.cells:
            if cell.cell_type == "markdown":
                text = _prose(cell.source.replace("<!-- BEGIN QUESTION -->", "").replace("<!-- END QUESTION -->", ""))
                assert not text.strip() or _reads_as_chinese(text), f"{kind}: English Markdown: {cell.source[:200]!r}"
            elif kind != "solutions" and cell.source not in lesson_code:   # a cell the generator or otter wrote
                comments = re.findall(r"#\s*(.*[A-Za-z].*)$", cell.source, re.M)
                comments = [c for c in comments if not c.startswith(("@title", "BEGIN", "END"))]
                english = [c for c in comments if not CJK.search(c)]
                assert not english, f"{kind}: English comments {english} in {cell.source[:120]!r}"
        assert any(setup in c.source for c in notebook.cells if c.cell_type == "code"), f"{kind}: no zh_CN setup line"
    for test in (versions["student"].parent / "tests").glob("*.py"):
        for message in re.findall(r"raise AssertionError\((['\"].*['\"])\)", test.read_text()):
            assert CJK.search(message), f"{test.name}: {message}"
    grader = grade.load_grader(versions["grader"])
    assert grader["spec"]["language"] == ZH_CN and CJK.search(grader["spec"]["placeholder"])
    assert any(setup in c.source for c in grader["notebook"].cells)
    assert (versions["grader"] / "files" / "locale" / ZH_CN / "LC_MESSAGES" / "workbook.mo").is_file()


def test_a_build_with_another_repository_setting_bakes_it_into_the_colab_version(tmp_path):
    pytest.importorskip("otter", reason="otter-grader is installed by make assignments")
    versions = edition.assign(NOTEBOOKS[0], tmp_path, repository="https://github.com/someone/course-copy")
    first = nbformat.read(versions["colab"], as_version=4).cells[0].source
    assert 'repository = "https://github.com/someone/course-copy"' in first
    assert edition.project_home.HOMEPAGE not in first and f'commit = "{edition.full_commit()}"' in first


# ------------------------------------------------------------------------------------------------
# make grade's pieces that need no TensorFlow (the sample class is graded by make test-assignments)
# ------------------------------------------------------------------------------------------------

def test_the_points_table_sets_points_a_written_question_and_held_out_cases():
    table = edition.points_table()
    _, questions = edition.source_notebook(ROOT / "notebooks" / "00_start_here.ipynb")
    assert [q.points for q in questions] == [table["00_start_here"]["exercise_1"], table["00_start_here"]["exercise_2"]]
    assert [q.hidden for q in questions] == [True, False]          # exercise 2 predicts one number
    _, questions = edition.source_notebook(ROOT / "notebooks" / "08_higher_order_forward_mode.ipynb")
    assert [q.hidden for q in questions] == [False, True, True]    # exercise 1 predicts two numbers
    for stem in ("01_custom_gradient", "02_stop_gradient_straight_through", "03_keras_layers", "04_surrogate_gradients",
                 "05_relu_gradients_saliency", "06_chain_propagation", "07_optimizer_level", "09_performance",
                 "10_appendix_tf1_legacy", "11_appendix_reference", "12_domain_adversarial", "13_recipes", "14_questions"):
        _, questions = edition.source_notebook(ROOT / "notebooks" / f"{stem}.ipynb")
        assert questions and all(q.hidden for q in questions), stem
    master, _ = edition.source_notebook(ROOT / "notebooks" / "00_start_here.ipynb", held_out=5)
    sources = [c.source for c in master.cells]
    assert any(s.startswith("# BEGIN QUESTION\nname: written_1\nmanual: true\npoints: 2") for s in sources)
    assert sum("hidden: true" in s and "seed=5" in s for s in sources) == 1
    with pytest.raises(edition.ConventionError, match="written_N"):
        edition.written_questions("00_start_here", {"00_start_here": {"written": [{"name": "essay", "points": 1}]}})


def test_otter_tests_say_a_name_is_undefined_instead_of_calling_none():
    _, questions = edition.source_notebook(ROOT / "notebooks" / "00_start_here.ipynb")
    assert "if scale_and_clip is None:" in questions[0].test()
    assert "`scale_and_clip` is not defined: did its cell run?" in questions[0].test()
    assert "is None" not in questions[1].test()            # your_answer = None is the starter: the check says so


def test_students_are_folders_or_files_and_what_is_not_a_notebook_scores_zero(tmp_path):
    (tmp_path / "alice").mkdir()
    nbformat.write(nbformat.v4.new_notebook(), tmp_path / "alice" / "00_start_here.ipynb")
    nbformat.write(nbformat.v4.new_notebook(), tmp_path / "bob.ipynb")
    (tmp_path / "carol.py").write_text("print('hi')\n")
    (tmp_path / "dan.ipynb").write_text('{"cells": [')
    (tmp_path / "erin").mkdir()
    (tmp_path / ".DS_Store").write_text("")
    roster = grade.students(tmp_path, "00_start_here")
    assert [(name, path.name if path else None) for name, path, _ in roster] == [
        ("alice", "00_start_here.ipynb"), ("bob", "bob.ipynb"), ("carol", "carol.py"), ("dan", "dan.ipynb"),
        ("erin", None)]
    assert "no notebook" in roster[-1][2]
    assert grade.read_submission(tmp_path / "carol.py")[1].startswith("not a notebook: carol.py")
    assert grade.read_submission(tmp_path / "dan.ipynb")[1].startswith("not a readable notebook: dan.ipynb")
    assert grade.read_submission(tmp_path / "bob.ipynb")[1] is None


def _spec(hidden=True):
    return {"questions": [{"name": "exercise_1", "number": 1, "points": 2, "hidden": hidden, "params": ["f"],
                           "checks": ["check_exercise_1(f)"], "module": "exercises.fake"}], "written": []}


@pytest.mark.parametrize("found, points, says", [
    ({"missing": ["f"], "cell_error": "SyntaxError: invalid syntax (line 2)"}, 0,
     "exercise_1: `f` is not defined: did its cell run? (its cell raised SyntaxError: invalid syntax (line 2))"),
    ({"missing": [], "public": {"passed": False, "message": "Not yet: return x."}}, 0, "exercise_1: Not yet: return x."),
    ({"missing": [], "public": {"passed": True, "message": "Correct! yes"},
      "hidden": {"passed": False, "message": "Not yet: no"}}, 0,
     "exercise_1: passes the self-check, but not the held-out cases: Not yet: no"),
    ({"missing": [], "public": {"passed": True, "message": "Correct! yes"},
      "hidden": {"passed": True, "message": "Correct!"}}, 2, "exercise_1: Correct! yes"),
])
def test_feedback_says_what_happened_without_assert_noise(found, points, says):
    assert grade.feedback(_spec(), {"questions": {"exercise_1": found}}) == {"exercise_1": (points, says)}


def test_a_chinese_graders_feedback_is_chinese_and_its_columns_stay_the_same():
    """questions.json names the notebook's language: the feedback's own words follow it, the verdicts are quoted."""
    found = {"missing": [], "public": {"passed": True, "message": "正确！"}, "hidden": {"passed": False, "message": "还不对"}}
    points, says = grade.feedback({**_spec(), "language": ZH_CN}, {"questions": {"exercise_1": found}})["exercise_1"]
    assert points == 0 and says == "exercise_1: 通过了自检，但没有通过留出的测试用例：还不对"
    missing = grade.feedback({**_spec(), "language": ZH_CN}, {"questions": {"exercise_1": {"missing": ["f"]}}})
    assert missing["exercise_1"][1] == "exercise_1: `f` 没有定义：它所在的单元格运行过吗？"


def test_tampering_scores_zero():
    found = {"missing": [], "public": {"passed": True, "message": "Correct!"}, "hidden": {"passed": True, "message": ""}}
    out = grade.feedback(_spec(), {"questions": {"exercise_1": found}, "tampered": ["numpy.allclose"]})
    assert out["exercise_1"][0] == 0 and "numpy.allclose" in out["tampering"][1]


def _fake_grader(tmp_path) -> Path:
    """A grader copy with one pure-Python check (no TensorFlow), and its manifest."""
    folder = tmp_path / "grader"
    (folder / "files" / "exercises").mkdir(parents=True)
    (folder / "files" / "exercises" / "__init__.py").write_text("")
    (folder / "files" / "exercises" / "fake.py").write_text(
        "class _Verdict:\n    def __init__(self, passed, message):\n        self.passed, self.message = passed, message\n\n\n"
        "class _Check:\n    def __call__(self, *args, **kwargs):\n        print(self.verdict(*args, **kwargs).message)\n\n"
        "    def verdict(self, f, seed=None):\n        x = 3 if seed is None else seed\n"
        "        return _Verdict(f(x) == 2 * x, 'Correct!' if f(x) == 2 * x else f'Not yet: f({x}) should be {2 * x}.')\n\n\n"
        "check_exercise_1 = _Check()\n")
    cells = [nbformat.v4.new_code_cell("import otter\ngrader = otter.Notebook('99_fake.ipynb')"),
             nbformat.v4.new_code_cell("GIVEN = 2"),
             nbformat.v4.new_code_cell("from exercises.fake import check_exercise_1\n\ndef f(x):\n    return x\n\n"
                                       "check_exercise_1(f)"),
             nbformat.v4.new_code_cell('grader.check("exercise_1")')]
    cells[2].metadata["tags"] = ["otter_answer_cell"]
    nbformat.write(nbformat.v4.new_notebook(cells=cells), folder / "99_fake.ipynb")
    spec = {"notebook": "99_fake.ipynb", "seed": 11, "questions": _spec()["questions"], "written": []}
    (folder / "questions.json").write_text(json.dumps(spec))
    manifest = {p.relative_to(folder).as_posix(): edition.sha256(p) for p in folder.rglob("*") if p.is_file()}
    (folder / "manifest.json").write_text(json.dumps(manifest))
    grade.record_path(folder).write_text(edition.sha256(folder / "manifest.json") + "\n")
    return folder


def test_the_grader_refuses_a_copy_that_differs_from_its_manifest(tmp_path):
    folder = _fake_grader(tmp_path)
    assert grade.load_grader(folder)["spec"]["seed"] == 11
    with open(folder / "files" / "exercises" / "fake.py", "a") as handle:
        handle.write("check_exercise_1 = lambda *args: True\n")
    with pytest.raises(grade.Tampered, match="does not match its SHA-256"):
        grade.load_grader(folder)



def test_the_grader_refuses_a_folder_rewritten_with_its_manifest(tmp_path):
    """What a submission of an earlier run can do (files and manifest rewritten to match) stops the next run."""
    folder = _fake_grader(tmp_path)
    built = grade.load_grader(folder)["manifest"]
    assert grade.load_grader(folder, built.upper())["manifest"] == built
    check = folder / "files" / "exercises" / "fake.py"
    with open(check, "a") as handle:
        handle.write("check_exercise_1 = lambda *args: True\n")
    manifest = json.loads((folder / "manifest.json").read_text())
    manifest["files/exercises/fake.py"] = edition.sha256(check)
    (folder / "manifest.json").write_text(json.dumps(manifest))
    with pytest.raises(grade.Tampered, match="grader-manifest.sha256"):
        grade.load_grader(folder)
    with pytest.raises(grade.Tampered, match=r"\(MANIFEST\)"):
        grade.load_grader(folder, built)
    # The record beside the folder can be rewritten too: only the hash you noted (MANIFEST=...) is out of reach.
    grade.record_path(folder).write_text(edition.sha256(folder / "manifest.json"))
    assert grade.load_grader(folder)["manifest"] != built
    with pytest.raises(grade.Tampered, match=r"\(MANIFEST\)"):
        grade.load_grader(folder, built)
    grade.record_path(folder).unlink()
    with pytest.raises(grade.Tampered, match="is missing"):
        grade.load_grader(folder)


def test_make_grade_prints_and_records_the_manifest_it_graded_with(tmp_path, capsys):
    folder = _fake_grader(tmp_path / "assignments" / "99_fake")
    submissions = tmp_path / "submissions"
    (submissions / "ann").mkdir(parents=True)
    notebook = nbformat.read(folder / "99_fake.ipynb", as_version=4)
    notebook.cells[2].source = HONEST + "\ncheck_exercise_1(f)\n"
    nbformat.write(notebook, submissions / "ann" / "99_fake.ipynb")
    digest = edition.sha256(folder / "manifest.json")
    assert grade.main(["99_fake", str(submissions), str(tmp_path / "results"), "--timeout", "60",
                       "--assignments", str(tmp_path / "assignments"), "--manifest", digest]) == 0
    assert f"manifest SHA-256 {digest}" in capsys.readouterr().out
    recorded = json.loads((tmp_path / "results" / "grader.json").read_text())
    assert recorded["grader_manifest_sha256"] == digest and recorded["checked_against"] == "MANIFEST"
    assert "2" in (tmp_path / "results" / "gradebook.csv").read_text().splitlines()[1].split(",")[1]
    with pytest.raises(grade.Tampered, match="not " + "0" * 64):
        grade.main(["99_fake", str(submissions), str(tmp_path / "results"), "--assignments",
                    str(tmp_path / "assignments"), "--manifest", "0" * 64])


HONEST = "def f(x):\n    return GIVEN * x\n"
CHEATS = {
    "redefines the check and grader": "def f(x):\n    return x\n\ngrader = None\ncheck_exercise_1 = lambda *a, **k: True\n",
    "patches the check module": ("import exercises.fake as m\n\ndef f(x):\n    return x\n\n"
                                 "m.check_exercise_1.verdict = lambda *a, **k: True\nm._Check.verdict = lambda *a, **k: True\n"),
    "rewrites the check on disk": ("def f(x):\n    return x\n\nwith open('exercises/fake.py', 'w') as h:\n"
                                   "    h.write('check_exercise_1 = None')\n"),
    "fits the public case": "def f(x):\n    return 6 if x == 3 else x\n",
    "rewrites the runner's copy of the check": (
        "import sys\n\ndef f(x):\n    return x\n\nframe = sys._getframe(0)\n"
        "while frame is not None and 'job' not in frame.f_locals:\n    frame = frame.f_back\n"
        "frame.f_locals['job']['files']['exercises/fake.py'] += "
        "'\\n_Check.verdict = lambda self, *a, **k: _Verdict(True, \"Correct!\")\\n'\n"),
    "rewrites the runner's seed": (
        "import sys\n\ndef f(x):\n    return 6 if x == 3 else x\n\nframe = sys._getframe(0)\n"
        "while frame is not None and 'job' not in frame.f_locals:\n    frame = frame.f_back\n"
        "frame.f_locals['job']['seed'] = None\n"),
}


@pytest.mark.parametrize("answer", [HONEST, *CHEATS.values()], ids=["honest", *CHEATS])
def test_a_submission_scores_what_its_answer_deserves_whatever_it_patches(tmp_path, answer):
    grader = grade.load_grader(_fake_grader(tmp_path))
    report, why, _ = grade.run_student(grader, {"exercise_1": answer + "\ncheck_exercise_1(f)\n"}, 60, tmp_path / "log.txt")
    assert why is None, (why, (tmp_path / "log.txt").read_text())
    points, says = grade.feedback(grader["spec"], report)["exercise_1"]
    assert points == (2 if answer == HONEST else 0), says
    if "rewrites the runner" in {v: k for k, v in CHEATS.items()}.get(answer, ""):
        assert report["tampered"] and "grader's memory" in report["tampered"][-1], report["tampered"]


@pytest.mark.parametrize("answer, reason", [
    ("def f(x):\n    return 2 * x\n\nwhile True:\n    pass\n", "timed out after 5 s"),
    ("import os\nos._exit(3)\n", "exited with code 3"),
    ("import os, signal\nos.kill(os.getpid(), signal.SIGKILL)\n", "killed by signal 9"),
])
def test_a_submission_that_hangs_or_crashes_gets_a_reason(tmp_path, answer, reason):
    grader = grade.load_grader(_fake_grader(tmp_path))
    report, why, _ = grade.run_student(grader, {"exercise_1": answer}, 5, tmp_path / "log.txt")
    assert report is None and reason in why


def test_the_docs_grade_with_one_make_grade_command_the_sample_repeats_per_notebook():
    blocks = grade_sample.commands()
    command = grade_sample.grade_command(blocks)
    assert command.startswith("make grade NB=00_start_here SUBMISSIONS=") and "TIMEOUT=" in command
    other = grade_sample.for_notebook(command, "13_recipes")
    assert "NB=13_recipes" in other and "SUBMISSIONS=build/sample-class/13_recipes" in other
    assert "00_start_here" not in other.replace("TIMEOUT", "")
    assert any(block.startswith("make sample-class") for block in blocks)
    assert not any("-p submissions" in block for block in blocks)       # otter 7 takes paths as arguments
