"""What every test session shares: TensorFlow's log settings, and a checkout left as it was found.

The tests are grouped by what they guard, each folder with its own conftest:

* ``library/``: the gradlab package alone (``make test-library`` runs this folder from the built wheel,
  outside the checkout);
* ``workbook/``: the notebooks' exercise checks, paper code and set-up (its conftest puts ``notebooks/``
  on ``sys.path``, as the notebooks' kernels have it);
* ``project/``: pins, CI, the book, the browser, packaging.
"""
from __future__ import annotations

import os
from typing import Optional

# Before the first `import tensorflow` in the session (subprocesses inherit it).
os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
os.environ.setdefault("TF_ENABLE_ONEDNN_OPTS", "0")

import pytest  # noqa: E402

# --------------------------------------------------------------------------------------------
# The suite leaves the checkout as it found it
# --------------------------------------------------------------------------------------------
# A notebook or test that writes into the repository (a saved model next to the notebook, a
# changed stored output) would make the next run start from a different state, so a second
# `make test` in the same environment could behave differently. Compare `git status` before and
# after the session and fail the run if anything new appeared. (`.ci/run` also runs nbval a
# second time in the same environment.)

_REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def _git_status() -> Optional[set]:
    import subprocess

    try:
        out = subprocess.run(["git", "status", "--porcelain", "--untracked-files=all"], cwd=_REPO,
                             capture_output=True, text=True, timeout=60, check=True).stdout
    except (OSError, subprocess.SubprocessError):
        return None  # not a git checkout: nothing to compare
    return set(out.splitlines())


def pytest_sessionstart(session):
    session.config._gradlab_git_status = _git_status()


def pytest_sessionfinish(session, exitstatus):
    before = getattr(session.config, "_gradlab_git_status", None)
    if before is None or exitstatus != 0 or os.environ.get("GRADLAB_ALLOW_DIRTY"):
        return
    after = _git_status()
    new = sorted((after or set()) - before)
    if new:
        reporter = session.config.pluginmanager.get_plugin("terminalreporter")
        if reporter is not None:
            reporter.write_line("The test session changed the checkout (each notebook and test must clean "
                                "up after itself, so that a second run starts from the same state):", red=True)
            for line in new:
                reporter.write_line("    " + line, red=True)
        session.exitstatus = pytest.ExitCode.TESTS_FAILED
