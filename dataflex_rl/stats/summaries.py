"""Per-run evaluation summaries (DESIGN: statistics protocol).

DB (the mean of the domain means) is the headline because it weights math, logic and science equally however many
benchmarks each has; Macro (mean over benchmarks) and Item (pooled items; the only summary that reads the counts,
inferred ones for imported records: dataflex_rl.records.run_records) are kept beside it to show how much the choice of
summary moves a ranking. Math-Heavy (the math benchmarks plus GPQA-Diamond, the authors' six-benchmark
average) is the summary the paper's own tables used. Scores stay in [0, 1] here; report tables convert to points.
"""
from __future__ import annotations

from typing import Mapping, Sequence

import pandas as pd

from dataflex_rl.records.run_records import validate_records

RUN_KEYS = ["model", "method", "seed", "run_id"]
SUMMARY_PREFIXES = ("DB-", "Macro-", "Item-", "Math-Heavy-")
MATH_HEAVY_EXTRA = "GPQA-Diamond"


def summary_columns(summaries: pd.DataFrame) -> list[str]:
    """The summary columns of a `run_summaries` table, headline (DB) first."""
    return [c for prefix in SUMMARY_PREFIXES for c in summaries.columns if c.startswith(prefix)]


def math_heavy_benchmarks(records: pd.DataFrame) -> list[str]:
    """The math-domain benchmarks plus GPQA-Diamond (or the registry stand-in for it); empty if either is absent."""
    from dataflex_rl.item_sources.registry import REGISTRY

    names = list(pd.unique(records["benchmark"]))
    math = [b for b in names if (records.loc[records["benchmark"] == b, "domain"] == "math").all()]
    extra = [b for b in names
             if b == MATH_HEAVY_EXTRA or (b in REGISTRY and REGISTRY[b].stands_for == MATH_HEAVY_EXTRA)]
    return math + extra[:1] if math and extra else []


def run_summaries(records: pd.DataFrame, extra_keys: Sequence[str] = (),
                  excluded: Mapping[str, Sequence[str]] | None = None) -> pd.DataFrame:
    """One row per run: "domain:<name>" means, then "DB-<n>", "Macro-<n>" and "Item-<n>" over its n benchmarks, and
    "Math-Heavy-<m>" (macro mean of the math benchmarks and GPQA-Diamond) when the records have those.

    Every run must carry the same benchmarks, otherwise a shared "DB-12" column would average different things — except
    the benchmarks `excluded` (model → names; dataflex_rl.stats.parse_flags) leaves out of all runs of a model, which
    the summaries of that model skip and name in `excluded_benchmarks`. `extra_keys` are run-level columns of the
    records (campaign, regime, …) carried into the summary.
    """
    validate_records(records)
    excluded = {model: set(names) for model, names in (excluded or {}).items()}
    benchmarks = set(records["benchmark"])
    keep = pd.Series([b not in excluded.get(m, ()) for m, b in zip(records["model"], records["benchmark"])],
                     index=records.index, dtype=bool)
    full_set = records
    records = records[keep]
    held = records.groupby("run_id")["benchmark"].agg(set)
    model_of = records.drop_duplicates("run_id").set_index("run_id")["model"]
    gaps = {run: sorted(benchmarks - excluded.get(model_of[run], set()) - have) for run, have in held.items()
            if have != benchmarks - excluded.get(model_of[run], set())}
    if gaps:
        raise ValueError(f"runs lack benchmarks that other runs have: {gaps}")

    domains = list(pd.unique(records["domain"]))
    per_domain = records.pivot_table(index="run_id", columns="domain", values="score", aggfunc="mean")[domains]
    totals = records.groupby("run_id")[["correct", "n"]].sum()
    k = len(benchmarks)
    summary = per_domain.rename(columns=lambda d: f"domain:{d}").rename_axis(columns=None)
    summary[f"DB-{k}"] = per_domain.mean(axis=1)
    summary[f"Macro-{k}"] = records.groupby("run_id")["score"].mean()
    summary[f"Item-{k}"] = totals["correct"] / totals["n"]
    heavy = math_heavy_benchmarks(full_set)
    if heavy:
        heavy_scores = records[records["benchmark"].isin(heavy)].groupby("run_id")["score"]
        summary[f"Math-Heavy-{len(heavy)}"] = heavy_scores.mean()

    extra = list(extra_keys)
    varying = [c for c in extra if (records.groupby("run_id")[c].nunique(dropna=False) > 1).any()]
    if varying:
        raise ValueError(f"extra keys {varying} vary within a run")
    runs = records.drop_duplicates("run_id").set_index("run_id")[RUN_KEYS[:-1] + extra]
    runs = runs.assign(excluded_benchmarks=[", ".join(sorted(excluded.get(m, ()))) for m in runs["model"]])
    out = runs.join(summary).reset_index()[RUN_KEYS + extra + ["excluded_benchmarks"] + list(summary.columns)]
    out["seed"] = out["seed"].astype("Int64")
    return out.sort_values(["model", "method", "seed"], na_position="first", ignore_index=True)
