"""Per-run evaluation summaries (DESIGN: statistics protocol).

DB (the mean of the domain means) is the headline because it weights math, logic and science equally however many
benchmarks each has; Macro (mean over benchmarks) and Item (pooled items) are kept beside it to show how much the
choice of summary moves a ranking. Scores stay in [0, 1] here; report tables convert to percentage points.
"""
from __future__ import annotations

import pandas as pd

from dataflex_rl.records import validate_records

RUN_KEYS = ["model", "method", "seed", "run_id"]


def run_summaries(records: pd.DataFrame) -> pd.DataFrame:
    """One row per run: "domain:<name>" means, then "DB-<n>", "Macro-<n>" and "Item-<n>" over its n benchmarks.

    Every run must carry the same benchmarks, otherwise a shared "DB-12" column would average different things.
    """
    validate_records(records)
    benchmarks = set(records["benchmark"])
    held = records.groupby("run_id")["benchmark"].agg(set)
    gaps = {run: sorted(benchmarks - have) for run, have in held.items() if have != benchmarks}
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

    runs = records.drop_duplicates("run_id").set_index("run_id")[RUN_KEYS[:-1]]
    out = runs.join(summary).reset_index()[RUN_KEYS + list(summary.columns)]
    out["seed"] = out["seed"].astype("Int64")
    return out.sort_values(["model", "method", "seed"], na_position="first", ignore_index=True)
