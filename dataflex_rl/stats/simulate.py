"""Synthetic records with a known truth: for coverage checks of the statistics and for timing the tables.

Each (model, method) has a true per-benchmark accuracy; a seed adds a run effect shared by all its benchmarks (what
pairing by seed cancels) and binomial item noise. The untrained base is one deterministic run per model.
"""
from __future__ import annotations

from typing import Sequence

import numpy as np
import pandas as pd

from dataflex_rl.item_sources.registry import PAPER_BENCHMARKS, get_benchmark
from dataflex_rl.artefacts.layout import UNTRAINED, run_id
from dataflex_rl.records.run_records import RECORD_COLUMNS


def simulate_records(models: Sequence[str], methods: Sequence[str], seeds: Sequence[int], *,
                     benchmarks: Sequence[str] = tuple(PAPER_BENCHMARKS), items: int | None = None,
                     untrained: bool = True, rng: int = 0) -> pd.DataFrame:
    """A validated-shape records table (RECORD_COLUMNS) over registry benchmarks; sizes from the registry (500 where it
    has none) unless `items` is given."""
    generator = np.random.default_rng(rng)
    sizes = {b: items or get_benchmark(b).size or 500 for b in benchmarks}
    rows = []
    for model in models:
        base = generator.uniform(0.1, 0.8, len(benchmarks))
        arms = [(UNTRAINED, None)] if untrained else []
        arms += [(m, s) for m in methods for s in seeds]
        effects = {m: generator.normal(0.02, 0.01, len(benchmarks)) for m in methods}
        seed_effect = {s: generator.normal(0, 0.01) for s in seeds}
        for method, seed in arms:
            truth = base if seed is None else base + effects[method] + seed_effect[seed]
            for bench, p in zip(benchmarks, np.clip(truth, 0.01, 0.99)):
                n = sizes[bench]
                correct = int(generator.binomial(n, p))
                length = float(generator.uniform(200, 900))
                rows.append({
                    "model": model, "method": method, "seed": seed, "run_id": run_id(model, method, seed),
                    "benchmark": bench, "domain": get_benchmark(bench).domain, "n": n, "correct": correct,
                    "score": correct / n, "counts_inferred": False,
                    "mean_length": length, "mean_chars": 3.6 * length, "parse_rate": 1.0, "parse_flagged": False,
                    "steps": 0 if seed is None else 300, "fingerprint": None, "package_versions": None,
                })
    frame = pd.DataFrame(rows, columns=list(RECORD_COLUMNS))
    return frame.astype({"seed": "Int64", "steps": "Int64", "n": "int64", "correct": "int64",
                         "counts_inferred": "bool", "parse_flagged": "boolean"})
