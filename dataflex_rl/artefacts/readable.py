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


def records_problem(path: str | os.PathLike, scores: Mapping[str, str]) -> str | None:
    """Why the records table at `path` is not the one this config's records job writes from `scores` ({score file:
    its provenance record}): unreadable (parquet_problem), or built from other score files — some not among them, some
    of them missing, or bytes other than their records name now (a table copied from another study, or written by
    another config). None when it recorded exactly those scores, or recorded none (a table from before tables
    recorded their inputs). Reads the table's footer and the scores' small JSON records."""
    from dataflex_rl.artefacts.provenance import parquet_inputs

    if problem := parquet_problem(path):
        return problem
    recorded = {entry.get("path"): entry.get("sha256") for entry in parquet_inputs(path).values()
                if isinstance(entry, dict)}
    if not recorded:
        return None
    outside = [score for score in recorded if score not in scores]
    missing = [score for score in scores if score not in recorded]
    changed = [score for score, record in scores.items() if score in recorded
               and recorded[score] != _recorded_output(record, score)]
    if not (outside or missing or changed):
        return None
    return (f"{path}: built from other scores than this config's records job reads (of its {len(recorded)} score "
            f"files, {len(outside)} are not this study's and {len(changed)} hold other bytes than their records name "
            f"now; {len(missing)} of this study's {len(scores)} are not in it): copied from another study, or written "
            "by another config")


def _recorded_output(record_path: str, output: str) -> str | None:
    """The sha256 the provenance record at `record_path` names for `output` (a file beside it); None where it cannot
    say (a missing or damaged record: the score's own job is replanned for that)."""
    try:
        return read_provenance(record_path)["outputs"].get(os.path.relpath(output, os.path.dirname(record_path)))
    except DamagedArtefactError:
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


def recorded_input_digest(record_path: str | os.PathLike, path: str | os.PathLike) -> str | None:
    """The sha256 the provenance record at `record_path` names for its input at `path` (its `inputs` entry of that
    path); None where it names none, or the record is damaged."""
    try:
        record = read_provenance(record_path)
    except DamagedArtefactError:
        return None
    inputs = record.get("inputs")
    entries = inputs.values() if isinstance(inputs, dict) else []
    return next((entry.get("sha256") for entry in entries
                 if isinstance(entry, dict) and entry.get("path") == str(path)), None)
