"""What CI runs, observed by running it with its tools stubbed, not by reading its text.

`.ci/run` and each step of the GitHub workflow are executed with ``make``, ``taskset`` and the
browser replaced by stubs that record how they were called (target, variables, CPUs, nudge). The
tests then check what CI *does*: which checks run, in which order, on how many cores, that a failing
step stops it, and that the workflow and `.ci/run` run the same checks.
"""
from __future__ import annotations

import os
import re
import shutil
import stat
import subprocess
from pathlib import Path

import pytest
import yaml

ROOT = Path(__file__).resolve().parents[2]
LEGS = sorted(p.stem for p in (ROOT / "tools" / "versions").glob("*.txt"))

MAKE_STUB = """#!/bin/bash
vars=""; targets=""
for arg in "$@"; do
    case "$arg" in *=*) vars="$vars $arg" ;; *) targets="$targets $arg" ;; esac
done
echo "targets=${targets# } vars=${vars# } cpus=${STUB_CPUS:-all} nudge=${GRADLAB_NUDGE:-0}" >> "$STUB_LOG"
for target in $targets; do [ "$target" = "$STUB_FAIL" ] && exit 3; done
exit 0
"""
TASKSET_STUB = """#!/bin/bash
[ "$1" = "-c" ] || { echo "taskset stub: expected -c" >&2; exit 2; }
STUB_CPUS="$2" exec "${@:3}"
"""
RECORD_STUB = """#!/bin/bash
echo "$(basename "$0") $*" >> "$STUB_LOG"
"""


def _write(path: Path, text: str) -> None:
    path.write_text(text)
    path.chmod(path.stat().st_mode | stat.S_IXUSR | stat.S_IXGRP | stat.S_IXOTH)


