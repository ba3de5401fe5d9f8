"""Grades a class without Docker (`make grade`): one folder of submissions in, a gradebook out.

Usage: python tools/assignments/grade.py [zh/]NN_name SUBMISSIONS RESULTS [--timeout SECONDS] [--jobs N]
                                         [--assignments build/assignments]

``SUBMISSIONS`` holds one entry per student: a folder (``alice/00_start_here.ipynb``; the student is
the folder's name) or a file (``bob.ipynb``; the student is its stem). ``RESULTS`` gets, per student,
``<student>/result.json`` (scores, reasons, the checks' verdicts, timings), ``<student>/feedback.txt``
(what the student reads), ``<student>/answers.py`` (the answer cells as graded),
``<student>/written_N.md`` (a written answer, to grade by hand) and ``<student>/log.txt`` (what the
run printed); and for the class ``gradebook.csv``: student, each exercise's points, each written
question ("to grade" or "no answer"), total, max, status, feedback; and ``grader.json``, the
SHA-256 of the grader's manifest it graded with.

How a submission is graded (docs/instructors.md § How grading works): the grader reads its own copy
of the checks (``build/assignments/NN_name/grader/``), checks the manifest's SHA-256 against the one
``make assignments`` printed (``--manifest``) or recorded beside the folder, verifies every file by
SHA-256 against the manifest, and keeps that copy in memory. Each student is then graded in a
process of their own (``grade_runner.py``), with a timeout, in a fresh temporary folder: the lesson's
cells as handed out and the student's answer cells run, then the checks, built again from the
verified sources, grade the names the answers define; the sources' hashes as built are compared with
the grader's, and a difference is tampering. A submission that is not a notebook, times
out, or kills its process gets 0 and a reason; the rest of the class is graded all the same.
"""
from __future__ import annotations

import argparse
import concurrent.futures
import csv
import hashlib
import json
import os
import re
import secrets
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import nbformat

HERE = Path(__file__).resolve().parent
ROOT = HERE.parents[1]
RUNNER = HERE / "grade_runner.py"
DEFAULT_TIMEOUT = 600            # seconds per student: a notebook's run is well under a minute
PLACEHOLDER = "_Type your answer here, replacing this text._"
RECORD = "grader-manifest.sha256"   # beside grader/, written by make assignments

if str(HERE) not in sys.path:
    sys.path.insert(0, str(HERE))
# The feedback's words in the grader's language (questions.json names it): the generator's own catalog lookup.
from make_assignments import translator  # noqa: E402


class Tampered(SystemExit):
    """The grader's own copy does not match its manifest: rebuild it (make assignments)."""


def record_path(folder: Path) -> Path:
    """Where ``make assignments`` records the SHA-256 of a grader folder's manifest: beside the folder, not in it."""
    return folder.parent / RECORD


def load_grader(folder: Path, expected: str | None = None) -> dict:
    """The grader's copy of one notebook, every file verified against ``manifest.json``, in memory.

    The manifest itself must hash to ``expected`` (the SHA-256 ``make assignments`` printed), or,
    without it, to the one ``make assignments`` recorded beside the folder: a manifest rewritten along
    with the files it lists (by a submission of an earlier run) stops grading.
    """
    manifest_path = folder / "manifest.json"
    if not manifest_path.exists():
        raise SystemExit(f"no grader in {folder}: run `make assignments` first")
    manifest_bytes = manifest_path.read_bytes()
    digest = hashlib.sha256(manifest_bytes).hexdigest()
    if expected is None:
        record = record_path(folder)
        if not record.exists():
            raise Tampered(f"{record} is missing: run `make assignments` again")
        expected, source = record.read_text().strip(), str(record)
    else:
        expected, source = expected.strip().lower(), "MANIFEST"
    if digest != expected:
        raise Tampered(f"{manifest_path} has SHA-256 {digest}, not {expected} ({source}): the grader folder was "
                       "changed since it was built; run `make assignments` again")
    manifest = json.loads(manifest_bytes)
    on_disk = {p.relative_to(folder).as_posix() for p in folder.rglob("*") if p.is_file()} - {"manifest.json"}
    if on_disk != set(manifest):
        raise Tampered(f"{folder}: files {sorted(on_disk ^ set(manifest))} differ from its manifest; "
                       "run `make assignments` again")
    contents = {}
    for name, listed in manifest.items():
        data = (folder / name).read_bytes()
        if hashlib.sha256(data).hexdigest() != listed:
            raise Tampered(f"{folder / name} does not match its SHA-256 in the manifest; run `make assignments` again")
        contents[name] = data
    spec = json.loads(contents["questions.json"])
    notebook = nbformat.reads(contents[spec["notebook"]].decode(), as_version=4)
    return {"spec": spec, "notebook": notebook, "contents": contents, "manifest": digest, "checked_against": source}


