"""Writes a sample class to grade (`make sample-class`): what `make test-assignments` grades and checks.

Usage: python tools/assignments/sample_class.py [--out build/sample-class] [--assignments build/assignments] [NN_name ...]

For each notebook (default: 00, 03 and 13) it writes ``<out>/NN_name/``, one entry per student, built
from the generated student notebook, and ``<out>/NN_name.expected.csv``, the points each should get:

- ``reference/``: the instructor's solutions (and, where the notebook has one, a written answer): full marks;
- ``untouched.ipynb``: the notebook as handed out: 0;
- ``wrong/``: the typical mistake of ``wrong_answers.py`` in exercise 1: exercise 1 scores 0;
- ``different/``: correct answers written another way (``DIFFERENT`` below): full marks;
- ``exception.ipynb``: exercise 1's function raises: exercise 1 scores 0;
- ``syntax_error/``: exercise 1's cell does not parse: 0, "... is not defined: did its cell run?";
- ``cheat_patch/``: the starter, and the notebook patches ``exercises.<topic>.check_exercise_1`` (in the
  answer cell and in a cell of its own): exercise 1 scores 0;
- ``cheat_tests/``: the starter, and the notebook rewrites ``tests/*.py`` and the check module on disk: 0;
- ``cheat_grader/``: the starter, ``grader = None`` and a ``check_exercise_1`` that passes everything: 0;
- ``cheat_numpy/``: the starter, and the answer replaces ``numpy.allclose``: every exercise 0 (tampering);
- ``cheat_frame/``: the starter, and the answer walks up the stack to the grading process's copy of
  the check module's source and appends a check that passes everything: every exercise 0 (tampering);
- ``endless/``: exercise 1's function never returns: 0, timed out;
- ``crash/``: exercise 1's function kills its process: 0;
- ``notes.py``, ``corrupt.ipynb``: not a notebook: 0;
- for 00, ``overfit/``: an answer that passes the public self-check only: exercise 1 scores 0; and
  ``colab/``: the Colab version, solved (no written answer): full marks.

``--language zh_CN`` writes the Chinese edition's class (``build/assignments/zh/``) into ``<out>/zh/``: only
``reference/``, ``untouched.ipynb`` and ``wrong/`` (:data:`CHINESE`), enough to show that it grades as the
English does, within CI's budget.
"""
from __future__ import annotations

import argparse
import copy
import csv
import json
import shutil
import sys
from pathlib import Path

import nbformat

sys.path.insert(0, str(Path(__file__).resolve().parent))
import make_assignments as edition  # noqa: E402
from wrong_answers import WRONG_ANSWERS  # noqa: E402

SAMPLE = ("00_start_here", "03_keras_layers", "13_recipes")
OUT = edition.ROOT / "build" / "sample-class"

#: Correct answers written another way than the instructor's: {notebook: {exercise: answer body}}.
DIFFERENT = {
    "00_start_here": {
        1: ("def scale_and_clip(x, factor, bound):\n"
            "    @tf.custom_gradient\n"
            "    def op(value):\n"
            "        def grad(upstream):\n"
            "            scaled = upstream * factor\n"
            "            return tf.minimum(tf.maximum(scaled, -bound), bound)\n"
            "        return tf.identity(value), grad\n"
            "    return op(x)\n"),
        2: "your_answer = 4 / 2\n",
    },
    "03_keras_layers": {
        1: ("class Halver(keras.layers.Layer):\n"
            "    def call(self, x):\n"
            "        return halve_gradient(x)\n\n\n"
            "def build_model():\n"
            "    inputs = keras.Input(shape=(3,))\n"
            "    return keras.Model(inputs, Halver()(inputs))\n"),
        2: ("def clipped_backward(x):\n"
            "    def grad(*args, **kwargs):\n"
            "        upstream = kwargs['upstream'] if 'upstream' in kwargs else args[-1]\n"
            "        return keras.ops.minimum(keras.ops.maximum(upstream, -0.1), 0.1)\n"
            "    return keras.ops.multiply(x, 1.0), grad\n"),
    },
    "13_recipes": {
        1: ("@tf.custom_gradient\n"
            "def safe_log(x):\n"
            "    positive = x > 0\n"
            "    safe = tf.where(positive, x, tf.ones_like(x))\n"
            "    def grad(dy):\n"
            "        return tf.where(positive, dy / safe, tf.zeros_like(dy))\n"
            "    return tf.where(positive, tf.math.log(safe), tf.zeros_like(x)), grad\n"),
        2: ("def one_row_per_id(slices):\n"
            "    ids, where = tf.unique(slices.indices)\n"
            "    rows = tf.math.unsorted_segment_sum(slices.values, where, num_segments=tf.shape(ids)[0])\n"
            "    return tf.IndexedSlices(rows, ids, slices.dense_shape)\n"),
    },
}

