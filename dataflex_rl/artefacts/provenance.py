"""Fingerprints that travel with artefacts: the one provenance scheme of the pipeline.

A job that builds a model, a trained run or a score writes `provenance.json` beside its outputs
(dataflex_rl.artefacts.layout), last and atomically:
  fingerprint  sha256 of the canonical JSON (sorted keys, no spaces, UTF-8) of its settings slice
               (dataflex_rl.study.resolved): a function of the config alone, so the audit recomputes the expected one
  settings     the slice itself, {config key: value}, so a stale artefact names the keys that changed
  inputs       {role: {path, sha256}} of the artefacts it was built from, as verified when it read them
  outputs      {path relative to the provenance file's folder: sha256} of every file it wrote
A consuming job verifies its inputs against their producers' provenance before using them (`verified_digest`), so a
damaged file is reported with its path instead of failing somewhere inside torch; the audit does the same.

Every job that reads another job's artefact records that artefact's sha256, as read, in the same `inputs` shape
({role: {path, sha256}}): in its provenance record; in the `inputs` key of a JSON report it writes instead
(decontamination, calibration, parse gate, regime audit); in the key-value metadata of a parquet table it writes
instead (records, solve rates; `inputs_metadata`, `parquet_inputs`). Each file is hashed once per job. The audit
compares what was read with what is on disk now (dataflex_rl.report.audit_inputs).

Resumable state (a run's checkpoints, a scoring job's finished benchmarks) is kept under a *state key*: the
fingerprint of the slice (less what may change without invalidating the state) and the digests of the verified
inputs. A changed run starts afresh by itself; an unchanged one resumes.
"""
from __future__ import annotations

import hashlib
import json
import os
from pathlib import Path
from typing import Any, Iterable, Mapping

from dataflex_rl.artefacts.atomic import write_json
from dataflex_rl.artefacts.layout import PROVENANCE

STATE_KEY_LENGTH = 16


class DamagedArtefactError(RuntimeError):
    """An artefact is missing, or its bytes are not those its producing job recorded."""


def canonical_json(value: Any) -> str:
    return json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=False)


def fingerprint(settings: Mapping[str, Any]) -> str:
    """sha256 hex digest of the canonical JSON of a settings slice; stable across key order, processes, machines."""
    return hashlib.sha256(canonical_json(settings).encode("utf-8")).hexdigest()


