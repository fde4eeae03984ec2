"""Finished benchmarks of a scoring job, kept where a retry of the job finds them.

Snakemake deletes every declared output of a failed job, so a job that fails on its fifth benchmark would rescore
the first four on retry. Each finished benchmark is therefore also written as a shard in `.state/` beside the outputs
(like a training run's state dir, not a declared output). A shard's name carries a digest of everything that decides
its records — the base model's files, the weights file, the items file and the scoring settings — so a stale shard is
never reused. A job removes its benchmarks' shards once all its outputs are written, so a later rerun (after a
verifier fix, say) scores afresh.
"""
from __future__ import annotations

import glob
import hashlib
import os
import shutil
from pathlib import Path

from dataflex_rl.atomic import atomic_path, remove_partial_writes

STATE = ".state"
_KEY_LENGTH = 16


def _hash_file(digest, path: Path) -> None:
    with open(path, "rb") as handle:
        for block in iter(lambda: handle.read(1 << 20), b""):
            digest.update(block)


def file_digest(path: str | os.PathLike) -> str:
    digest = hashlib.sha256()
    _hash_file(digest, Path(path))
    return digest.hexdigest()


def model_digest(base_dir: str | os.PathLike, weights_path: str | os.PathLike | None) -> str:
    """sha256 over every file of the base model directory (by relative path) and the weights file, if any."""
    base = Path(base_dir)
    digest = hashlib.sha256()
    for path in sorted(p for p in base.rglob("*") if p.is_file()):
        digest.update(path.relative_to(base).as_posix().encode() + b"\0")
        _hash_file(digest, path)
    if weights_path is not None:
        digest.update(b"weights\0")
        _hash_file(digest, Path(weights_path))
    return digest.hexdigest()


def shard_path(output: str | os.PathLike, *key_parts: str) -> Path:
    """Where the shard of `output` scored under `key_parts` lives: `.state/<benchmark>.<key>.parquet` beside it."""
    key = hashlib.sha256("\0".join(key_parts).encode()).hexdigest()[:_KEY_LENGTH]
    output = Path(output)
    return output.parent / STATE / f"{output.stem}.{key}{output.suffix}"


def publish(shard: Path, output: str | os.PathLike) -> None:
    """Copy a finished shard onto its declared output, atomically."""
    with atomic_path(output) as tmp:
        shutil.copyfile(shard, tmp)


def remove_shards(output: str | os.PathLike) -> None:
    """Delete every shard of `output`'s benchmark, current or stale, and what a killed write of one left behind
    (`atomic_path`'s `.<name>.*`); other benchmarks' shards stay, since another job may still need them."""
    output = Path(output)
    shard = f"{glob.escape(output.stem)}.{'?' * _KEY_LENGTH}{output.suffix}"
    for path in (output.parent / STATE).glob(shard):
        path.unlink(missing_ok=True)
    remove_partial_writes(output.parent / STATE, shard)
