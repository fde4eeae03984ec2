"""Cheap checks, made while Snakemake builds its DAG, that an artefact a planned job will read can be read at all.

A damaged file found here is rebuilt or refused before any job runs, so Snakemake never deletes the valid outputs of a
job that would then fail on it (rules/common.smk). Each check reads little: a parquet file's footer, a provenance
record's JSON. The job that reads the artefact still verifies its bytes against their record (dataflex_rl.provenance).
"""
from __future__ import annotations

import os

from dataflex_rl.provenance import DamagedArtefactError, read_provenance


def parquet_problem(path: str | os.PathLike) -> str | None:
    """Why the parquet file at `path` cannot be read (a truncated file has no footer), or None when its footer reads."""
    import pyarrow.parquet  # only where a finished study has such a file: a fresh dry run never imports it

    try:
        pyarrow.parquet.read_metadata(path)
    except (OSError, ValueError) as error:  # pyarrow's ArrowInvalid is a ValueError, its ArrowIOError an OSError
        return f"{path}: unreadable parquet ({error})"
    return None


def record_problem(path: str | os.PathLike) -> str | None:
    """Why the provenance record at `path` cannot be used (not JSON, not a record), or None when it reads."""
    try:
        read_provenance(path)
    except DamagedArtefactError as error:
        return str(error)
    return None
