"""Training corpus and benchmark item sets built from the registry, with exact de-duplication of prompts, plus the
researcher's own corpus files, validated row by row."""
from __future__ import annotations

import json
import math
from dataclasses import dataclass
from pathlib import Path
from typing import Sequence

import pandas as pd

from dataflex_rl.item_sources.loaders import load_file_items, load_hub_items
from dataflex_rl.item_sources.paths import benchmark_paths
from dataflex_rl.item_sources.registry import Benchmark, get_benchmark, get_source
from dataflex_rl.item_sources.sources import generate_items
from dataflex_rl.artefacts.items import CORPUS_COLUMNS, DOMAINS
from dataflex_rl.corpus.validation import (FILE_ANSWER_FORMATS, FileReport, KeptRows, as_text, file_problem,
                                          keep_valid, read_jsonl, settle, text_type_problem)
from dataflex_rl.corpus.validation_settings import ValidationSettings


def drop_exact_duplicates(items: pd.DataFrame) -> tuple[pd.DataFrame, int]:
    """Keep the first row of each distinct prompt text (whitespace-trimmed); return the rows and how many were dropped."""
    key = items["prompt"].str.strip()
    keep = ~key.duplicated(keep="first")
    return items[keep].reset_index(drop=True), int((~keep).sum())


@dataclass(frozen=True)
class CorpusFile:
    """A researcher's JSONL or parquet file of training rows (config `corpus.files`). `domain` and `answer_format`
    apply to rows that do not carry their own; `source` defaults to the file's stem."""

    path: str
    source: str
    domain: str | None = None
    answer_format: str | None = None

    @classmethod
    def from_config(cls, entry: dict) -> "CorpusFile":
        return cls(path=entry["path"], source=entry.get("source", Path(entry["path"]).stem),
                   domain=entry.get("domain"), answer_format=entry.get("answer_format"))


_FILE_PROMPT_COLUMNS = ("prompt", "question")
_FILE_SUFFIXES = (".jsonl", ".parquet")


def _file_records(path: Path, report: FileReport) -> list[tuple[int, dict]]:
    """(1-based line or row number, record) of a corpus file; unreadable JSONL lines are quarantined by the reader."""
    if path.suffix == ".jsonl":
        return list(read_jsonl(path, report))
    records = pd.read_parquet(path).to_dict("records")
    report.rows_in += len(records)
    return list(enumerate(records, start=1))


def _field_type_problem(record: dict) -> str | None:
    """The first text field of a file record holding another type (a list, an object, a boolean), or None."""
    prompt_column = next((c for c in _FILE_PROMPT_COLUMNS if c in record), "prompt")
    return next((problem for column in (prompt_column, "answer", "id", "domain", "answer_format")
                 if (problem := text_type_problem(column, record.get(column)))), None)


def _metadata_value(value):
    return value.tolist() if hasattr(value, "tolist") else str(value)


def _file_item(spec: CorpusFile, line: int, record: dict) -> dict:
    """A corpus row from a file record: text fields as text (None when absent), other columns into metadata."""
    prompt_column = next((c for c in _FILE_PROMPT_COLUMNS if c in record), "prompt")
    item_id = as_text(record.get("id"))
    return {
        "id": item_id if item_id is not None else f"{spec.path}:{line}",
        "domain": as_text(record.get("domain")) or spec.domain,
        "source": spec.source,
        "prompt": as_text(record.get(prompt_column)),
        "answer": as_text(record.get("answer")),
        "answer_format": as_text(record.get("answer_format")) or spec.answer_format,
        "metadata": json.dumps({k: v for k, v in record.items()
                                if k not in (prompt_column, "answer", "id", "domain", "answer_format")},
                               sort_keys=True, default=_metadata_value),
    }


def load_corpus_file(spec: CorpusFile, kept: KeptRows, settings: ValidationSettings) -> tuple[pd.DataFrame, FileReport]:
    """A corpus file's valid rows (checked against `kept`, the rows already in the corpus) and its report."""
    path = Path(spec.path)
    if path.suffix not in _FILE_SUFFIXES:
        raise ValueError(f"corpus.files: {spec.path} is neither JSONL nor parquet; use a .jsonl or .parquet file")
    report = FileReport(spec.path, unreadable=file_problem(path))
    items = []
    for line, record in [] if report.unreadable else _file_records(path, report):
        if problem := _field_type_problem(record):
            report.quarantine(line, "wrong_type", problem, row=record)
        else:
            items.append((line, _file_item(spec, line, record)))
    good = keep_valid(items, report, kept, FILE_ANSWER_FORMATS, settings)
    return pd.DataFrame([item for _, item in good], columns=list(CORPUS_COLUMNS)), report


