"""What the dry run knows of the training corpus's size before it is built: upper bounds on its rows, in all and per
domain. A procedural source draws its share of its domain's `items_per_domain` (rounded up) before exact duplicates
are dropped, so those draws bound the corpus from above; a corpus file adds its rows (JSONL lines, parquet metadata)
before they are validated."""
from __future__ import annotations

import math
from pathlib import Path
from typing import TYPE_CHECKING

from dataflex_rl.item_sources.registry import REGISTRY

if TYPE_CHECKING:
    from dataflex_rl.study.resolved import CorpusSettings


def source_rows_per_domain(corpus: CorpusSettings) -> dict[str, int]:
    """The most rows the procedural sources give each of their domains."""
    per_domain: dict[str, int] = {}
    for name in corpus.sources:
        if name in REGISTRY:
            per_domain[REGISTRY[name].domain] = per_domain.get(REGISTRY[name].domain, 0) + 1
    return {domain: sources * math.ceil(corpus.items_per_domain / sources) for domain, sources in per_domain.items()}


def corpus_rows_bound(corpus: CorpusSettings, workdir: Path, needed: int) -> tuple[int, str] | None:
    """At most how many rows the training corpus can have, and how that bound is made up — or None where a corpus
    file cannot be counted (its own checks report it). The corpus files are counted only when the sources alone are
    fewer than `needed`."""
    per_domain = source_rows_per_domain(corpus)
    rows = sum(per_domain.values())
    parts = [f"corpus.items_per_domain {corpus.items_per_domain} over {len(per_domain)} domain(s) of "
             f"corpus.sources: {rows}"]
    for index, entry in enumerate(corpus.files):
        if rows >= needed:
            break
        count = file_rows(workdir / entry["path"])
        if count is None:
            return None
        rows += count
        parts.append(f"corpus.files[{index}] {entry['path']!r}: {count}")
    return rows, "; ".join(parts)


def domain_rows_bound(corpus: CorpusSettings, workdir: Path, domain: str) -> tuple[int, int] | None:
    """At most how many rows of `domain` and of the other domains the training corpus can have, or None where a
    corpus file cannot be counted. A file's rows may each carry their own domain (its `domain` is only the default),
    so they count on both sides."""
    per_domain = source_rows_per_domain(corpus)
    target, others = per_domain.get(domain, 0), sum(n for d, n in per_domain.items() if d != domain)
    for entry in corpus.files:
        count = file_rows(workdir / entry["path"])
        if count is None:
            return None
        target, others = target + count, others + count
    return target, others


def file_rows(path: Path) -> int | None:
    """Rows of a corpus file before validation: JSONL non-blank lines, parquet row count from its metadata; None for
    anything but a regular file (config_checks.corpus_file_errors refuses it)."""
    if not path.is_file():
        return None
    try:
        if path.suffix == ".parquet":
            import pyarrow.parquet as pq

            return pq.ParquetFile(path).metadata.num_rows
        with open(path, "rb") as handle:
            return sum(1 for line in handle if line.strip())
    except (OSError, ValueError):
        return None
