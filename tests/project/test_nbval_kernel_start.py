"""tools/nbval_kernel_start.py: a kernel that fails to start is started again, a few times at most."""
from __future__ import annotations

import logging
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
if str(ROOT / "tools") not in sys.path:
    sys.path.insert(0, str(ROOT / "tools"))
import nbval_kernel_start  # noqa: E402


def flaky_start(failures: int):
    """A stand-in for nbval's start_new_kernel that raises as nbval does ``failures`` times, then starts."""
    calls = []

    def start(*args, **kwargs):
        calls.append((args, kwargs))
        if len(calls) <= failures:
            raise RuntimeError("Kernel didn't respond in 60 seconds")
        return "manager", "client"
    return start, calls


def test_a_kernel_that_fails_to_start_is_started_again_with_the_same_arguments(caplog):
    start, calls = flaky_start(failures=nbval_kernel_start.ATTEMPTS - 1)
    with caplog.at_level(logging.WARNING):
        assert nbval_kernel_start.retrying(start)(startup_timeout=60, kernel_name="k") == ("manager", "client")
    assert calls == [((), {"startup_timeout": 60, "kernel_name": "k"})] * nbval_kernel_start.ATTEMPTS
    assert caplog.text.count("starting it again") == nbval_kernel_start.ATTEMPTS - 1


def test_a_kernel_that_never_starts_still_fails_the_notebook():
    start, calls = flaky_start(failures=nbval_kernel_start.ATTEMPTS)
    with pytest.raises(RuntimeError, match="didn't respond"):
        nbval_kernel_start.retrying(start)()
    assert len(calls) == nbval_kernel_start.ATTEMPTS


def test_other_errors_are_not_retried():
    calls = []

    def start():
        calls.append(1)
        raise KeyError("no such kernel")
    with pytest.raises(KeyError):
        nbval_kernel_start.retrying(start)()
    assert calls == [1]


def test_the_plugin_wraps_nbvals_start_once(monkeypatch):
    from nbval import kernel
    start, _ = flaky_start(failures=1)
    monkeypatch.setattr(kernel, "start_new_kernel", start)
    nbval_kernel_start.pytest_configure(None)
    nbval_kernel_start.pytest_configure(None)  # loaded twice (a worker and its controller): wrapped once
    assert kernel.start_new_kernel.__wrapped__ is start
    assert kernel.start_new_kernel() == ("manager", "client")
