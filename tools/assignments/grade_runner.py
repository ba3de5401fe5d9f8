"""Grades one submission, in a process of its own (started by ``grade.py``; not meant to be run by hand).

It reads its job on stdin, all of it, before any of the student's code runs: the lesson's cells
(the notebook as handed out, from the grader's verified copy), the student's answer cells, the
sources of the check modules, the questions, a seed and a token. Then, in a fresh module
``__main__``:

1. it runs the lesson's cells and, in their places, the student's answer cells (less their
   top-level self-check calls). No other cell of the submission runs: a cell the student added, or
   a lesson cell the student changed, is not run;
2. it drops every ``exercises`` module from ``sys.modules`` and builds them again from the sources it
   read at the start (a module or a file the answers patched is not what grades them), restores
   ``sys.meta_path``, ``sys.stdout`` and ``sys.stderr``, and calls the checks itself: the public
   self-check and, where a check takes a ``seed``, the held-out cases drawn from the grader's seed.
   The names ``check_exercise_N``, ``grader`` and ``tests/`` of the notebook are not called. Right
   before building them it takes the SHA-256 of every source it builds, and of the questions and the
   seed it grades with, and reports them: ``grade.py`` compares them with the hashes it holds, so an
   answer that rewrote this process's copy of the sources (walking up the stack to ``job``) is
   reported as tampering;
3. it compares the attributes of the libraries the checks share with the answers (NumPy, TensorFlow,
   Keras, gradlab, builtins) with a snapshot taken before the answers ran: an answer that replaced
   one of them is reported as tampering;
4. it writes its findings, with the token, to the file named in the job and ends with ``os._exit``.

The answers run in this process before the checks are built: their code can read and change this
process's memory (the sources, the seed, the token, this module's functions), patch a library deeper
than the snapshot looks, or start processes. The checks above catch the tampering they know, not
every tampering: see docs/instructors.md § What the grader protects against.
"""
from __future__ import annotations

import ast
import builtins
import contextlib
import hashlib
import importlib
import io
import json
import linecache
import os
import sys
import time
import types

_OPEN, _EXIT, _DUMPS, _SHA256 = open, os._exit, json.dumps, hashlib.sha256   # taken before any answer runs
LIBRARIES = ("builtins", "numpy", "numpy.linalg", "tensorflow", "tensorflow.math", "keras", "keras.ops",
             "gradlab")


def _first_line(error: BaseException) -> str:
    lines = [line for line in str(error).strip().splitlines() if line.strip()]
    text = lines[0].strip() if lines else ""
    text = text if len(text) <= 160 else text[:157] + "..."
    return f"{type(error).__name__}: {text}" if text else type(error).__name__


def _is_self_check_call(node: ast.stmt) -> bool:
    """``check_exercise_N(...)`` or ``grader.check(...)`` as a statement: the grader makes its own calls."""
    if not (isinstance(node, ast.Expr) and isinstance(node.value, ast.Call)):
        return False
    func = node.value.func
    if isinstance(func, ast.Name):
        return func.id.startswith("check_exercise_")
    return isinstance(func, ast.Attribute) and isinstance(func.value, ast.Name) and func.value.id == "grader"


def _snapshot() -> dict[str, dict[str, int]]:
    """The identity of every attribute of the shared libraries (those imported so far)."""
    taken = {}
    for name in LIBRARIES:
        module = sys.modules.get(name)
        if module is not None:
            taken[name] = {key: id(value) for key, value in list(vars(module).items())}
    return taken


def _changed(before: dict[str, dict[str, int]]) -> list[str]:
    changed = []
    for name, attributes in before.items():
        module = sys.modules.get(name)
        now = {key: id(value) for key, value in list(vars(module).items())} if module is not None else {}
        changed += [f"{name}.{key}" for key, ident in attributes.items() if now.get(key) != ident]
    return changed


def _digest(text: str) -> str:
    return _SHA256(text.encode()).hexdigest()


def _load_checks(files: dict[str, str]) -> dict[str, str]:
    """Builds the ``exercises`` package again from the verified sources, in place of whatever is loaded.

    Returns the SHA-256 of each source as built, for the grader to compare with the hashes it holds.
    """
    built = {}
    for name in [n for n in sys.modules if n == "exercises" or n.startswith("exercises.")]:
        del sys.modules[name]
    importlib.invalidate_caches()
    # The package, then what the checks import from it (the language of the messages, then the harness).
    first = ("exercises/__init__.py", "exercises/_i18n.py", "exercises/_harness.py")
    ordered = sorted(files, key=lambda path: (first.index(path) if path in first else len(first), path))
    for path in ordered:
        name = path[:-3].replace("/", ".").removesuffix(".__init__")
        module = types.ModuleType(name)
        module.__file__ = f"<verified {path}>"
        if path.endswith("__init__.py"):
            module.__path__ = []
        module.__package__ = name if path.endswith("__init__.py") else name.rpartition(".")[0]
        sys.modules[name] = module
        if "." in name:
            setattr(sys.modules[name.rpartition(".")[0]], name.rpartition(".")[2], module)
        source = files[path]
        built[path] = _digest(source)
        exec(compile(source, module.__file__, "exec"), module.__dict__)
    return built