def file_digest(path: str | os.PathLike) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as handle:
        for block in iter(lambda: handle.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def _artefact_files(path: Path) -> list[Path]:
    """The files of an artefact: the file itself, or every file under a directory but its provenance record."""
    if path.is_dir():
        return sorted(p for p in path.rglob("*") if p.is_file() and p.name != PROVENANCE)
    return [path]


def artefact_digest(path: str | os.PathLike, known: Mapping[Path, str] | None = None) -> str:
    """sha256 of a file, or of a directory's files (relative path and bytes, in path order). `known`: digests
    already computed, by resolved path, so that a verified artefact is not read twice."""
    known = known or {}

    def digest_of(file: Path) -> str:
        return known.get(file.resolve()) or file_digest(file)

    path = Path(path)
    if not path.is_dir():
        return digest_of(path)
    digest = hashlib.sha256()
    for file in _artefact_files(path):
        digest.update(file.relative_to(path).as_posix().encode() + b"\0" + digest_of(file).encode())
    return digest.hexdigest()


def write_provenance(record_path: str | os.PathLike, settings: Mapping[str, Any], outputs: Iterable[str | os.PathLike],
                     inputs: Mapping[str, Mapping[str, str]] | None = None,
                     runtime: Mapping[str, Any] | None = None) -> dict[str, Any]:
    """Write the provenance record of finished `outputs` (files or directories) atomically; returns it. `runtime`:
    what the job ran with that its settings do not fix (verl: the attention kernel it found), recorded beside them,
    outside the fingerprint; absent when empty."""
    folder = Path(record_path).parent
    files = [file for output in outputs for file in _artefact_files(Path(output))]
    record = {
        "fingerprint": fingerprint(settings),
        "settings": dict(settings),
        "inputs": {role: dict(entry) for role, entry in (inputs or {}).items()},
        "outputs": {os.path.relpath(file, folder): file_digest(file) for file in files},
    }
    if runtime:
        record["runtime"] = dict(runtime)
    write_json(record_path, record)
    return record


RECORD_KEYS = ("fingerprint", "settings", "outputs")


def read_provenance(record_path: str | os.PathLike) -> dict[str, Any]:
    """A provenance record, refused (DamagedArtefactError, naming the file) when it is absent, not JSON, or JSON that
    lacks any of RECORD_KEYS (a truncated or hand-edited record)."""
    path = Path(record_path)
    if not path.is_file():
        raise DamagedArtefactError(f"{path}: no provenance record; the artefact beside it was not finished by its "
                                   f"job — rerun that job (snakemake -f <its output>)")
    try:
        record = json.loads(path.read_text())
    except ValueError as error:
        raise DamagedArtefactError(f"{path}: unreadable provenance record ({error}); rerun the job that wrote it") \
            from error
    lacking = [key for key in RECORD_KEYS if not isinstance(record, dict) or key not in record]
    if lacking or not isinstance(record["outputs"], dict):
        raise DamagedArtefactError(f"{path}: not a provenance record (lacks {', '.join(lacking) or 'an outputs map'}); "
                                   f"rerun the job that wrote it")
    return record


def damage(record: Mapping[str, Any], record_path: str | os.PathLike,
           found: dict[Path, str] | None = None, artefact: str | os.PathLike | None = None) -> list[str]:
    """Every output of `record` (read from `record_path`) that is missing or whose bytes changed, one line each with
    its path. `found` collects the digests computed, by resolved path. `artefact`: check only the outputs that are it
    or lie under it (a run's metrics without its model's weights); a record that lists none of them is damage too."""
    folder = Path(record_path).parent
    found = {} if found is None else found
    outputs = record["outputs"]
    if artefact is not None:
        within = Path(os.path.relpath(artefact, folder))
        outputs = {name: digest for name, digest in outputs.items()
                   if Path(name) == within or within in Path(name).parents}
        if not outputs:
            return [f"{artefact}: not among the outputs recorded in {record_path}"]
    problems = []
    for name, expected in outputs.items():
        path = folder / name
        if not path.is_file():
            problems.append(f"{path}: missing (recorded in {record_path})")
            continue
        digest = found[path.resolve()] = file_digest(path)
        if digest != expected:
            problems.append(f"{path}: sha256 {digest[:12]}… ≠ {expected[:12]}… recorded in {record_path} "
                            f"(damaged or changed after it was written)")
    return problems


def verified_input(path: str | os.PathLike, record_path: str | os.PathLike,
                   whole_record: bool = True) -> dict[str, str]:
    """{path, fingerprint, sha256} of an input artefact after checking every output of its producer's record against
    it (`whole_record=False`: only the files of `path`, so that reading a run's metrics does not hash its model);
    raises DamagedArtefactError naming each damaged file and the fix."""
    record, found = read_provenance(record_path), {}
    problems = damage(record, record_path, found, artefact=None if whole_record else path)
    if problems:
        raise DamagedArtefactError("damaged input artefact:\n  " + "\n  ".join(problems)
                                   + "\nRebuild it: delete it and rerun, or `snakemake -f <that file>`")
    return {"path": str(path), "fingerprint": record["fingerprint"], "sha256": artefact_digest(path, found)}


def plain_input(path: str | os.PathLike) -> dict[str, str]:
    """{path, sha256} of an input artefact without a provenance record of its own (a corpus or benchmark file)."""
    return {"path": str(path), "sha256": artefact_digest(path)}


# The parquet key-value metadata key under which a table records the inputs it was built from.
INPUTS_METADATA_KEY = "dataflex_rl.inputs"


def inputs_metadata(inputs: Mapping[str, Mapping[str, str]]) -> dict[str, str]:
    """The parquet metadata that records `inputs` ({role: {path, sha256}}): `atomic.write_parquet(..., metadata=)`."""
    return {INPUTS_METADATA_KEY: canonical_json({role: dict(entry) for role, entry in inputs.items()})}


def parquet_inputs(path: str | os.PathLike) -> dict[str, dict[str, str]]:
    """The inputs a parquet table recorded in its metadata (`inputs_metadata`); {} for a table that recorded none.
    Reads the footer only."""
    import pyarrow.parquet as pq

    metadata = pq.read_schema(path).metadata or {}
    recorded = metadata.get(INPUTS_METADATA_KEY.encode())
    return json.loads(recorded) if recorded else {}


def state_key(settings: Mapping[str, Any], inputs: Mapping[str, Mapping[str, str]]) -> str:
    """The name of resumable state: the slice's fingerprint and the inputs' digests."""
    digests = {role: entry["sha256"] for role, entry in inputs.items()}
    return fingerprint({"settings": fingerprint(settings), "inputs": digests})[:STATE_KEY_LENGTH]


class StaleArtefactError(RuntimeError):
    """An input artefact was built with other settings than the consuming job's slice holds for it."""


def settings_differences(recorded: Mapping[str, Any], expected: Mapping[str, Any]) -> list[str]:
    """Each key of a producer's recorded slice whose value `expected` (the consumer's slice, a superset of it) does not
    hold, as `key: recorded R, expected E`; values are compared as canonical JSON, as their fingerprints are."""
    missing = object()
    return [f"{key}: recorded {value!r}, expected "
            + ("(no such key)" if expected.get(key, missing) is missing else repr(expected[key]))
            for key, value in sorted(recorded.items())
            if key not in expected or canonical_json(value) != canonical_json(expected[key])]


def refuse_other_settings(artefact: str | os.PathLike, record_path: str | os.PathLike,
                          expected: Mapping[str, Any]) -> None:
    """Refuse (StaleArtefactError, naming the record, each differing key and the fix) an input artefact whose
    recorded settings are not those `expected` holds: a `snakemake --touch` after a config change marks stale
    weights current, and a job reading them would write a record claiming settings they were not built with."""
    # the output Snakemake knows: a directory that keeps its record inside, or the record beside the artefact
    target = artefact if Path(record_path).parent == Path(artefact) else record_path
    differences = settings_differences(read_provenance(record_path)["settings"], expected)
    if differences:
        raise StaleArtefactError(
            f"{record_path}: the model was built with other settings than this job's slice:\n  "
            + "\n  ".join(differences)
            + f"\nIts outputs are stale (was `snakemake --touch` run after a config change?). Rebuild it: "
              f"`snakemake -R {target}` (or delete the folder it lies in) and rerun; do not use --touch "
              f"after changing settings. Nothing was written")
