"""Cheap checks, made while Snakemake builds its DAG, that an artefact a planned job will read can be read at all.

A damaged file found here is rebuilt or refused before any job runs, so Snakemake never deletes the valid outputs of a
job that would then fail on it (rules/common.smk). Each check reads little: a parquet file's footer, a provenance
record's JSON. The job that reads the artefact still verifies its bytes against their record
(dataflex_rl.artefacts.provenance). A score's settings are checked here too, by its record's fingerprint (rule score
says why).
"""
from __future__ import annotations

import os
from typing import Any, Mapping

from dataflex_rl.artefacts.provenance import DamagedArtefactError, canonical_json, fingerprint, read_provenance


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


def settings_problem(path: str | os.PathLike, settings: Mapping[str, Any]) -> str | None:
    """Why the artefact whose provenance record is at `path` does not hold what `settings` (the slice the study expects
    of it) would build: its record is damaged (said with its path), or was written with other settings (said with the
    config keys that differ, not the path, so that one change is said once); None when its fingerprint is that of
    `settings`."""
    try:
        record = read_provenance(path)
    except DamagedArtefactError as error:
        return str(error)
    if record["fingerprint"] == fingerprint(settings):
        return None
    recorded = record["settings"] if isinstance(record["settings"], dict) else {}
    changed = [key for key in sorted(set(recorded) | set(settings))
               if key not in recorded or key not in settings
               or canonical_json(recorded[key]) != canonical_json(settings[key])]
    return f"built with other settings ({', '.join(changed) or 'its fingerprint only'})"