def students(submissions: Path, stem: str) -> list[tuple[str, Path | None, str | None]]:
    """(student, submission file or None, why there is none), one per entry of ``submissions``."""
    found = []
    for entry in sorted(submissions.iterdir()):
        if entry.name.startswith((".", "_")):
            continue
        if entry.is_dir():
            files = sorted(p for p in entry.rglob("*") if p.is_file() and not p.name.startswith("."))
            notebooks = [p for p in files if p.name == f"{stem}.ipynb"] or [p for p in files if p.suffix == ".ipynb"]
            if len(notebooks) == 1:
                found.append((entry.name, notebooks[0], None))
            elif not notebooks and len(files) == 1:
                found.append((entry.name, files[0], None))          # judged below: not a notebook
            elif not notebooks:
                found.append((entry.name, None, f"no notebook in the folder (found {[p.name for p in files][:5]})"))
            else:
                found.append((entry.name, None, f"several notebooks and none named {stem}.ipynb: "
                                                f"{[p.name for p in notebooks][:5]}"))
        else:
            found.append((entry.stem, entry, None))
    return found


def read_submission(path: Path):
    """The submitted notebook, or the reason it is not one."""
    if path.suffix != ".ipynb":
        return None, f"not a notebook: {path.name} (hand in the .ipynb file)"
    try:
        return nbformat.read(path, as_version=4), None
    except Exception as error:   # corrupt JSON, not nbformat, binary
        text = str(error).strip().splitlines()[0][:120] if str(error).strip() else ""
        return None, f"not a readable notebook: {path.name} ({type(error).__name__}: {text})"


def _calls_check(source: str, number: int) -> bool:
    return re.search(rf"^check_exercise_{number}\(", source, re.M) is not None


def answer_cells(submission, spec: dict) -> dict[str, str | None]:
    """Each exercise's answer cell in the submission: the code cells otter tagged, else the one calling its check."""
    code = [c for c in submission.cells if c.cell_type == "code"]
    tagged = [c for c in code if "otter_answer_cell" in c.get("metadata", {}).get("tags", [])]
    answers: dict[str, str | None] = {}
    for position, question in enumerate(spec["questions"]):
        number = question["number"]
        if len(tagged) == len(spec["questions"]):
            answers[question["name"]] = tagged[position].source
            continue
        calling = [c for c in code if _calls_check(c.source, number) and "grader.check" not in c.source]
        answers[question["name"]] = calling[-1].source if calling else None
    return answers


def written_answers(submission, spec: dict) -> dict[str, str | None]:
    """Each written question's answer: the Markdown cell after its prompt (otter marks the k-th manual
    question's prompt ``<!-- BEGIN QUESTION -->``; the written questions are the notebook's manual ones)."""
    cells = submission.cells
    prompts = [i for i, c in enumerate(cells) if c.cell_type == "markdown" and "<!-- BEGIN QUESTION -->" in c.source]
    found: dict[str, str | None] = {}
    for written, index in zip(spec["written"], prompts + [None] * len(spec["written"])):
        after = [c for c in cells[index + 1:index + 2] if c.cell_type == "markdown"] if index is not None else []
        text = after[0].source.strip() if after else ""
        blank = (PLACEHOLDER, spec.get("placeholder", PLACEHOLDER))      # otter's, or the translated edition's
        found[written["name"]] = None if not text or text in blank or "END QUESTION" in text else text
    return found


