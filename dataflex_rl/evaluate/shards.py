"""Finished benchmarks of a scoring job (and finished parts of a solve-rate job), kept where a retry of the job finds
them.

Snakemake deletes every declared output of a failed job, so a job that fails on its fifth benchmark would rescore
the first four on retry. Each finished benchmark is therefore also written as a shard in `.state/` beside the outputs
(like a training run's state dir, not a declared output). A shard's name carries its key, the state key of the
benchmark's settings slice and its inputs' digests (dataflex_rl.artefacts.provenance.state_key), so a stale shard is
never reused. A job removes its benchmarks' shards once all its outputs are written, so a later rerun (after a
verifier fix, say) scores afresh.
"""
from __future__ import annotations

import glob
import os
import shutil
from pathlib import Path

from dataflex_rl.artefacts.atomic import atomic_path, remove_partial_writes
from dataflex_rl.artefacts.provenance import STATE_KEY_LENGTH

STATE = ".state"


def shard_path(output: str | os.PathLike, key: str) -> Path:
    """Where the shard of `output` scored under `key` lives: `.state/<benchmark>.<key>.parquet` beside it."""
    output = Path(output)
    return output.parent / STATE / f"{output.stem}.{key}{output.suffix}"


def part_path(output: str | os.PathLike, key: str, part: int, parts: int) -> Path:
    """Where part `part` (from 0) of `parts` of a job's one output lives: `.state/<name>.<key>.part<i>of<n>.parquet`
    beside it (remove_shards removes it with the whole-output shards)."""
    output = Path(output)
    return output.parent / STATE / f"{output.stem}.{key}.part{part}of{parts}{output.suffix}"


def publish(shard: Path, output: str | os.PathLike) -> None:
    """Copy a finished shard onto its declared output, atomically."""
    with atomic_path(output) as tmp:
        shutil.copyfile(shard, tmp)


def remove_shards(output: str | os.PathLike) -> None:
    """Delete every shard of `output`'s benchmark, current or stale, and what a killed write of one left behind
    (`atomic_path`'s `.<name>.*`); other benchmarks' shards stay, since another job may still need them."""
    output = Path(output)
    whole = f"{glob.escape(output.stem)}.{'?' * STATE_KEY_LENGTH}"
    for shard in (f"{whole}{output.suffix}", f"{whole}.part*of*{output.suffix}"):
        for path in (output.parent / STATE).glob(shard):
            path.unlink(missing_ok=True)
        remove_partial_writes(output.parent / STATE, shard)