#: The submissions of the Chinese sample class (make test-assignments grades them, at about 20 s each).
CHINESE = ("reference", "untouched", "wrong")
WRITTEN_ANSWER_ZH = "下游的模型读取前向值：如果它变了，损失和后面的每一层看到的都是别的数，自定义的梯度也就不再是所算之物的梯度。"
WRITTEN_ANSWER = ("A model downstream reads the forward value: if it changed, the loss and every later layer "
                  "would see other numbers, and the custom gradient would no longer be a gradient of what was computed.")

#: The answer of 00 that passes the public self-check and no other input (x has 5 elements there).
OVERFIT = ("def scale_and_clip(x, factor, bound):\n"
           "    @tf.custom_gradient\n"
           "    def op(x):\n"
           "        def grad(dy):\n"
           "            if dy.shape[0] == 5:\n"
           "                return tf.clip_by_value(factor * dy, -bound, bound)\n"
           "            return dy\n"
           "        return tf.identity(x), grad\n"
           "    return op(x)\n")


def answer_cells(notebook) -> list:
    return [c for c in notebook.cells if c.cell_type == "code" and "otter_answer_cell" in c.metadata.get("tags", [])]


def hand_in(notebook, questions: list[edition.Question], bodies: dict[int, str], extra: dict[int, str] | None = None):
    """``notebook`` with question N's answer cell holding ``bodies[N]`` (default: the starter) and ``extra[N]``."""
    handed = copy.deepcopy(notebook)
    cells = answer_cells(handed)
    if len(cells) != len(questions):
        raise SystemExit(f"{len(cells)} answer cells for {len(questions)} questions")
    for cell, question in zip(cells, questions):
        if cell.source != question.answer(question.starter):
            raise SystemExit(f"exercise {question.number}'s answer cell is not head + starter + self-check:\n{cell.source}")
        body = bodies.get(question.number, question.starter)
        cell.source = question.answer(body + (extra or {}).get(question.number, ""))
    return handed


def wrong(stem: str, questions: list[edition.Question]) -> tuple[dict[int, str], set[int]]:
    bodies = {q.number: q.solution for q in questions}
    for number, (mistake, right, wrong_text) in WRONG_ANSWERS[stem].items():
        solution = bodies[number]
        if solution.count(right) != 1:
            raise SystemExit(f"wrong_answers.py, {stem} exercise {number} ({mistake}): {right!r} is not once in its solution")
        bodies[number] = solution.replace(right, wrong_text)
    return bodies, set(WRONG_ANSWERS[stem])


def _function(question: edition.Question) -> str:
    return question.params[0]


