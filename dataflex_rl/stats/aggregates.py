"""The aggregates the RL field reports (Agarwal et al. 2021, "Deep RL at the edge of the statistical precipice"), over
each (model, method)'s (seed, benchmark) scores: the interquartile mean (IQM) with a stratified bootstrap interval,
the probability of improvement (PoI) over the control with its interval, and the performance profile (the share of
scores above a threshold τ) with its band. In rliable's terms a benchmark is a task and a seed a run.

The reference implementation, rliable, is not imported: it does not import beside this project's pandas (its arch < 8
fails at import under pandas 3), and its bootstrap draws from numpy's global generator whatever `random_state` it is
given. This module computes the same quantities with numpy and scipy and draws the same resamples — a legacy
RandomState seeded BOOTSTRAP_SEED afresh for each row, whose stream numpy keeps fixed across versions — so its numbers
are rliable's after np.random.seed(BOOTSTRAP_SEED), to the bit (tests/test_aggregates.py); docs/statistics.md.
"""
from __future__ import annotations

import functools
import math
from typing import Mapping, Sequence

import numpy as np
import pandas as pd
from scipy import stats

from dataflex_rl.artefacts.layout import UNTRAINED
from dataflex_rl.stats.paired import POINTS

BOOTSTRAP_SEED = 0  # the paired bootstrap's seed too (dataflex_rl.stats.paired)
IQM_CUT = 0.25  # the share trimmed from each end: rliable's aggregate_iqm, scipy.stats.trim_mean
AGGREGATE_COLUMNS = ["model", "method", "n_seeds", "n_benchmarks", "iqm", "iqm_low", "iqm_high", "control", "poi",
                     "poi_low", "poi_high"]


def score_matrices(records: pd.DataFrame,
                   excluded: Mapping[str, Sequence[str]] | None = None) -> dict[tuple[str, str], np.ndarray]:
    """Per trained (model, method): its scores as a [seeds, benchmarks] array, seeds ascending and benchmarks by name
    (so a result depends on the scores, not on the records' row order), without the benchmarks `excluded` leaves out
    of the model's summaries (dataflex_rl.stats.parse_flags). Keys in (model, method) order, as run_summaries sorts."""
    excluded = excluded or {}
    trained = records[records["method"] != UNTRAINED]
    keep = [b not in excluded.get(m, ()) for m, b in zip(trained["model"], trained["benchmark"])]
    wide = trained[keep].pivot_table(index=["model", "method", "seed"], columns="benchmark", values="score",
                                     aggfunc="first").sort_index(axis=0).sort_index(axis=1)
    out = {}
    for (model, method), block in wide.groupby(level=["model", "method"], sort=False):
        block = block.dropna(axis=1, how="all")  # the model's benchmarks: another model may have others
        if block.isna().any().any():
            raise ValueError(f"{model}/{method}: seeds lack benchmarks that its other seeds have")
        out[(model, method)] = block.to_numpy(float)
    return out


@functools.lru_cache(maxsize=None)
def stratified_indices(run_counts: tuple[int, ...], tasks: int, reps: int,
                       seed: int = BOOTSTRAP_SEED) -> tuple[np.ndarray, ...]:
    """For each array of `run_counts[i]` runs × `tasks`: [reps, runs, tasks] run indices, each task's runs drawn with
    replacement within that task (rliable's StratifiedBootstrap; its StratifiedIndependentBootstrap for several
    arrays, each drawn on its own). Within a resample the arrays are drawn in order, as rliable draws them. The draws
    depend on the shapes and the seed alone, so rows of one shape share them (cached, read-only)."""
    state = np.random.RandomState(seed)
    if len(set(run_counts)) == 1:  # one call, the same stream as rliable's call per array per resample
        n = run_counts[0]
        draws = state.randint(0, n, size=(reps, len(run_counts), n, tasks))
        out = tuple(draws[:, i] for i in range(len(run_counts)))
    else:
        per_rep = [[state.randint(0, n, size=(n, tasks)) for n in run_counts] for _ in range(reps)]
        out = tuple(np.array([rep[i] for rep in per_rep]).reshape(reps, n, tasks) for i, n in enumerate(run_counts))
    for draws in out:
        draws.flags.writeable = False
    return out


