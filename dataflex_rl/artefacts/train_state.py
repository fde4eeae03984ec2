"""Reading a train state back (a checkpoint, a verl run's driver state, a selection round) without running its code.

A results tree can come from elsewhere (a collaborator's `results/`, a restored backup), and a pickle can name any
callable to call on load. These files hold only tensors, numbers, strings, their containers and Python's
`random.getstate()` tuples, so they are read with `torch.load(weights_only=True)` and nothing more is allowed. A file
that names anything else is refused with `UntrustedStateError`, before any of it runs and without moving or deleting
it; a file that is not a well-formed pickle (truncated, overwritten) raises torch's own error, which callers treat as
damaged (tests/test_safe_loading.py).
"""
from __future__ import annotations

import os
import pickle
import pickletools
import re
import zipfile
from pathlib import Path
from typing import Any

import torch


class UntrustedStateError(Exception):
    """A train state names objects beyond tensors, numbers and their containers: loading it could run code. Not a
    RuntimeError or UnpicklingError, so a caller that sets aside damaged (unreadable) files never catches it."""


def load_train_state(path: str | os.PathLike, run_state: str | os.PathLike) -> Any:
    """The object a train state file at `path` holds, read with `torch.load(weights_only=True)`; a file that names
    other objects raises UntrustedStateError, naming the file and `run_state`, the folder whose deletion trains the run
    from scratch."""
    path = Path(path)
    try:
        return torch.load(path, weights_only=True)
    except pickle.UnpicklingError as error:
        if not _well_formed(path):
            raise
        named = re.search(r"GLOBAL (\S+)", str(error))  # torch's refusal names the first global it refused
        what = f" (it names {named.group(1)})" if named else ""
        raise UntrustedStateError(
            f"{path}: refused to load this train state: it holds objects beyond tensors and numbers{what}, and "
            f"loading it could run code. The files a run writes hold only tensors and numbers, so this one was not "
            f"written by dataflex_rl's trainer, or was changed since. Resume only from results you trust; to train "
            f"the run from scratch instead, delete {run_state}. Nothing of it was loaded, and nothing was moved or "
            f"deleted") from None


def _well_formed(path: Path) -> bool:
    """Whether the file's pickle (a torch zip archive's data.pkl, or the file itself) parses to its end, read
    statically (pickletools: nothing is called): a refused well-formed pickle is a deliberate one, not damage."""
    try:
        with open(path, "rb") as handle:
            if zipfile.is_zipfile(handle):
                with zipfile.ZipFile(handle) as archive:
                    data = archive.read(next(n for n in archive.namelist() if n.rsplit("/", 1)[-1] == "data.pkl"))
            else:
                handle.seek(0)
                data = handle.read()
        for _ in pickletools.genops(data):
            pass
    except (OSError, ValueError, StopIteration, zipfile.BadZipFile):
        return False
    return True