def _cheats(question: edition.Question) -> dict[str, str]:
    """Code a cheating notebook adds to exercise 1's answer cell (and, for some, to a cell of its own)."""
    module = question.module
    return {
        "cheat_patch": (f"\nimport {module} as _checks\n"
                        "_checks.check_exercise_1 = lambda *args, **kwargs: True\n"
                        "_checks.check_exercise_1.verdict = lambda *args, **kwargs: True\n"
                        "_checks.NotYet = type('Never', (Exception,), {})\n"),
        "cheat_tests": ("\nimport glob as _glob\n"
                        "for _path in _glob.glob('tests/*.py') + _glob.glob('../tests/*.py'):\n"
                        "    with open(_path, 'w') as _file:\n"
                        "        _file.write('OK_FORMAT = False\\nname = \"x\"\\npoints = 1\\n')\n"
                        f"with open('{module.replace('.', '/')}.py', 'a') as _file:\n"
                        "    _file.write('\\ncheck_exercise_1 = self_check(lambda *args, **kwargs: \"fine\")\\n'\n"
                        "                'check_exercise_2 = self_check(lambda *args, **kwargs: \"fine\")\\n')\n"),
        "cheat_grader": ("\ngrader = None\n\n\ndef check_exercise_1(*args, **kwargs):\n    return True\n"),
        "cheat_frame": ("\nimport sys as _sys\n_frame = _sys._getframe(0)\n"
                        "while _frame is not None and 'job' not in _frame.f_locals:\n"
                        "    _frame = _frame.f_back\n"
                        "if _frame is not None:\n"
                        f"    _frame.f_locals['job']['files']['{module.replace('.', '/')}.py'] += (\n"
                        "        '\\nclass _Pass:\\n    passed = True\\n    message = \"Well done.\"\\n'\n"
                        "        'check_exercise_1.verdict = lambda *args, **kwargs: _Pass()\\n')\n"),
        "cheat_numpy": ("\nimport numpy as _np\n_np.allclose = lambda *args, **kwargs: True\n"
                        "_np.array_equal = lambda *args, **kwargs: True\n"),
        "endless": (f"\n\ndef {_function(question)}(*args, **kwargs):\n    while True:\n        pass\n"),
        "crash": (f"\n\ndef {_function(question)}(*args, **kwargs):\n    import os\n    import signal\n"
                  "    os.kill(os.getpid(), signal.SIGKILL)\n"),
        "exception": (f"\n\ndef {_function(question)}(*args, **kwargs):\n"
                      "    raise RuntimeError('not finished yet')\n"),
    }