@functools.lru_cache(maxsize=None)
def draw_counts(run_counts: tuple[int, ...], tasks: int, reps: int,
                seed: int = BOOTSTRAP_SEED) -> tuple[np.ndarray, ...]:
    """stratified_indices as counts: [reps, tasks, runs], how often each resample drew each run of each task. PoI and
    profiles are sums over drawn scores, so they are count-weighted sums over the original ones (exact: the counts
    and the terms are small integers and halves)."""
    out = []
    for runs, draws in zip(run_counts, stratified_indices(run_counts, tasks, reps, seed)):
        counts = (draws[..., None] == np.arange(runs)).sum(axis=1).astype(float)
        counts.flags.writeable = False
        out.append(counts)
    return tuple(out)


def resampled(scores: np.ndarray, indices: np.ndarray) -> np.ndarray:
    """[reps, runs, tasks] resampled scores: each task's column taken at its drawn runs."""
    return scores[indices, np.arange(scores.shape[1])]


def _once(scores: np.ndarray) -> np.ndarray:
    """The counts of the original sample: every run of every task once, [1, tasks, runs]."""
    return np.ones((1, scores.shape[1], scores.shape[0]))


def interquartile_mean(scores: np.ndarray) -> np.ndarray:
    """The 25% trimmed mean of each [runs, tasks] array over all its runs × tasks (leading axes kept)."""
    return stats.trim_mean(scores.reshape(*scores.shape[:-2], scores.shape[-2] * scores.shape[-1]), IQM_CUT, axis=-1)


def probability_of_improvement(x: np.ndarray, y: np.ndarray, x_counts: np.ndarray | None = None,
                               y_counts: np.ndarray | None = None) -> np.ndarray:
    """P(X > Y) per task — the Mann–Whitney U of x's runs against y's over n_x·n_y, a tie counting half — averaged
    over tasks, for [runs, tasks] arrays x and y: one value, or with draw counts ([reps, tasks, runs] each) one per
    resample. Unpaired: every run of x meets every run of y, so matched seeds are not used as pairs."""
    pairs_x, pairs_y = x.T[:, :, None], y.T[:, None, :]  # [tasks, runs_x, 1], [tasks, 1, runs_y]
    wins = (pairs_x > pairs_y) + 0.5 * (pairs_x == pairs_y)
    x_counts = _once(x) if x_counts is None else x_counts
    y_counts = _once(y) if y_counts is None else y_counts
    # [tasks, reps, runs_x] @ [tasks, runs_x, runs_y], times y's counts: the drawn pairs' wins, exact small sums
    pair_wins = (np.matmul(x_counts.transpose(1, 0, 2), wins) * y_counts.transpose(1, 0, 2)).sum(axis=-1)
    # Each resample's tasks contiguous: numpy then sums them pairwise, as rliable's mean over its list of tasks does
    # (a strided row is summed in another order, which moves the last bit).
    per_task = np.ascontiguousarray(pair_wins.T) / (x.shape[0] * y.shape[0])
    return np.mean(per_task, axis=-1).squeeze()


def profile_thresholds(scores: np.ndarray) -> np.ndarray:
    """0, 1 and every distinct score: a profile (of the sample or of any resample, which holds only its scores) is a
    step function that moves at these alone, so its value here gives it at every τ, and is a grid-free figure."""
    return np.unique(np.concatenate([[0.0, 1.0], np.ravel(scores)]))


