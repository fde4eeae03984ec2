"""Evaluation sensitivity (DESIGN: statistics protocol): how much the choice of summary moves the method ranking.

For each summary (DB, Macro, Item, Math-Heavy) the methods are ranked by their mean over seeds; the ranking is compared
with DB's by Spearman ρ, and the spread (max − min of the method means) says how much there is to rank at all. The
untrained base is not a method and is left out. Tables are per model (a study cell), values in percentage points.
"""
from __future__ import annotations

import math
from typing import Sequence

import numpy as np
import pandas as pd
from scipy import stats

from dataflex_rl.artefacts.layout import UNTRAINED
from dataflex_rl.stats.paired import POINTS
from dataflex_rl.stats.summaries import summary_columns


def _trained(summaries: pd.DataFrame) -> pd.DataFrame:
    return summaries[summaries["method"] != UNTRAINED]


def method_means(summaries: pd.DataFrame, metrics: Sequence[str] | None = None) -> pd.DataFrame:
    """Per (model, method): n_seeds and the mean over seeds of each metric, in points; rows in order of appearance."""
    metrics = list(metrics or summary_columns(summaries))
    grouped = summaries.groupby(["model", "method"], sort=False)
    out = grouped[metrics].mean().mul(POINTS)
    out.insert(0, "n_seeds", grouped["seed"].count())
    return out.reset_index()


def _spearman(a: np.ndarray, b: np.ndarray) -> float:
    """Spearman ρ, NaN when either side is constant (no ranking) or there are fewer than two methods."""
    if len(a) < 2 or np.ptp(a) == 0 or np.ptp(b) == 0:
        return math.nan
    return float(stats.spearmanr(a, b).statistic)


def evaluation_sensitivity(summaries: pd.DataFrame, metrics: Sequence[str] | None = None,
                           reference: str | None = None) -> pd.DataFrame:
    """Per (model, metric): the ranking (best first), the winner, Spearman ρ with the reference's ranking (DB by
    default) over the method means, and the spread of the method means in points."""
    metrics = list(metrics or summary_columns(summaries))
    reference = reference or metrics[0]
    means = method_means(_trained(summaries), sorted(set(metrics) | {reference}))
    rows = []
    for model, block in means.groupby("model", sort=False):
        for metric in metrics:
            ordered = block.sort_values(metric, ascending=False, kind="stable")
            rows.append({
                "model": model, "metric": metric, "n_methods": len(block),
                "ranking": " > ".join(ordered["method"]), "winner": ordered["method"].iloc[0],
                "spearman_vs_" + reference: _spearman(block[metric].to_numpy(), block[reference].to_numpy()),
                "spread": float(block[metric].max() - block[metric].min()),
                "best": float(ordered[metric].iloc[0]),
            })
    return pd.DataFrame(rows)


def summary_spearman_matrix(summaries: pd.DataFrame, model: str, metrics: Sequence[str] | None = None) -> pd.DataFrame:
    """Spearman ρ between the method rankings of every pair of summaries, for one model."""
    metrics = list(metrics or summary_columns(summaries))
    block = method_means(_trained(summaries[summaries["model"] == model]), metrics)
    values = {m: block[m].to_numpy() for m in metrics}
    return pd.DataFrame([[_spearman(values[a], values[b]) for b in metrics] for a in metrics],
                        index=pd.Index(metrics, name="metric"), columns=metrics)


def domain_tradeoffs(summaries: pd.DataFrame) -> pd.DataFrame:
    """Per (model, method): the mean over seeds of each domain mean and of the headline, in points."""
    domains = [c for c in summaries.columns if c.startswith("domain:")]
    return method_means(summaries, domains + summary_columns(summaries)[:1])


def benchmark_means(records: pd.DataFrame, benchmarks: Sequence[str] | None = None) -> pd.DataFrame:
    """Per (model, method): the mean over seeds of each benchmark's score in points (wide, benchmarks in record order)
    and their mean — with the authors' six benchmarks this is their build_tables.py table."""
    names = list(benchmarks or pd.unique(records["benchmark"]))
    subset = records[records["benchmark"].isin(names)]
    wide = subset.pivot_table(index=["model", "method"], columns="benchmark", values="score", aggfunc="mean",
                              sort=False)
    wide = wide[names].mul(POINTS)
    wide["mean"] = wide.mean(axis=1)
    seeds = subset.groupby(["model", "method"], sort=False)["seed"].nunique().rename("n_seeds")
    return wide.join(seeds).reset_index().rename_axis(columns=None)
