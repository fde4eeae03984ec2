"""A workflow script's stderr goes to its rule's log file — the error that stops the job included.

`contextlib.redirect_stderr` alone restores stderr before Python prints an uncaught exception, so the log of a failed
job would be empty (or end just before the error) and `show-failed-logs` would show nothing useful; this writes the
traceback into the log before the job fails with it.
"""
from __future__ import annotations

import traceback
from contextlib import contextmanager, redirect_stderr
from typing import Iterator


@contextmanager
def job_log(path: str) -> Iterator[None]:
    """Send stderr to `path` (truncated) for the duration, and append the traceback of an exception that escapes."""
    with open(path, "w") as log, redirect_stderr(log):
        try:
            yield
        except BaseException:
            traceback.print_exc(file=log)
            log.flush()
            raise