def performance_profile(scores: np.ndarray, thresholds: np.ndarray,
                        counts: np.ndarray | None = None) -> np.ndarray:
    """The share of a [runs, tasks] array's scores strictly above each threshold: [thresholds]; with draw counts
    ([reps, tasks, runs]), of each resample's: [reps, thresholds]."""
    above = (scores.T[..., None] > np.asarray(thresholds)).reshape(-1, len(thresholds)).astype(float)
    shares = (_once(scores) if counts is None else counts).reshape(-1, above.shape[0]) @ above / above.shape[0]
    return shares[0] if counts is None else shares


def percentile_interval(values: np.ndarray, confidence: float) -> tuple[np.ndarray, np.ndarray]:
    """The percentile bootstrap interval of each column of [reps, ...] `values` (as arch's conf_int: rliable's)."""
    tail = (1 - confidence) / 2
    low, high = np.percentile(values.T, [100 * tail, 100 * (1 - tail)], axis=-1)  # rows: contiguous, faster
    return low, high


def _interval(values: np.ndarray, confidence: float) -> tuple[float, float]:
    if not len(values):
        return math.nan, math.nan
    low, high = percentile_interval(values, confidence)
    return float(low), float(high)


def aggregates(matrices: Mapping[tuple[str, str], np.ndarray], controls: Mapping[str, str], *,
               confidence: float = 0.95, reps: int = 9999) -> pd.DataFrame:
    """One row per (model, method) of `matrices` (score_matrices): IQM over seeds × benchmarks in points with its
    stratified bootstrap interval, and, where its control has runs in the model, the control and the PoI of the
    method over it with its interval (each arm's seeds resampled within each benchmark on their own). `reps` 0: no
    intervals. Every row's resamples are drawn afresh from BOOTSTRAP_SEED, so a row does not depend on the others."""
    rows = []
    for (model, method), scores in matrices.items():
        runs, tasks = scores.shape
        draws, = stratified_indices((runs,), tasks, reps)
        iqm_low, iqm_high = _interval(interquartile_mean(resampled(scores, draws)), confidence)
        row = {"model": model, "method": method, "n_seeds": runs, "n_benchmarks": tasks,
               "iqm": POINTS * float(interquartile_mean(scores)), "iqm_low": POINTS * iqm_low,
               "iqm_high": POINTS * iqm_high, "control": "", "poi": math.nan, "poi_low": math.nan,
               "poi_high": math.nan}
        control = controls.get(method)
        if control is not None and (model, control) in matrices:
            base = matrices[(model, control)]
            poi = probability_of_improvement(scores, base, *draw_counts((runs, len(base)), tasks, reps))
            poi_low, poi_high = _interval(poi, confidence)
            row.update(control=control, poi=float(probability_of_improvement(scores, base)), poi_low=poi_low,
                       poi_high=poi_high)
        rows.append(row)
    return pd.DataFrame(rows, columns=AGGREGATE_COLUMNS)


def performance_profiles(matrices: Mapping[tuple[str, str], np.ndarray], *, confidence: float = 0.95,
                         reps: int = 9999) -> pd.DataFrame:
    """Long table for the figure: per (model, method) and τ in points (profile_thresholds: the share holds from each
    τ to the next), the share of its (seed, benchmark) scores above τ and the stratified bootstrap band (NaN with
    `reps` 0), the resamples drawn as the IQM's are."""
    blocks = []
    for (model, method), scores in matrices.items():
        thresholds = profile_thresholds(scores)
        counts, = draw_counts(scores.shape[:1], scores.shape[1], reps)
        low = high = np.full(len(thresholds), math.nan)
        if reps:
            low, high = percentile_interval(performance_profile(scores, thresholds, counts), confidence)
        blocks.append(pd.DataFrame({"model": model, "method": method, "tau": POINTS * np.asarray(thresholds),
                                    "share": performance_profile(scores, thresholds), "low": low, "high": high}))
    return pd.concat(blocks, ignore_index=True) if blocks else pd.DataFrame(
        columns=["model", "method", "tau", "share", "low", "high"])
