"""A pytest plugin (`-p nbval_kernel_start`, loaded with nbval by make test): a notebook's kernel that
fails to start is started again.

With pytest-xdist several workers start kernels at the same moment. jupyter_client picks a kernel's
ports by binding free ones and releasing them for the kernel to take, so two kernels started together
can race for a port; the loser never answers, and nbval reports "Kernel didn't respond in 60 seconds"
as an error on every cell of that notebook (the kernel's own stderr, which would say why, goes to
/dev/null). That is a failure of the start, not of the notebook: this wraps nbval's
``start_new_kernel`` so that a start that raises is tried again, up to ``ATTEMPTS`` times in all,
with a warning in the log each time. A kernel that fails every attempt still fails the notebook.
"""
from __future__ import annotations

import functools
import logging

ATTEMPTS = 3
logger = logging.getLogger(__name__)


def retrying(start):
    """``start`` (nbval's ``start_new_kernel``), tried again when it raises ``RuntimeError``."""
    @functools.wraps(start)
    def start_new_kernel(*args, **kwargs):
        for attempt in range(1, ATTEMPTS):
            try:
                return start(*args, **kwargs)
            except RuntimeError as error:  # nbval has shut the half-started kernel down already
                logger.warning("kernel start %d of %d failed (%s); starting it again", attempt, ATTEMPTS, error)
        return start(*args, **kwargs)  # the last attempt: its error fails the notebook

    start_new_kernel.retrying = True
    return start_new_kernel


def pytest_configure(config):
    try:
        from nbval import kernel
    except ImportError:  # nbval not installed: nothing to wrap
        return
    if not getattr(kernel.start_new_kernel, "retrying", False):
        kernel.start_new_kernel = retrying(kernel.start_new_kernel)
