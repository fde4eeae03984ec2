"""One train job at a time in a run's state folder.

Snakemake's own lock is one per working directory, and its lock message suggests `snakemake --unlock`, after which a
second invocation plans the same train job again while the first still runs it: two processes would write the same
checkpoints and outputs. A train job therefore holds an exclusive `flock` on `<state>/.lock` for its whole life. The
kernel releases it when the process ends, however it ends (a SIGKILL, a node lost under Slurm), so a killed job never
leaves a lock that blocks its rerun; the pid and host written into the file only name the holder in the refusal.
"""
from __future__ import annotations

import fcntl
import os
import socket
from contextlib import contextmanager
from pathlib import Path
from typing import Iterator

LOCK_FILE = ".lock"


class StateLockedError(RuntimeError):
    """Another live process holds the lock of this state folder."""


@contextmanager
def held_state(state_dir: str | os.PathLike) -> Iterator[Path]:
    """Hold the exclusive lock of `state_dir` (created if absent) while the block runs; refuse at once, naming the
    folder and its holder, when another process holds it."""
    folder = Path(state_dir)
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / LOCK_FILE
    with open(path, "a+") as handle:
        try:
            fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            handle.seek(0)
            holder = handle.read().strip() or "a process that wrote no pid"
            raise StateLockedError(
                f"{folder}: another train job holds this run's state folder ({holder}, lock {path}); two jobs "
                f"would write the same checkpoints and outputs. This happens when a second snakemake is started after "
                f"`snakemake --unlock` while the first still runs: let the first finish (or end it), then rerun. The "
                f"lock is released when its process ends, so a killed job never blocks a rerun") from None
        handle.seek(0)
        handle.truncate()
        handle.write(f"pid {os.getpid()} on {socket.gethostname()}\n")
        handle.flush()
        yield folder