@pytest.fixture
def stubs(tmp_path):
    """A PATH whose make, taskset, chromium, apt-get and sudo record their calls in ``log``."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    _write(bin_dir / "make", MAKE_STUB)
    _write(bin_dir / "taskset", TASKSET_STUB)
    for name in ("chromium", "apt-get", "sudo"):
        _write(bin_dir / name, RECORD_STUB)
    # Only what the scripts need besides the stubs: no real chromium, make or taskset is reachable.
    for tool in ("bash", "dirname", "basename", "id", "env", "cat", "true"):
        found = shutil.which(tool)
        if found:
            (bin_dir / tool).symlink_to(found)
    log = tmp_path / "calls.log"
    log.touch()
    return bin_dir, log


def _run(command: list[str], stubs, **env: str) -> tuple[int, list[str]]:
    bin_dir, log = stubs
    log.write_text("")
    result = subprocess.run(command, cwd=ROOT, capture_output=True, text=True, timeout=60,
                            env={"PATH": str(bin_dir), "HOME": os.environ.get("HOME", "/tmp"),
                                 "STUB_LOG": str(log), **env})
    return result.returncode, log.read_text().splitlines()


def _make_calls(lines: list[str]) -> list[dict]:
    calls = []
    for line in lines:
        match = re.fullmatch(r"targets=(.*) vars=(.*) cpus=(\S+) nudge=(\S+)", line)
        if match:
            calls.append({"targets": match[1].split(), "vars": match[2].split(), "cpus": match[3],
                          "nudge": match[4]})
    return calls


def _checks(calls: list[dict]) -> set[tuple]:
    """What the calls check, expanded to one entry per leg: (target, leg, cpus, nudge)."""
    checks = set()
    for call in calls:
        variables = dict(v.split("=", 1) for v in call["vars"])
        for target in call["targets"]:
            if target == "test-library":
                legs = ["test-library-oldest", "test-library-pinned"]
                checks |= {(leg, "", call["cpus"], call["nudge"]) for leg in legs}
            elif target == "test-versions":
                legs = variables.get("VERSIONS", "").split() or LEGS
                checks |= {(target, leg, call["cpus"], call["nudge"]) for leg in legs}
            elif variables.get("CPU_CAP"):
                checks.add((target, f"CPU_CAP={variables['CPU_CAP']}", call["cpus"], call["nudge"]))
            else:
                checks.add((target, "", call["cpus"], call["nudge"]))
    return checks


def test_ci_builds_the_book_then_runs_make_test_and_the_stricter_checks(stubs):
    code, lines = _run(["bash", ".ci/run"], stubs)
    assert code == 0, lines
    calls = _make_calls(lines)
    targets = [call["targets"] for call in calls]
    assert targets[:2] == [["book"], ["test"]], "the book is built first (make test checks it), then make test"
    assert calls[1]["vars"] == [] and calls[1]["cpus"] == "all" and calls[1]["nudge"] == "0", \
        "make test runs exactly as the README says, nothing weaker"
    checks = _checks(calls)
    assert ("test-notebooks", "CPU_CAP=avx2", "0", "0") in checks, "strict nbval again, on one core, as on an AVX2 CPU"
    assert ("test-notebooks", "CPU_CAP=baseline", "all", "1") in checks, \
        "strict nbval with every optimizer update nudged, as on an SSE4.2 CPU"
    assert {("test-library-oldest", "", "all", "0"), ("test-library-pinned", "", "all", "0")} <= checks
    assert {("test-versions", leg, "all", "0") for leg in LEGS} <= checks, "every pinned stack"
    assert not any("apt-get" in line or "sudo" in line for line in lines), "chromium is there: nothing installed"


def test_ci_stops_at_the_first_failing_step(stubs):
    code, lines = _run(["bash", ".ci/run"], stubs, STUB_FAIL="test")
    assert code != 0
    assert [call["targets"] for call in _make_calls(lines)] == [["book"], ["test"]]


def test_ci_installs_chromium_when_it_is_missing(stubs):
    bin_dir, _ = stubs
    (bin_dir / "chromium").unlink()
    code, lines = _run(["bash", ".ci/run"], stubs)
    assert code == 0
    installs = [line for line in lines if line.startswith(("apt-get", "sudo"))]
    assert any("install" in line and "chromium" in line for line in installs), lines


def _workflow_steps():
    workflow = yaml.safe_load((ROOT / ".github" / "workflows" / "ci.yml").read_text())
    for name, job in workflow["jobs"].items():
        matrix = job.get("strategy", {}).get("matrix", {})
        combos = [{}]
        for key, values in matrix.items():
            combos = [{**combo, key: value} for combo in combos for value in values]
        for combo in combos:
            for step in job.get("steps", []):
                if "run" not in step:
                    continue
                script = re.sub(r"\$\{\{\s*matrix\.([\w-]+)\s*\}\}", lambda m: str(combo[m[1]]), step["run"])
                assert "${{" not in script, f"job {name}: an expression the test cannot expand: {script}"
                yield name, script


def test_the_github_workflow_runs_the_same_checks_as_ci_run(stubs):
    _, lines = _run(["bash", ".ci/run"], stubs)
    local = _checks(_make_calls(lines))
    remote = set()
    for job, script in _workflow_steps():
        code, lines = _run(["bash", "-e", "-c", script], stubs, GRADLAB_CHROMIUM="chromium")
        assert code == 0, (job, script, lines)
        remote |= _checks(_make_calls(lines))
    assert remote == local, f"only in .ci/run: {local - remote}; only in the workflow: {remote - local}"


def test_the_workflow_runs_on_push_pull_requests_and_weekly():
    workflow = yaml.safe_load((ROOT / ".github" / "workflows" / "ci.yml").read_text())
    triggers = workflow[True] if True in workflow else workflow["on"]  # YAML 1.1 reads `on` as True
    assert {"push", "pull_request", "schedule"} <= set(triggers)
    cron = triggers["schedule"][0]["cron"].split()
    assert len(cron) == 5 and cron[2] == "*" and cron[3] == "*" and cron[4] != "*", "weekly cron"


def test_the_oldest_library_leg_installs_the_oldest_stack_as_pinned():
    """`make test-library` tests the wheel on tf2.16.txt's TensorFlow, Keras and NumPy, then on the pin
    (given TensorFlow alone, pip picked a newer Keras, and what breaks on Keras 3.3 went unnoticed)."""
    pins = {line for line in (ROOT / "tools" / "versions" / "tf2.16.txt").read_text().splitlines()
            if re.match(r"(tensorflow-cpu|keras|numpy)==", line)}
    result = subprocess.run(["make", "--no-print-directory", "-s", "test-library", "GRADLAB_PLAN_ONLY=1"],
                            cwd=ROOT, capture_output=True, text=True, timeout=600)
    assert result.returncode == 0, result.stdout + result.stderr
    plans = [line.split(":", 1)[1].split() for line in result.stdout.splitlines() if line.startswith("plan:")]
    assert len(plans) == 2, result.stdout
    assert set(plans[0]) == pins
    pinned = [r for r in plans[1] if r.startswith("tensorflow")]
    assert pinned and pinned[0].split("==")[1] in (ROOT / "requirements.txt").read_text()
    # The pinned leg (and it alone) also installs the extra [tensorflow] by name, for real.
    lines = result.stdout.splitlines()
    assert [line for line in lines if line.startswith("extra:")] == ["extra: gradlab-tf[tensorflow]"]
    assert lines.index("extra: gradlab-tf[tensorflow]") == len(lines) - 1, result.stdout


# --- make targets, run against a stub environment (VENV=...: its python, ruff and uv record calls) ---

def _stub_venv(tmp_path: Path) -> tuple[Path, Path]:
    venv, log = tmp_path / "venv", tmp_path / "venv-calls.log"
    (venv / "bin").mkdir(parents=True)
    for name in ("python", "ruff", "lint-imports", "uv", "jupyter"):
        _write(venv / "bin" / name, RECORD_STUB)
    log.touch()
    (venv / ".gradlab-installed").touch()  # newer than the pins: the install step has nothing to do
    return venv, log


def _make(target: str, venv: Path, log: Path, *variables: str) -> list[str]:
    result = subprocess.run(["make", "--no-print-directory", "-s", target, f"VENV={venv}", *variables], cwd=ROOT,
                            capture_output=True, text=True, timeout=120,
                            env={**os.environ, "STUB_LOG": str(log)})
    assert result.returncode == 0, result.stdout + result.stderr
    return log.read_text().splitlines()


def test_make_lint_runs_ruff_the_import_contracts_the_notebook_linter_and_the_formatter_check(tmp_path):
    calls = _make("lint", *_stub_venv(tmp_path))
    ruff = [call.split() for call in calls if call.startswith("ruff check")]
    assert ruff and {"gradlab", "tests", "notebooks", "tools"} <= set(ruff[0]), calls
    assert "lint-imports --no-cache" in calls, calls      # writes no cache into the checkout
    assert "python tools/nblint.py" in calls, calls
    assert "python tools/nbfmt.py --check" in calls, calls


def test_make_assignments_installs_the_pinned_grader_within_the_workbook_pins(tmp_path):
    calls = _make("assignments", *_stub_venv(tmp_path))
    installs = [call.split() for call in calls if call.startswith("uv pip install")]
    assert any(["-r", "tools/assignments/requirements.txt"] == i[i.index("-r"):i.index("-r") + 2]
               and "-c" in i and i[i.index("-c") + 1] == "requirements.txt" for i in installs if "-r" in i), calls
    assert any(call.startswith("python tools/assignments/make_assignments.py") for call in calls), calls


def test_ci_grades_the_instructor_editions_sample(stubs):
    _, lines = _run(["bash", ".ci/run"], stubs)
    assert ("test-assignments", "", "all", "0") in _checks(_make_calls(lines))


def test_make_runs_strict_nbval_with_the_workbooks_plugins(tmp_path):
    """Both nbval runs load the second run of every cell and the kernel-start retry (tools/)."""
    for target in ("test", "test-notebooks"):
        calls = _make(target, *_stub_venv(tmp_path / target), "XDIST=")
        pytest_run = next(call.split() for call in calls if call.startswith("python -m pytest"))
        plugins = {pytest_run[i + 1] for i, arg in enumerate(pytest_run) if arg == "-p"}
        assert {"--nbval", "--nbval-current-env"} <= set(pytest_run), pytest_run
        assert {"nbval_second_run", "nbval_kernel_start"} <= plugins, pytest_run
        assert all((ROOT / "tools" / f"{plugin}.py").is_file() for plugin in plugins - {"no:cacheprovider"})


def test_make_execute_formats_what_it_executed(tmp_path):
    calls = _make("execute", *_stub_venv(tmp_path), "NB=notebooks/00_start_here.ipynb")
    executed = next(i for i, call in enumerate(calls) if call.startswith("jupyter nbconvert") and "--execute" in call)
    assert calls[executed].endswith("notebooks/00_start_here.ipynb"), calls
    assert "python tools/nbfmt.py notebooks/00_start_here.ipynb" in calls[executed + 1:], calls


@pytest.mark.parametrize("cap", ["avx2", "baseline"])
def test_make_test_notebooks_under_a_cpu_cap_runs_nbval_through_the_cap(tmp_path, cap):
    """``CPU_CAP`` puts tools/cpu_dispatch.py in front of the same pytest command; without it, nothing is capped."""
    calls = _make("test-notebooks", *_stub_venv(tmp_path / cap), "XDIST=", f"CPU_CAP={cap}")
    run = next(call.split() for call in calls if call.startswith("python tools/cpu_dispatch.py"))
    assert run[2:4] == [cap, "--"] and run[5:8] == ["-m", "pytest", "--nbval"], run
    plain = _make("test-notebooks", *_stub_venv(tmp_path / "plain"), "XDIST=")
    assert not any("cpu_dispatch" in call for call in plain), plain
