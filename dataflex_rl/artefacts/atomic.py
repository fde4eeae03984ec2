"""Atomic file output: every artefact a rule declares appears only when it is complete.

Write to a temporary name in the destination directory, fsync, then rename over the target, so a killed job never
leaves a half-written file that a later run would mistake for a finished one.
"""
from __future__ import annotations

import contextlib
import json
import os
import shutil
import tempfile
import threading
from pathlib import Path
from typing import Any, Iterator, Mapping


_UMASK_LOCK = threading.Lock()


def _umask() -> int:
    """The process's umask. os.umask can only be read by setting it, so it is set to the strict 0o077 (a file another
    thread creates meanwhile is at most less readable, never more) and restored at once, under a lock so two readers
    never restore each other's value; read per call, not at import, so a umask set later is honoured."""
    with _UMASK_LOCK:
        current = os.umask(0o077)
        os.umask(current)
    return current


@contextlib.contextmanager
def atomic_path(path: str | os.PathLike, suffix: str = "") -> Iterator[Path]:
    """Yield a temporary path beside `path`; on success fsync it and rename it onto `path`, on failure remove it. The
    file is readable as the umask says (0o666 & ~umask), like a file open() creates, not mkstemp's 0600."""
    target = Path(path)
    target.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp_name = tempfile.mkstemp(prefix=f".{target.name}.", suffix=suffix or target.suffix, dir=target.parent)
    try:
        # mkstemp makes the file 0600 whatever the umask; a result gets the mode open() would give it
        os.fchmod(fd, 0o666 & ~_umask())
    finally:
        os.close(fd)
    tmp = Path(tmp_name)
    try:
        yield tmp
        with open(tmp, "rb") as handle:
            os.fsync(handle.fileno())
        os.replace(tmp, target)
    finally:
        tmp.unlink(missing_ok=True)


@contextlib.contextmanager
def atomic_directory(path: str | os.PathLike) -> Iterator[Path]:
    """Yield an empty temporary directory beside `path`; on success it replaces `path`, on failure it is removed. A
    directory a killed attempt left (`.<name>.tmp`) is cleared first."""
    target = Path(path)
    tmp = target.with_name(f".{target.name}.tmp")
    shutil.rmtree(tmp, ignore_errors=True)
    tmp.mkdir(parents=True)
    try:
        yield tmp
        shutil.rmtree(target, ignore_errors=True)
        os.replace(tmp, target)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


def remove_partial_writes(directory: str | os.PathLike, name_pattern: str) -> None:
    """Delete the temporary files that killed `atomic_path` writes left in `directory` for targets whose names match
    the glob `name_pattern` (a killed process runs no `finally`); pass `glob.escape(name)` for one exact name."""
    for leftover in Path(directory).glob(f".{name_pattern}.*"):
        leftover.unlink(missing_ok=True)


def write_text(path: str | os.PathLike, text: str) -> None:
    with atomic_path(path) as tmp:
        tmp.write_text(text, encoding="utf-8")


def write_json(path: str | os.PathLike, obj: Any) -> None:
    write_text(path, json.dumps(obj, indent=2, sort_keys=True, default=str) + "\n")


def write_parquet(path: str | os.PathLike, frame, metadata: Mapping[str, str] | None = None) -> None:
    """Write a pandas DataFrame to parquet atomically (index dropped); `metadata`: {key: text} added to the file's
    key-value metadata (dataflex_rl.artefacts.provenance.inputs_metadata)."""
    with atomic_path(path) as tmp:
        if not metadata:
            frame.to_parquet(tmp, index=False)
            return
        import pyarrow as pa
        import pyarrow.parquet as pq

        table = pa.Table.from_pandas(frame, preserve_index=False)
        extra = {key.encode(): value.encode() for key, value in metadata.items()}
        pq.write_table(table.replace_schema_metadata({**(table.schema.metadata or {}), **extra}), tmp)


def write_csv(path: str | os.PathLike, frame) -> None:
    with atomic_path(path) as tmp:
        frame.to_csv(tmp, index=False)