def lesson_cells(grader: dict, answers: dict[str, str | None]) -> list[dict]:
    """The notebook as handed out, otter's cells left out, each answer cell replaced by the student's."""
    spec, out = grader["spec"], []
    tagged = [c for c in grader["notebook"].cells
              if c.cell_type == "code" and "otter_answer_cell" in c.get("metadata", {}).get("tags", [])]
    names = {id(cell): q["name"] for cell, q in zip(tagged, spec["questions"])}
    for cell in grader["notebook"].cells:
        if cell.cell_type != "code":
            continue
        if re.search(r"^\s*(import otter|grader = otter\.|grader\.check)", cell.source, re.M):
            continue
        name = names.get(id(cell))
        if name is None:
            out.append({"source": cell.source})
        elif answers.get(name) is not None:
            out.append({"source": answers[name], "question": name})
    return out


def _kill(process: subprocess.Popen) -> None:
    try:
        os.killpg(process.pid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        pass


def run_student(grader: dict, answers: dict[str, str | None], timeout: float,
                log: Path) -> tuple[dict | None, str | None, float]:
    """Runs grade_runner.py on one student's answers: (its report, or None and why; seconds)."""
    token = secrets.token_hex(16)
    job_hashes = _expected_hashes(grader)
    began = time.monotonic()
    with tempfile.TemporaryDirectory(prefix="gradlab-grade-") as work:
        work_path = Path(work)
        for name, data in grader["contents"].items():
            if name.startswith("files/"):
                target = work_path / name.removeprefix("files/")
                target.parent.mkdir(parents=True, exist_ok=True)
                target.write_bytes(data)
        result = work_path / f"result-{token}.json"
        job = {"token": token, "workdir": work, "result": str(result), "seed": grader["spec"]["seed"],
               "cells": lesson_cells(grader, answers), "questions": grader["spec"]["questions"],
               "files": {name.removeprefix("files/"): data.decode() for name, data in grader["contents"].items()
                         if name.startswith("files/exercises/") and name.endswith(".py")}}
        env = dict(os.environ, MPLBACKEND="Agg", TF_CPP_MIN_LOG_LEVEL="2", PYTHONDONTWRITEBYTECODE="1",
                   PYTHONPATH=work)
        env.setdefault("TF_ENABLE_ONEDNN_OPTS", "0")
        with open(log, "wb") as output:
            process = subprocess.Popen([sys.executable, str(RUNNER)], stdin=subprocess.PIPE, stdout=output,
                                       stderr=subprocess.STDOUT, cwd=work, env=env, start_new_session=True)
            try:
                process.communicate(json.dumps(job).encode(), timeout=timeout)
            except subprocess.TimeoutExpired:
                _kill(process)
                process.wait()
                why = f"timed out after {timeout:g} s (an endless loop, or a far too slow answer)"
                return None, why, time.monotonic() - began
            finally:
                _kill(process)                      # whatever it started in its session
        seconds = time.monotonic() - began
        if not result.exists():
            code = process.returncode
            how = f"was killed by signal {-code}" if code < 0 else f"exited with code {code}"
            return None, f"the grading process {how} before it finished (the answer crashed it)", seconds
        try:
            report = json.loads(result.read_text())
        except ValueError:
            return None, "the grading process left an unreadable report (the answer interfered with it)", seconds
        if report.get("token") != token:
            return None, "the report does not carry the grader's token (the answer forged it)", seconds
        if "error" in report:
            return None, report["error"], seconds
        report["tampered"] = list(report.get("tampered", [])) + in_memory_tampering(job_hashes, report)
        return report, None, seconds


def _expected_hashes(grader: dict) -> dict:
    """What the runner must report it graded with: each check source's SHA-256, and that of the questions and seed."""
    sources = {name.removeprefix("files/"): hashlib.sha256(data).hexdigest() for name, data in grader["contents"].items()
               if name.startswith("files/exercises/") and name.endswith(".py")}
    spec = grader["spec"]
    graded_with = hashlib.sha256(json.dumps([spec["questions"], spec["seed"]], sort_keys=True).encode()).hexdigest()
    return {"built_from": sources, "graded_with": graded_with}


def in_memory_tampering(expected: dict, report: dict) -> list[str]:
    """What the answers changed in the runner's memory before the checks were built: the sources, the questions.

    The runner reports the SHA-256 of what it built the checks from; the grader compares them with the
    hashes it holds (the child's copy of them could have been rewritten, this one not).
    """
    found = []
    built = report.get("built_from")
    if not isinstance(built, dict):
        return ["the check sources (not reported)"]
    found += [f"the check source {path} in the grader's memory" for path in sorted(set(expected["built_from"]) | set(built))
              if built.get(path) != expected["built_from"].get(path)]
    if report.get("graded_with") != expected["graded_with"]:
        found.append("the questions or the seed in the grader's memory")
    return found


def feedback(spec: dict, report: dict) -> dict[str, tuple[float, str]]:
    """Each exercise's points and what the student reads about it (in the language of the grader's notebook)."""
    _ = translator(spec.get("language", "en"))
    out = {}
    for question in spec["questions"]:
        name, points = question["name"], float(question["points"])
        found = report["questions"].get(name, {})
        error = found.get("cell_error")
        ran = _(" (its cell raised {error})").format(error=error) if error else ""
        if found.get("missing"):
            if len(found["missing"]) == 1:
                says = _("`{name}` is not defined: did its cell run?").format(name=found["missing"][0])
            else:
                names = " and ".join(f"`{n}`" for n in found["missing"])
                says = _("{names} are not defined: did their cells run?").format(names=names)
            out[name] = (0.0, f"{name}: {says}{ran}")
            continue
        public, hidden = found.get("public"), found.get("hidden")
        if public is None:
            out[name] = (0.0, f"{name}: " + _("no answer cell found (a code cell calling check_exercise_{number})").format(
                number=question["number"]))
        elif not public["passed"]:
            out[name] = (0.0, f"{name}: {public['message']}"
                         + (_("\n(Its cell raised {error}.)").format(error=error) if error else ""))
        elif question["hidden"] and not (hidden and hidden["passed"]):
            message = hidden["message"] if hidden else _("the held-out cases did not run")
            out[name] = (0.0, f"{name}: " + _("passes the self-check, but not the held-out cases: {message}").format(
                message=message))
        else:
            out[name] = (points, f"{name}: {public['message']}")
    if report.get("tampered"):
        shown = ", ".join(report["tampered"][:5])
        out = {name: (0.0, f"{name}: " + _("not counted (below).")) for name in out}
        out["tampering"] = (0.0, _("The answers replaced what the checks rely on ({shown}): every exercise scores 0; "
                                   "ask the instructor to review it.").format(shown=shown))
    return out


def grade_one(grader: dict, stem: str, student: str, path: Path | None, why: str | None,
              results: Path, timeout: float) -> dict:
    spec = grader["spec"]
    folder = results / student
    shutil.rmtree(folder, ignore_errors=True)
    folder.mkdir(parents=True)
    row: dict = {"student": student, "submission": str(path) if path else "", "seconds": 0.0}
    notebook = None
    if why is None:
        notebook, why = read_submission(path)
    report, scores, written = None, {}, {}
    if notebook is not None:
        answers = answer_cells(notebook, spec)
        (folder / "answers.py").write_text("".join(f"# ---- {name} ----\n{text or '# (no answer cell)'}\n\n"
                                                   for name, text in answers.items()))
        written = written_answers(notebook, spec)
        for name, text in written.items():
            (folder / f"{name}.md").write_text(text or "(no answer)\n")
        report, why, row["seconds"] = run_student(grader, answers, timeout, folder / "log.txt")
    if report is not None:
        scores = feedback(spec, report)
        status = "tampering" if report.get("tampered") else "graded"
    else:
        scores = {q["name"]: (0.0, "") for q in spec["questions"]}
        status = f"0: {why}"
    row.update({name: points for name, (points, _) in scores.items() if name != "tampering"})
    for w in spec["written"]:
        row[w["name"]] = "to grade" if written.get(w["name"]) else ("no answer" if report is not None else "")
    row["total"] = sum(points for name, (points, _) in scores.items() if name != "tampering")
    row["status"] = status
    _ = translator(spec.get("language", "en"))
    lines = ([text for _points, text in scores.values() if text] if report is not None
             else [_("Not graded: {why}. Score 0.").format(why=why)])
    lines += [f"{w['name']}: " + _("to be graded by hand ({points} points).").format(points=w["points"])
              for w in spec["written"] if written.get(w["name"])]
    row["feedback"] = "\n\n".join(lines)
    (folder / "feedback.txt").write_text(f"{stem}, {student}: {row['total']:g} / {max_points(spec):g}\n\n"
                                         + row["feedback"] + "\n")
    (folder / "result.json").write_text(json.dumps({"row": row, "report": report, "reason": why,
                                                    "grader_manifest_sha256": grader["manifest"]}, indent=1) + "\n")
    return row


def max_points(spec: dict) -> float:
    return sum(float(q["points"]) for q in spec["questions"])


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("notebook", help="NN_name, e.g. 00_start_here; zh/NN_name for the Chinese edition")
    parser.add_argument("submissions", type=Path)
    parser.add_argument("results", type=Path)
    parser.add_argument("--timeout", type=float, default=DEFAULT_TIMEOUT, help="seconds per student")
    parser.add_argument("--jobs", type=int, default=1, help="students graded side by side")
    parser.add_argument("--assignments", type=Path, default=ROOT / "build" / "assignments")
    parser.add_argument("--manifest", default=None,
                        help="the SHA-256 of the grader's manifest that make assignments printed (default: the one "
                             "it recorded beside the grader folder)")
    args = parser.parse_args(argv)
    stem = Path(args.notebook).stem            # zh/00_start_here: the Chinese edition's, in build/assignments/zh/
    grader = load_grader(args.assignments / Path(args.notebook).parent / stem / "grader", args.manifest or None)
    spec = grader["spec"]
    print(f"grading {stem} with the grader manifest SHA-256 {grader['manifest']} "
          f"(checked against {grader['checked_against']})", flush=True)
    if not args.submissions.is_dir():
        raise SystemExit(f"{args.submissions} is not a folder of submissions")
    roster = students(args.submissions, stem)
    args.results.mkdir(parents=True, exist_ok=True)
    started = time.monotonic()
    with concurrent.futures.ThreadPoolExecutor(max_workers=max(1, args.jobs)) as pool:
        rows = list(pool.map(lambda entry: grade_one(grader, stem, *entry, args.results, args.timeout), roster))
    columns = (["student"] + [q["name"] for q in spec["questions"]] + [w["name"] for w in spec["written"]]
               + ["total", "max", "manual_max", "status", "seconds", "feedback"])
    with open(args.results / "gradebook.csv", "w", newline="") as handle:
        writer = csv.DictWriter(handle, columns, extrasaction="ignore")
        writer.writeheader()
        for row in rows:
            writer.writerow({**row, "max": max_points(spec), "manual_max": sum(w["points"] for w in spec["written"]),
                             "seconds": f"{row['seconds']:.1f}"})
    (args.results / "grader.json").write_text(json.dumps(
        {"notebook": stem, "grader_manifest_sha256": grader["manifest"], "checked_against": grader["checked_against"],
         "commit": spec.get("commit"), "students": len(rows)}, indent=1) + "\n")
    took = time.monotonic() - started
    width = max([len(r["student"]) for r in rows] + [7])
    for row in rows:
        print(f"{row['student']:{width}s} {row['total']:4g} / {max_points(spec):g}  {row['seconds']:5.1f} s  "
              f"{row['status'][:70]}")
    print(f"{len(rows)} submission(s) of {stem} graded in {took:.0f} s -> {args.results / 'gradebook.csv'}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
