"""Grades a sample of the instructor edition with `otter run` (no Docker): `make test-assignments`.

For each sampled notebook it hands in, built from the generated student notebook:

- ``solutions``: every answer cell holding the instructor's solution: full marks;
- ``untouched``: the student notebook as handed out (the starter code): zero;
- ``wrong``: the solutions with the typical mistake of ``wrong_answers.py``: that exercise 0, the others full;

and, for the first notebook, ``colab``: the Colab version with the solutions (its first cell runs
outside Colab too): full marks. Each submission is graded by ``otter run --debug`` with the
notebook's autograder zip, so an error in any cell of the notebook fails the run, not only a wrong
answer. The runs go side by side, one per core.

The sample: 00 (a function to complete and a number to predict), 03 (given code kept beside the
starter, a Keras model, a class renamed from ``...Solution``) and 13 (a topic notebook: ``tf.where``
and ``tf.IndexedSlices``), the three of them about a minute of notebook time.

Usage: python tools/assignments/grade_sample.py [--out build/assignments] [NN_name ...]
"""
from __future__ import annotations

import argparse
import concurrent.futures
import copy
import json
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

import nbformat

sys.path.insert(0, str(Path(__file__).resolve().parent))
import make_assignments as edition  # noqa: E402
from wrong_answers import WRONG_ANSWERS  # noqa: E402

SAMPLE = ("00_start_here", "03_keras_layers", "13_recipes")


def answer_cells(notebook) -> list:
    """The student notebook's answer cells, one per question, in order."""
    return [c for c in notebook.cells if c.cell_type == "code" and "otter_answer_cell" in c.metadata.get("tags", [])]


def hand_in(notebook, questions: list[edition.Question], bodies: dict[int, str]):
    """``notebook`` with question N's answer cell holding ``bodies[N]`` in place of the starter."""
    handed = copy.deepcopy(notebook)
    cells = answer_cells(handed)
    if len(cells) != len(questions):
        raise SystemExit(f"{len(cells)} answer cells for {len(questions)} questions")
    for cell, question in zip(cells, questions):
        if cell.source != question.answer(question.starter):
            raise SystemExit(f"exercise {question.number}'s answer cell is not head + starter + self-check:\n{cell.source}")
        cell.source = question.answer(bodies.get(question.number, question.starter))
    return handed


def wrong(stem: str, questions: list[edition.Question]) -> tuple[dict[int, str], set[int]]:
    bodies = {q.number: q.solution for q in questions}
    for number, (mistake, right, wrong_text) in WRONG_ANSWERS[stem].items():
        solution = bodies[number]
        if solution.count(right) != 1:
            raise SystemExit(f"wrong_answers.py, {stem} exercise {number} ({mistake}): {right!r} is not once in its solution")
        bodies[number] = solution.replace(right, wrong_text)
    return bodies, set(WRONG_ANSWERS[stem])


def submissions(out: Path, stem: str, first: bool) -> list[tuple[str, Path, dict[str, float]]]:
    """Writes the sample's submissions for ``stem``: (kind, notebook path, expected score per question)."""
    _, found = edition.read_questions(edition.NOTEBOOKS / f"{stem}.ipynb")
    questions = [q for *_, q in found]
    student = nbformat.read(out / stem / "student" / f"{stem}.ipynb", as_version=4)
    solutions = {q.number: q.solution for q in questions}
    bodies, missed = wrong(stem, questions)
    full = {q.name: float(edition.POINTS) for q in questions}
    kinds = [("solutions", hand_in(student, questions, solutions), full),
             ("untouched", student, {name: 0.0 for name in full}),
             ("wrong", hand_in(student, questions, bodies),
              {q.name: 0.0 if q.number in missed else float(edition.POINTS) for q in questions})]
    if first:
        colab = nbformat.read(out / stem / "colab" / f"{stem}.ipynb", as_version=4)
        kinds.append(("colab", hand_in(colab, questions, solutions), full))
    made = []
    for kind, notebook, expected in kinds:
        folder = out / "_grading" / stem / kind
        shutil.rmtree(folder, ignore_errors=True)
        folder.mkdir(parents=True)
        nbformat.write(notebook, folder / f"{stem}.ipynb")
        made.append((kind, folder / f"{stem}.ipynb", expected))
    return made


def grade(out: Path, stem: str, kind: str, path: Path) -> tuple[dict[str, float], float, str]:
    """``otter run --debug`` on one submission: (score per question, seconds, otter's output)."""
    zip_path = out / stem / "autograder" / f"{stem}-autograder.zip"
    began = time.monotonic()
    run = subprocess.run([sys.executable, "-m", "otter", "run", "--debug", "--no-logo", "-a", str(zip_path),
                          "-o", str(path.parent), str(path)], capture_output=True, text=True, cwd=path.parent)
    seconds = time.monotonic() - began
    results = path.parent / "results.json"
    if run.returncode != 0 or not results.exists():
        return {}, seconds, run.stdout + run.stderr
    scores = {t["name"]: float(t["score"]) for t in json.loads(results.read_text())["tests"] if "score" in t}
    return scores, seconds, run.stdout


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("notebooks", nargs="*", default=list(SAMPLE))
    parser.add_argument("--out", type=Path, default=edition.OUT)
    args = parser.parse_args(argv)
    jobs = []
    for position, stem in enumerate(args.notebooks):
        if not (args.out / stem / "autograder" / f"{stem}-autograder.zip").exists():
            raise SystemExit(f"no assignment for {stem} in {args.out}: run make assignments first")
        if stem not in WRONG_ANSWERS:
            raise SystemExit(f"tools/assignments/wrong_answers.py has no typical wrong answer for {stem}")
        jobs += [(stem, *made) for made in submissions(args.out, stem, first=position == 0)]
    started = time.monotonic()
    failures = []
    print(f"{'notebook':18s} {'submission':10s} {'score':>7s} {'expected':>8s} {'time':>6s}")
    with concurrent.futures.ThreadPoolExecutor(max_workers=os.cpu_count() or 1) as pool:
        futures = [pool.submit(grade, args.out, stem, kind, path) for stem, kind, path, _ in jobs]
        for (stem, kind, _, expected), future in zip(jobs, futures):
            scores, seconds, output = future.result()
            total, wanted = sum(scores.values()), sum(expected.values())
            ok = scores == expected
            print(f"{stem:18s} {kind:10s} {total:3.0f}/{len(expected) * edition.POINTS:<3d} {wanted:6.0f}   {seconds:5.0f} s"
                  + ("" if ok else "   <- FAILED"), flush=True)
            if not ok:
                failures.append(f"{stem} {kind}: scores {scores}, expected {expected}\n{output[-3000:]}")
    print(f"{len(jobs)} submissions graded in {time.monotonic() - started:.0f} s")
    for failure in failures:
        print("\n" + failure, file=sys.stderr)
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
