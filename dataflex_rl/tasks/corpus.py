"""Training corpus and benchmark item sets built from the registry, with exact de-duplication of prompts."""
from __future__ import annotations

import json
import math
from pathlib import Path

import pandas as pd

from dataflex_rl.tasks.registry import Benchmark, get_benchmark, get_source
from dataflex_rl.tasks.sources import DOMAINS, generate_items

CORPUS_COLUMNS = ["id", "domain", "source", "prompt", "answer", "answer_format", "metadata"]


def drop_exact_duplicates(items: pd.DataFrame) -> tuple[pd.DataFrame, int]:
    """Keep the first row of each distinct prompt text (whitespace-trimmed); return the rows and how many were dropped."""
    key = items["prompt"].str.strip()
    keep = ~key.duplicated(keep="first")
    return items[keep].reset_index(drop=True), int((~keep).sum())


def build_corpus(source_names: list[str], items_per_domain: int, seed: int) -> tuple[pd.DataFrame, dict]:
    """Draw every source's share of its domain's budget, then drop exact duplicate prompts (generators repeat)."""
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
    corpus, cross_dropped = drop_exact_duplicates(pd.concat(frames, ignore_index=True)[CORPUS_COLUMNS])
    audit["cross_source_duplicates_dropped"] = cross_dropped
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


_PROMPT_COLUMNS = ("prompt", "question", "problem", "input")
_ANSWER_COLUMNS = ("answer", "target", "solution", "gold")


def load_benchmark_file(benchmark: Benchmark, path: str | Path) -> pd.DataFrame:
    """Read a local JSONL or parquet benchmark file into benchmark item rows (extra columns go into metadata)."""
    path = Path(path)
    if not path.is_file():
        raise FileNotFoundError(f"benchmark {benchmark.name!r}: file {path} does not exist")
    raw = pd.read_parquet(path) if path.suffix == ".parquet" else pd.read_json(path, lines=True)
    if raw.empty:
        raise ValueError(f"benchmark {benchmark.name!r}: file {path} has no rows")
    prompt_col = next((c for c in _PROMPT_COLUMNS if c in raw.columns), None)
    answer_col = next((c for c in _ANSWER_COLUMNS if c in raw.columns), None)
    if prompt_col is None or answer_col is None:
        raise ValueError(f"benchmark {benchmark.name!r}: {path} needs a prompt column (one of {_PROMPT_COLUMNS}) "
                         f"and an answer column (one of {_ANSWER_COLUMNS}); it has {list(raw.columns)}")
    extra = [c for c in raw.columns if c not in (prompt_col, answer_col, "id")]
    ids = raw["id"].astype(str) if "id" in raw.columns else pd.Series([f"{benchmark.name}-{i:06d}" for i in range(len(raw))])
    return pd.DataFrame({
        "benchmark": benchmark.name,
        "id": ids.values,
        "domain": benchmark.domain,
        "source": benchmark.name,
        "prompt": raw[prompt_col].astype(str).values,
        "answer": raw[answer_col].astype(str).values,
        "answer_format": benchmark.answer_format,
        "metadata": [json.dumps(row, sort_keys=True, default=str) for row in raw[extra].to_dict("records")],
    })


def benchmark_items(name: str, n_items: int, seed: int, path: str | Path | None = None) -> pd.DataFrame:
    """A benchmark's items: drawn for a procedural stand-in, read from `path` for a real benchmark."""
    benchmark = get_benchmark(name)
    if benchmark.procedural:
        return build_procedural_benchmark(benchmark, n_items, seed)
    if path is None:
        raise FileNotFoundError(f"benchmark {name!r} is a real benchmark: set benchmarks.files.{name} in the config "
                                "to its local JSONL or parquet file")
    return load_benchmark_file(benchmark, path)
