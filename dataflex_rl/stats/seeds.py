"""Seed sufficiency: would fewer seeds have given the same answer, and how small an effect can this many seeds see?

The paper argues in prose that 3 seeds are too few; here it is measured. For n = 2 … S, every n-seed subset (or a
random sample of `max_subsets` of them) is taken for all methods at once — seeds are matched, so a subset is a set of
seeds, not a set of runs — and the subset's method ranking is compared with the all-seed ranking: does the winner
match, and what is Spearman ρ. The minimum detectable effect is the smallest true mean paired difference that a
two-sided paired t test at level alpha finds with the given power, at the observed paired SD (dataflex_rl.stats.power,
which the dry run's power plan uses too).
"""
from __future__ import annotations

import functools
import itertools
import math
from typing import Sequence

import numpy as np
import pandas as pd
from scipy import stats

from dataflex_rl.artefacts.layout import UNTRAINED
from dataflex_rl.stats.paired import UnmatchedSeedsError
from dataflex_rl.stats.power import minimum_detectable_effect


def seed_matrix(summaries: pd.DataFrame, model: str, metric: str, *,
                complete_seeds_only: bool = False) -> pd.DataFrame:
    """Methods × seeds for one model; a seed some method lacks is an error naming the (method, seed) cells, or, with
    `complete_seeds_only`, left out (the study asked for an analysis of unmatched seeds: stats.pairing)."""
    runs = summaries[(summaries["model"] == model) & (summaries["method"] != UNTRAINED)]
    if runs.duplicated(["method", "seed"]).any():
        raise ValueError(f"{model}: a (method, seed) run repeats")
    matrix = runs.set_index(["method", "seed"])[metric].unstack("seed")
    matrix = matrix.loc[list(pd.unique(runs["method"])), sorted(matrix.columns)]
    rows, columns = np.nonzero(matrix.isna().to_numpy())  # row-major: method by method, seeds ascending
    missing = tuple((matrix.index[i], int(matrix.columns[j])) for i, j in zip(rows, columns))
    if missing and not complete_seeds_only:
        raise UnmatchedSeedsError(missing)
    return matrix.dropna(axis="columns").astype(float)


def _subsets(count: int, n: int, cap: int, rng: np.random.Generator) -> np.ndarray:
    """All n-subsets of range(count) if there are at most `cap`, else `cap` distinct ones drawn at random; one sorted
    subset a row, the rows sorted."""
    if math.comb(count, n) <= cap:
        return np.array(list(itertools.combinations(range(count), n)), dtype=np.intp).reshape(-1, n)
    chosen: set[tuple[int, ...]] = set()
    while len(chosen) < cap:
        chosen.add(tuple(sorted(rng.choice(count, size=n, replace=False).tolist())))
    return np.array(sorted(chosen), dtype=np.intp)


@functools.lru_cache(maxsize=8)
def _subset_plan(seed_counts: tuple[int, ...], cap: int, rng: int) -> tuple[tuple[np.ndarray, ...], ...]:
    """Per model (its number of seeds), the subsets of every size 2 … S, drawn in that order from one generator.

    The draws depend on the seed counts only, not on the metric, so the summaries of one study share one plan."""
    generator = np.random.default_rng(rng)
    plan = tuple(tuple(_subsets(count, n, cap, generator) for n in range(2, count + 1)) for count in seed_counts)
    for subsets in plan:
        for array in subsets:
            array.flags.writeable = False
    return plan


def _ranks(x: np.ndarray) -> np.ndarray:
    """Average ranks along the last axis (ties shared), as Spearman's ρ uses."""
    return stats.rankdata(x, axis=-1)


SUFFICIENCY_COLUMNS = ["model", "metric", "n_seeds", "of_seeds", "n_methods", "subsets", "winner",
                       "winner_agreement", "mean_spearman"]


def seed_sufficiency(summaries: pd.DataFrame, metric: str, *, max_subsets: int = 200, rng: int = 0,
                     complete_seeds_only: bool = False) -> pd.DataFrame:
    """Per (model, n seeds): subsets tried, how often the subset's winner is the all-seed winner, and mean Spearman ρ
    between the subset's and the all-seed method means (NaN-free subsets only). Models with < 2 methods are skipped.
    `complete_seeds_only`: see `seed_matrix`."""
    matrices = {model: seed_matrix(summaries, model, metric, complete_seeds_only=complete_seeds_only)
                for model in pd.unique(summaries["model"])}
    matrices = {model: matrix for model, matrix in matrices.items() if len(matrix) >= 2}
    plan = _subset_plan(tuple(matrix.shape[1] for matrix in matrices.values()), max_subsets, rng)
    rows = []
    for (model, matrix), subsets_by_size in zip(matrices.items(), plan):
        values, seeds = matrix.to_numpy(), list(matrix.columns)
        full = values.mean(axis=1)
        full_ranks = _ranks(full)
        winner = int(np.argmax(full))
        for n, subsets in enumerate(subsets_by_size, start=2):
            # [subsets, methods]; seed-major, so each mean sums its seeds left to right, as one subset alone does
            means = values.T[subsets.T].mean(axis=0)
            ranks = _ranks(means)
            # Pearson on ranks = Spearman; constant rows (all methods tied) have no ranking.
            centred = ranks - ranks.mean(axis=1, keepdims=True)
            target = full_ranks - full_ranks.mean()
            denom = np.sqrt((centred ** 2).sum(axis=1) * (target ** 2).sum())
            with np.errstate(invalid="ignore", divide="ignore"):
                rho = np.where(denom > 0, centred @ target / denom, np.nan)
            rows.append({
                "model": model, "metric": metric, "n_seeds": n, "of_seeds": len(seeds), "n_methods": len(matrix),
                "subsets": len(subsets), "winner": matrix.index[winner],
                "winner_agreement": float(np.mean(means.argmax(axis=1) == winner)),
                "mean_spearman": float(np.nanmean(rho)) if np.isfinite(rho).any() else math.nan,
            })
    # With one seed (a pilot) there is no subset to try: the table has its columns and no rows.
    return pd.DataFrame(rows, columns=SUFFICIENCY_COLUMNS)


def detectable_effects(comparisons: pd.DataFrame, seed_counts: Sequence[int] = (3, 6, 12), power: float = 0.8,
                       alpha: float = 0.05) -> pd.DataFrame:
    """Per comparison row: observed paired SD and |Δ|, the MDE at its own seed count and at each of `seed_counts`
    (same units as the comparison, points), and whether the observed |Δ| reaches the MDE at its seed count."""
    rows = []
    for row in comparisons.itertuples(index=False):
        entry = {"model": row.model, "method": row.method, "control": row.control, "metric": row.metric,
                 "n_seeds": row.n_seeds, "sd": row.sd, "abs_delta": abs(row.delta_mean),
                 "mde": minimum_detectable_effect(row.sd, row.n_seeds, power, alpha)}
        entry.update({f"mde_{n}_seeds": minimum_detectable_effect(row.sd, n, power, alpha) for n in seed_counts})
        entry["detectable"] = bool(entry["abs_delta"] >= entry["mde"]) if math.isfinite(entry["mde"]) else False
        rows.append(entry)
    columns = ["model", "method", "control", "metric", "n_seeds", "sd", "abs_delta", "mde",
               *[f"mde_{n}_seeds" for n in seed_counts], "detectable"]
    return pd.DataFrame(rows, columns=columns)
