"""The content of the study's external input files (`corpus.files`, `benchmarks.files`), as sha256 digests taken when
the workflow is planned. They enter the settings slices of the jobs that read the files (dataflex_rl.study.resolved), so
a file replaced by other bytes replans those jobs whatever its modification time: `rsync -t`, `cp -p`, a restore from
backup or an older download moved into place all keep or set back the mtime Snakemake would otherwise go by.
"""
from __future__ import annotations

import hashlib
from pathlib import Path
from dataflex_rl.item_sources.paths import benchmark_paths
from dataflex_rl.study.resolved import Study


def file_digest(path: Path) -> str | None:
    """The sha256 of a regular file's bytes; None where there is none (a benchmark loaded from the hub instead, or a
    file the dry run's checks refuse)."""
    if not path.is_file():
        return None
    with open(path, "rb") as handle:
        return hashlib.file_digest(handle, "sha256").hexdigest()


def input_digests(study: Study, workdir: Path) -> dict[str, str | None]:
    """{path as the config writes it: digest} for every corpus, benchmark and validation file the study names,
    resolved against the workflow's working directory; nothing for a records-only study, which reads none."""
    if study.records_file:
        return {}
    paths = [entry["path"] for entry in study.corpus.files]
    paths += [path for entry in study.benchmarks.files.values() for path in benchmark_paths(entry)]
    paths += [entry["path"] for method in study.methods.values() if (entry := method.validation_file())]
    return {path: file_digest(Path(workdir) / path) for path in dict.fromkeys(paths)}