def submissions(stem: str, assignments: Path, language: str = "en") -> list[tuple[str, str, object, dict]]:
    """(entry name, kind, notebook or bytes, expected points per exercise) for one notebook's class.

    ``assignments``: the edition's folder (``build/assignments``, or ``build/assignments/zh`` for ``"zh_CN"``).
    """
    _, found = edition.read_questions(edition.notebooks_folder(language) / f"{stem}.ipynb", language)
    questions = [q for *_, q in found]
    spec = json.loads((assignments / stem / "grader" / "questions.json").read_text())
    points = {q["name"]: float(q["points"]) for q in spec["questions"]}
    student = nbformat.read(assignments / stem / "student" / f"{stem}.ipynb", as_version=4)
    solutions = {q.number: q.solution for q in questions}
    full = dict(points)
    zero = {name: 0.0 for name in points}
    first_zero = {**full, "exercise_1": 0.0}
    cheats = _cheats(questions[0])
    out = []

    reference = hand_in(student, questions, solutions)
    for cell in reference.cells:                      # the written answers, where the notebook has any
        if cell.cell_type == "markdown" and cell.source.strip() == spec.get("placeholder", edition.PLACEHOLDER):
            cell.source = WRITTEN_ANSWER if language == "en" else WRITTEN_ANSWER_ZH
    out.append(("reference", "folder", reference, full))
    out.append(("untouched", "file", student, zero))
    bodies, missed = wrong(stem, questions)
    out.append(("wrong", "folder", hand_in(student, questions, bodies),
                {name: 0.0 if int(name.split("_")[1]) in missed else p for name, p in points.items()}))
    out.append(("different", "folder", hand_in(student, questions, DIFFERENT[stem]), full))
    out.append(("exception", "file", hand_in(student, questions, {**solutions, 1: ""}, {1: cheats["exception"]}), first_zero))
    broken = {**solutions, 1: solutions[1].replace("):\n", ")\n", 1)}
    out.append(("syntax_error", "folder", hand_in(student, questions, broken), first_zero))
    for cheat in ("cheat_patch", "cheat_tests", "cheat_grader"):
        notebook = hand_in(student, questions, {**solutions, 1: questions[0].starter}, {1: cheats[cheat]})
        if cheat != "cheat_grader":                   # and once more, in a cell of its own at the end
            notebook.cells.append(nbformat.v4.new_code_cell(
                questions[0].head.split("\n")[0] + "\n" + cheats[cheat]))
        out.append((cheat, "folder", notebook, first_zero))
    for cheat in ("cheat_numpy", "cheat_frame"):
        out.append((cheat, "folder", hand_in(student, questions, {**solutions, 1: questions[0].starter},
                                             {1: cheats[cheat]}), zero))
    for kind in ("endless", "crash"):
        out.append((kind, "folder", hand_in(student, questions, {**solutions, 1: ""}, {1: cheats[kind]}), zero))
    out.append(("notes", "py", b"# my answers\ndef scale_and_clip(x, factor, bound):\n    return x\n", zero))
    out.append(("corrupt", "ipynb-bytes", json.dumps(nbformat.writes(reference))[:500].encode(), zero))
    if stem == "00_start_here":
        out.append(("overfit", "folder", hand_in(student, questions, {**solutions, 1: OVERFIT}), first_zero))
        colab = nbformat.read(assignments / stem / "colab" / f"{stem}.ipynb", as_version=4)
        out.append(("colab", "folder", hand_in(colab, questions, solutions), full))
    return out


def write(stem: str, out: Path, assignments: Path, language: str = "en") -> Path:
    folder = out / stem
    shutil.rmtree(folder, ignore_errors=True)
    folder.mkdir(parents=True)
    rows = []
    for name, kind, content, expected in submissions(stem, assignments, language):
        if language != "en" and name not in CHINESE:
            continue
        if kind == "folder":
            (folder / name).mkdir()
            nbformat.write(content, folder / name / f"{stem}.ipynb")
        elif kind == "file":
            nbformat.write(content, folder / f"{name}.ipynb")
        elif kind == "py":
            (folder / f"{name}.py").write_bytes(content)
        else:
            (folder / f"{name}.ipynb").write_bytes(content)
        rows.append({"student": name, **expected, "total": sum(expected.values())})
    expected_path = out / f"{stem}.expected.csv"
    with open(expected_path, "w", newline="") as handle:
        writer = csv.DictWriter(handle, list(rows[0]))
        writer.writeheader()
        writer.writerows(sorted(rows, key=lambda r: r["student"]))
    return expected_path


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("notebooks", nargs="*", default=list(SAMPLE))
    parser.add_argument("--out", type=Path, default=OUT)
    parser.add_argument("--assignments", type=Path, default=edition.OUT)
    parser.add_argument("--language", choices=list(edition.LANGUAGES), default="en",
                        help="zh_CN: the Chinese edition's class (from ASSIGNMENTS/zh into OUT/zh; reference, untouched, wrong)")
    args = parser.parse_args(argv)
    assignments, out = (args.assignments / edition.LANGUAGES[args.language], args.out / edition.LANGUAGES[args.language])
    for stem in args.notebooks:
        if not (assignments / stem / "grader" / "questions.json").exists():
            raise SystemExit(f"no assignment for {stem} in {assignments}: run make assignments first")
        expected = write(stem, out, assignments, args.language)
        print(f"{stem}: {sum(1 for _ in (out / stem).iterdir())} submissions in {out / stem}, "
              f"expected scores in {expected}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