def build_corpus(source_names: list[str], items_per_domain: int, seed: int, files: Sequence[dict] = (),
                 settings: ValidationSettings = ValidationSettings.for_section("corpus"),
                 quarantine: str | None = None) -> tuple[pd.DataFrame, dict]:
    """Draw every source's share of its domain's budget, drop exact duplicate prompts (generators repeat), then add
    the rows of the researcher's `files` (config corpus.files) that pass validation; the others are written to
    `quarantine` and counted per file, for the quarantine gate (see dataflex_rl.corpus.validation)."""
    sources = [get_source(name) for name in source_names]
    frames, audit = [], {"seed": seed, "items_per_domain": items_per_domain, "sources": {}}
    for domain in DOMAINS:
        in_domain = [s for s in sources if s.domain == domain]
        for source in in_domain:
            n = math.ceil(items_per_domain / len(in_domain))
            frame, dropped = drop_exact_duplicates(pd.DataFrame(generate_items(source, n, seed, "train")))
            frames.append(frame)
            audit["sources"][source.name] = {"domain": domain, "generated": n, "duplicates_dropped": dropped,
                                             "kept": len(frame)}
    corpus, cross_dropped = drop_exact_duplicates(pd.concat(frames, ignore_index=True)[list(CORPUS_COLUMNS)])
    audit["cross_source_duplicates_dropped"] = cross_dropped
    specs = [CorpusFile.from_config(entry) for entry in files]
    paths = [spec.path for spec in specs]
    if len(set(paths)) < len(paths):
        raise ValueError(f"corpus.files: a path is listed twice ({paths}); list each file once")
    kept = KeptRows(set(corpus["id"]), set(corpus["prompt"].str.strip()))
    loaded = [load_corpus_file(spec, kept, settings) for spec in specs]
    audit.update(settle([report for _, report in loaded], quarantine))
    if loaded:
        corpus = pd.concat([corpus] + [frame for frame, _ in loaded], ignore_index=True)
    audit["rows"] = len(corpus)
    audit["rows_per_domain"] = {d: int(n) for d, n in corpus["domain"].value_counts().sort_index().items()}
    return corpus, audit


def build_procedural_benchmark(benchmark: Benchmark, n_items: int, seed: int) -> pd.DataFrame:
    """`n_items` distinct held-out items of a procedural stand-in (drawn with a seed the corpus does not use)."""
    drawn = pd.DataFrame(generate_items(benchmark.source, 2 * n_items, seed, f"bench-{seed}"))
    unique, _ = drop_exact_duplicates(drawn)
    items = unique.head(n_items).copy()
    items.insert(0, "benchmark", benchmark.name)
    return items


def load_benchmark_file(benchmark: Benchmark, path: str | Path | Sequence[str | Path]) -> pd.DataFrame:
    """A real benchmark's items from its local file(s), read in the benchmark's own schema
    (dataflex_rl.item_sources.loaders: a file without the native columns is an error naming them)."""
    return load_file_items(benchmark, path)


def benchmark_items(name: str, n_items: int, seed: int, path: str | Path | Sequence[str | Path] | None = None,
                    hub_fallback: bool = False) -> pd.DataFrame:
    """A benchmark's items: drawn for a procedural stand-in; for a real benchmark read from `path` (one file or the
    several that make the benchmark), or — when none is there and `hub_fallback` is set — from the Hugging Face hub
    by the registry's dataset name."""
    benchmark = get_benchmark(name)
    if benchmark.procedural:
        return build_procedural_benchmark(benchmark, n_items, seed)
    if path is not None and (any(Path(p).exists() for p in benchmark_paths(path)) or not hub_fallback):
        return load_benchmark_file(benchmark, path)
    if hub_fallback:
        return load_hub_items(benchmark)
    raise FileNotFoundError(f"benchmark {name!r} is a real benchmark: set benchmarks.files.{name} in the config "
                            "to its local file(s), or benchmarks.hub_fallback: true to load it from "
                            "the Hugging Face hub")
