"""Runs docs/instructors.md as written and grades the sample class (`make test-assignments`).

1. Every fenced ``bash`` block of docs/instructors.md runs, in order, exactly as written, from the
   repository's root (``bash -euo pipefail``): building the edition, writing the sample class
   (``make sample-class``), grading notebook 00's class with ``make grade`` and one submission with
   ``otter run``.
2. The documented ``make grade`` command grades the other notebooks of the sample (03 and 13), with
   only ``NB``, ``SUBMISSIONS`` and ``RESULTS`` changed.
3. The Chinese edition's class of 00 (``sample_class.py --language zh_CN``: reference, untouched, wrong) is
   graded by the same command with ``NB=zh/00_start_here`` (and ``zh/`` in its folders), and its feedback
   must hold the self-checks' Chinese verdicts.
4. Every gradebook must match the sample's expected scores (``build/sample-class/NN_name.expected.csv``,
   written by ``sample_class.py``) student by student, exercise by exercise; the documented
   ``otter run`` must have scored the reference submission in full.

It prints the time each step took and each student's grading time.

Usage: python tools/assignments/grade_sample.py [--skip-docs]
"""
from __future__ import annotations

import argparse
import csv
import json
import re
import shlex
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
DOC = ROOT / "docs" / "instructors.md"
SAMPLE = ("00_start_here", "03_keras_layers", "13_recipes")
CHINESE_SAMPLE = "zh/00_start_here"          # the Chinese edition's class: a few submissions of 00
CJK = re.compile(r"[\u3400-\u9fff]")


def commands(doc: Path = DOC) -> list[str]:
    """The fenced ``bash`` blocks of ``doc``, in order."""
    return re.findall(r"^```bash\n(.*?)^```", doc.read_text(), re.S | re.M)


def grade_command(blocks: list[str]) -> str:
    """The documented ``make grade ...`` line (one block holds it)."""
    lines = [line for block in blocks for line in block.splitlines() if line.startswith("make grade ")]
    if len(lines) != 1:
        raise SystemExit(f"docs/instructors.md must show one `make grade ...` command; found {lines}")
    return lines[0].split("#")[0].strip()


def for_notebook(command: str, stem: str) -> str:
    """The documented grading command for another notebook: NB, SUBMISSIONS and RESULTS name ``stem``."""
    words = shlex.split(command)
    documented = next(w.split("=", 1)[1] for w in words if w.startswith("NB="))
    return " ".join(shlex.quote(w.replace(documented, stem) if w.split("=")[0] in ("NB", "SUBMISSIONS", "RESULTS")
                                else w) for w in words)


def results_of(command: str) -> Path:
    return ROOT / next(w.split("=", 1)[1] for w in shlex.split(command) if w.startswith("RESULTS="))


def compare(gradebook: Path, expected: Path) -> list[str]:
    """Where ``gradebook`` differs from ``expected`` (same students, same points per column)."""
    with open(gradebook) as handle:
        got = {row["student"]: row for row in csv.DictReader(handle)}
    with open(expected) as handle:
        wanted = {row["student"]: row for row in csv.DictReader(handle)}
    problems = []
    if set(got) != set(wanted):
        problems.append(f"students differ: graded {sorted(got)}, expected {sorted(wanted)}")
    for student in sorted(set(got) & set(wanted)):
        for column, value in wanted[student].items():
            if column != "student" and float(got[student].get(column) or "nan") != float(value):
                problems.append(f"{student} {column}: {got[student].get(column)} (expected {value}); "
                                f"status {got[student]['status']!r}; feedback: {got[student]['feedback'][:400]!r}")
    return problems


def run(command: str) -> float:
    print(f"$ {command}", flush=True)
    began = time.monotonic()
    subprocess.run(["bash", "-euo", "pipefail", "-c", command], cwd=ROOT, check=True)
    return time.monotonic() - began


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--skip-docs", action="store_true", help="grade the sample only (the docs' commands ran already)")
    args = parser.parse_args(argv)
    blocks = commands()
    documented = grade_command(blocks)
    timings = []
    if not args.skip_docs:
        timings += [(block.strip().splitlines()[0][:70], run(block)) for block in blocks]
    graded = {SAMPLE[0]: documented} if not args.skip_docs else {}
    for stem in SAMPLE:
        if stem not in graded:
            graded[stem] = for_notebook(documented, stem)
            timings.append((graded[stem][:70], run(graded[stem])))
    language, stem = CHINESE_SAMPLE.split("/")
    write_chinese = f"{sys.executable} tools/assignments/sample_class.py --language zh_CN {stem}"
    timings.append((write_chinese[-60:], run(write_chinese)))
    graded[CHINESE_SAMPLE] = for_notebook(documented, CHINESE_SAMPLE)
    timings.append((graded[CHINESE_SAMPLE][:70], run(graded[CHINESE_SAMPLE])))
    failures = []
    for stem, command in graded.items():
        problems = compare(results_of(command) / "gradebook.csv", ROOT / "build" / "sample-class" / f"{stem}.expected.csv")
        failures += [f"{stem}: {p}" for p in problems]
        with open(results_of(command) / "gradebook.csv") as handle:
            rows = list(csv.DictReader(handle))
        seconds = [float(row["seconds"]) for row in rows if float(row["seconds"]) > 0]
        if stem == CHINESE_SAMPLE:           # the setup line chose zh_CN: the verdicts a student reads are Chinese
            failures += [f"{stem} {row['student']}: feedback not in Chinese: {row['feedback'][:200]!r}"
                         for row in rows if row["status"] == "graded" and not CJK.search(row["feedback"])]
        print(f"{stem}: {len(seconds)} submissions run, {sum(seconds) / max(1, len(seconds)):.0f} s each on average "
              f"(the longest {max(seconds, default=0):.0f} s); gradebook "
              + ("matches the expected scores" if not problems else f"differs in {len(problems)} place(s)"))
    otter = sorted((ROOT / "build" / "otter-results").glob("*/results.json")) if not args.skip_docs else []
    for path in otter:
        tests = json.loads(path.read_text())["tests"]
        if not all(t.get("score") == t.get("max_score") for t in tests):
            scores = [(t["name"], t.get("score"), t.get("max_score")) for t in tests]
            failures.append(f"otter run on {path.parent.name}: {scores}")
    for what, seconds in timings:
        print(f"{seconds:6.0f} s  {what}")
    for failure in failures:
        print(failure, file=sys.stderr)
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