def run(job: dict) -> dict:
    os.chdir(job["workdir"])
    sys.path.insert(0, job["workdir"])
    meta_path, path_hooks, path = list(sys.meta_path), list(sys.path_hooks), list(sys.path)
    stdout, stderr, real_import = sys.stdout, sys.stderr, builtins.__import__
    main = types.ModuleType("__main__")
    main.__dict__["__builtins__"] = builtins
    sys.modules["__main__"] = main
    namespace = main.__dict__
    report: dict = {"token": job["token"], "cells": [], "questions": {}}
    started = time.monotonic()
    before = None
    for index, cell in enumerate(job["cells"]):
        source, question = cell["source"], cell.get("question")
        filename = f"<cell {index}{' (' + question + ')' if question else ''}>"
        try:
            tree = ast.parse(source, filename)
        except SyntaxError as error:
            report["cells"].append({"index": index, "question": question,
                                    "error": f"SyntaxError: {error.msg} (line {error.lineno})"})
            continue
        if question:
            if before is None:
                before = _snapshot()
            tree.body = [node for node in tree.body if not _is_self_check_call(node)]
        linecache.cache[filename] = (len(source), None, source.splitlines(keepends=True), filename)
        try:
            exec(compile(tree, filename, "exec"), namespace)
            error = None
        except BaseException as raised:       # SystemExit and KeyboardInterrupt too: the grader goes on
            error = _first_line(raised)
        report["cells"].append({"index": index, "question": question, "error": error})
    report["run_seconds"] = round(time.monotonic() - started, 2)

    # What grades: the verified checks, loaded now, and the grader's own calls.
    sys.meta_path[:], sys.path_hooks[:], sys.path[:] = meta_path, path_hooks, path
    sys.stdout, sys.stderr, builtins.__import__ = stdout, stderr, real_import
    tampered = _changed(before) if before is not None else []
    report["graded_with"] = _digest(_DUMPS([job["questions"], job["seed"]], sort_keys=True))
    report["built_from"] = _load_checks(job["files"])
    failed = {c["question"]: c["error"] for c in report["cells"] if c["question"] and c["error"]}
    for question in job["questions"]:
        name = question["name"]
        module = sys.modules[question["module"]]
        result: dict = {"missing": [], "cell_error": failed.get(name), "public": None, "hidden": None}
        report["questions"][name] = result
        # Undefined, or None where its cell failed (the starter's own None, as in a prediction, is the check's to judge).
        result["missing"] = [p for p in question["params"]
                             if p not in namespace or (namespace[p] is None and result["cell_error"])]
        if result["missing"]:
            continue
        calls = []
        for text in question["checks"]:
            call = ast.parse(text, mode="eval").body
            check = getattr(module, call.func.id)
            try:
                args = [eval(compile(ast.Expression(a), "<arguments>", "eval"), namespace) for a in call.args]
            except BaseException as raised:
                result["public"] = {"passed": False, "message": f"Not yet: {text} could not be formed: {_first_line(raised)}"}
                break
            calls.append((check, args))
        for key, extra in (("public", {}), ("hidden", {"seed": job["seed"]})):
            if result["public"] is not None and not result["public"]["passed"]:
                break
            if key == "hidden" and not question["hidden"]:
                break
            messages, passed = [], True
            for check, args in calls:
                shown = io.StringIO()
                with contextlib.redirect_stdout(shown), contextlib.redirect_stderr(io.StringIO()):
                    try:
                        verdict = check.verdict(*args, **extra)
                        ok, message = bool(verdict.passed), str(verdict.message)
                    except BaseException as raised:   # a check never raises; an answer that makes it is wrong
                        ok, message = False, f"Not yet: checking it raised {_first_line(raised)}"
                sys.stdout, sys.stderr = stdout, stderr
                passed &= ok
                messages.append(message)
                if not ok:
                    break
            result[key] = {"passed": passed, "message": "\n".join(messages)}
    if before is not None:
        tampered += [name for name in _changed(before) if name not in tampered]
    report["tampered"] = tampered
    report["seconds"] = round(time.monotonic() - started, 2)
    return report


def main() -> None:
    job = json.loads(sys.stdin.read())
    result_path = job["result"]
    try:
        report = run(job)
    except BaseException as error:      # the grader's own failure: reported, not a score
        report = {"token": job["token"], "error": f"the grader failed: {_first_line(error)}"}
    with _OPEN(result_path, "w") as handle:
        handle.write(_DUMPS(report))
    _EXIT(0)


if __name__ == "__main__":
    main()
