"""Paired comparisons over matched seeds (DESIGN: statistics protocol).

Methods share training seeds, so noise common to both arms of a seed cancels in the per-seed difference; every claim
is a t interval on those differences. Unmatched seeds would bring that noise back unnoticed, so they are an error
unless the analysis asks otherwise explicitly (`PAIRINGS`): "shared_seeds" pairs the seeds both arms have and records
the cells it dropped beside the result; "unpaired" compares every seed of each arm as independent samples (Welch).
"""
from __future__ import annotations

import functools
import math
import warnings
from dataclasses import dataclass
from typing import Callable, Mapping, Sequence

import numpy as np
import pandas as pd
from scipy import stats

from dataflex_rl.artefacts.layout import UNTRAINED
from dataflex_rl.stats.equivalence import tost, verdicts

POINTS = 100.0  # summaries are in [0, 1]; comparison tables are in percentage points
# How a method's seeds meet its control's: "paired" (the protocol; unmatched seeds are an error), "shared_seeds"
# (paired over the seeds both arms have, the others named in `dropped_seeds`), "unpaired" (Welch's t over all seeds).
PAIRINGS = ("paired", "shared_seeds", "unpaired")
# stats.equivalence_margin's default, in points: docs/statistics.md says why (a choice, not an estimate).
EQUIVALENCE_MARGIN = 1.0
# compare_methods(spread=True)'s extra columns: Δ's standard error (points) and t degrees of freedom under the pairing.
SPREAD_COLUMNS = ["se", "df"]


@dataclass(frozen=True)
class PairedDifference:
    """Mean per-seed difference (treatment − control) with its t interval.

    With fewer than two seeds there is no spread to estimate, so sd, ci_low, ci_high, t_p_value, se and df are NaN.
    `dropped` lists the (side lacking it, seed) cells left out when unpaired seeds were allowed. `se` and `df` are the
    standard error of `mean` and the t distribution's degrees of freedom (the equivalence test needs them).
    """

    mean: float
    ci_low: float
    ci_high: float
    sd: float
    n: int
    t_p_value: float
    seeds: tuple[int, ...]
    dropped: tuple[tuple[str, int], ...] = ()
    confidence: float = 0.95
    se: float = math.nan
    df: float = math.nan


class UnmatchedSeedsError(ValueError):
    """Raised when a seed has a value on one side only; `missing` holds the (side lacking it, seed) cells."""

    def __init__(self, missing: tuple[tuple[str, int], ...]):
        self.missing = missing
        cells = ", ".join(f"({side}, seed {seed})" for side, seed in missing)
        super().__init__(f"seeds are not matched; missing (side, seed) cells: {cells}. Run the missing cells, or set "
                         f"stats.pairing to 'shared_seeds' (pair the seeds both sides have) or 'unpaired' (Welch) "
                         f"to analyse the seeds there are")


def mean_t_interval(seeds: tuple[int, ...], differences: np.ndarray, confidence: float,
                dropped: tuple[tuple[str, int], ...] = ()) -> PairedDifference:
    """One-sample t interval and two-sided p-value for the mean of `differences`."""
    if not 0 < confidence < 1:
        raise ValueError(f"confidence must lie in (0, 1), got {confidence}")
    n = len(differences)
    mean = float(differences.mean())
    low = high = sd = p = se = df = math.nan
    if n >= 2:
        df = n - 1
        sd = float(differences.std(ddof=1))
        se = sd / math.sqrt(n)
        half = float(stats.t.ppf((1 + confidence) / 2, n - 1)) * se
        low, high = mean - half, mean + half
        # Identical differences: the t statistic is infinite (p = 0) unless the mean is 0 too (undefined).
        p = float(2 * stats.t.sf(abs(mean) / se, n - 1)) if se > 0 else (math.nan if mean == 0 else 0.0)
    return PairedDifference(mean, low, high, sd, n, p, seeds, dropped, confidence, se=se, df=df)


def paired_difference_ci(treatment: Mapping[int, float], control: Mapping[int, float], confidence: float = 0.95, *,
                         allow_unpaired: bool = False,
                         names: tuple[str, str] = ("treatment", "control")) -> PairedDifference:
    """Paired t interval for treatment − control over the seeds both sides share.

    A seed on one side only raises UnmatchedSeedsError unless `allow_unpaired`, which keeps the intersection and
    records the rest in `dropped`. `names` label the sides in messages.
    """
    t_seeds, c_seeds = {int(s) for s in treatment}, {int(s) for s in control}
    missing = tuple([(names[1], s) for s in sorted(t_seeds - c_seeds)] +
                    [(names[0], s) for s in sorted(c_seeds - t_seeds)])
    if missing and not allow_unpaired:
        raise UnmatchedSeedsError(missing)
    seeds = tuple(sorted(t_seeds & c_seeds))
    if not seeds:
        raise ValueError(f"{names[0]} and {names[1]} share no seeds")
    differences = np.array([treatment[s] - control[s] for s in seeds], dtype=float)
    if not np.isfinite(differences).all():
        raise ValueError(f"non-finite values for seeds {[s for s, d in zip(seeds, differences) if not np.isfinite(d)]}")
    return mean_t_interval(seeds, differences, confidence, missing)


def welch_difference_ci(treatment: Mapping[int, float], control: Mapping[int, float],
                        confidence: float = 0.95) -> PairedDifference:
    """Welch's t interval for mean(treatment) − mean(control), the seeds of each arm taken as independent samples.

    For an explicitly unpaired analysis: with matched seeds the paired interval is the protocol's, and usually
    narrower. `sd` is sqrt(s_t² + s_c²), the spread of the difference between one seed of each arm when the arms are
    independent (what `detectable_effects` needs); `n` is the smaller arm; `seeds` are the seeds of either arm.
    """
    if not 0 < confidence < 1:
        raise ValueError(f"confidence must lie in (0, 1), got {confidence}")
    t = np.array(list(treatment.values()), dtype=float)
    c = np.array(list(control.values()), dtype=float)
    if not (np.isfinite(t).all() and np.isfinite(c).all()):
        raise ValueError("non-finite values in an arm of an unpaired comparison")
    seeds = tuple(sorted({int(s) for s in treatment} | {int(s) for s in control}))
    mean = float(t.mean() - c.mean())
    n = min(len(t), len(c))
    if n < 2:
        return PairedDifference(mean, math.nan, math.nan, math.nan, n, math.nan, seeds, (), confidence)
    sd = math.sqrt(t.var(ddof=1) + c.var(ddof=1))
    if sd == 0:
        p = math.nan if mean == 0 else 0.0
        return PairedDifference(mean, mean, mean, 0.0, n, p, seeds, (), confidence, se=0.0)
    result = stats.ttest_ind(t, c, equal_var=False)
    interval = result.confidence_interval(confidence)
    se = math.sqrt(t.var(ddof=1) / len(t) + c.var(ddof=1) / len(c))
    return PairedDifference(mean, float(interval.low), float(interval.high), sd, n, float(result.pvalue), seeds, (),
                            confidence, se=se, df=float(result.df))


def _mean(x: np.ndarray, axis: int = -1) -> np.ndarray:
    """Mean over the last axis (where scipy.stats.bootstrap puts the resampled one), taken on a 2-d view.

    numpy reduces the last axis of a 2-d array row by row (pairwise within a row) but may sum a 3-d stack
    (comparisons × resamples × seeds) in another order, which moves the last bit; on the 2-d view each comparison's
    bootstrap distribution is, to the bit, the one it gets alone.
    """
    if axis not in (-1, x.ndim - 1):
        raise ValueError(f"the bootstrap statistic reduces the last axis, got axis={axis}")
    return np.mean(x.reshape(-1, x.shape[-1]), axis=-1).reshape(x.shape[:-1])


def _difference_of_means(a, b, axis=-1):
    return _mean(a, axis) - _mean(b, axis)


def _mean_of_each(*arrays: np.ndarray, axis: int = -1) -> np.ndarray:
    """The mean of each resampled array, stacked: [arrays, resamples]."""
    return np.stack([np.mean(a, axis=axis) for a in arrays])


def _bootstrap_each(samples: Sequence[tuple[np.ndarray, ...]], fixed: Callable, confidence: float, *, paired: bool,
                    n_resamples: int, method: str, rng: int | None) -> list[tuple[float, float]]:
    """scipy.stats.bootstrap's interval for each sample, vectorised over resamples and over the samples.

    A sample is one array of per-seed differences (`paired`) or a (treatment, control) pair of arms. `fixed(sample)`
    gives an interval that needs no resampling (too few seeds, no spread) or None. The others are grouped by their
    arrays' lengths and each group is one scipy call with a generator seeded `rng` afresh; scipy draws one set of
    resample indices per call, so every sample gets, to the bit, the interval it gets bootstrapped alone (with `rng`
    None the samples of a group share their draws). Differences go in as scipy's paired samples, so each is resampled
    as a 2-d array of its own (no copy); arms are stacked into [samples, seeds] and averaged by `_mean`.
    """
    intervals = [fixed(sample) for sample in samples]
    groups: dict[tuple[int, ...], list[int]] = {}
    for i, (sample, interval) in enumerate(zip(samples, intervals)):
        if interval is None:
            groups.setdefault(tuple(map(len, sample)), []).append(i)
    for indices in groups.values():
        group = [samples[i] for i in indices]
        data = tuple(d for d, in group) if paired else tuple(np.stack(arrays) for arrays in zip(*group))
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # scipy warns about degenerate BCa/percentile distributions at tiny n
            result = stats.bootstrap(data, _mean_of_each if paired else _difference_of_means, paired=paired,
                                     vectorized=True, axis=-1, n_resamples=n_resamples, confidence_level=confidence,
                                     method=method, rng=np.random.default_rng(rng))
        for i, low, high in zip(indices, result.confidence_interval.low, result.confidence_interval.high):
            intervals[i] = (float(low), float(high))
    return intervals


def _fixed_paired(sample: tuple[np.ndarray]) -> tuple[float, float] | None:
    differences, = sample
    if len(differences) < 2:
        return math.nan, math.nan
    mean = float(differences.mean())
    return (mean, mean) if np.ptp(differences) == 0 else None


def _fixed_unpaired(sample: tuple[np.ndarray, np.ndarray]) -> tuple[float, float] | None:
    t, c = sample
    if min(len(t), len(c)) < 2:
        return math.nan, math.nan
    return (float(t[0] - c[0]),) * 2 if np.ptp(t) == 0 and np.ptp(c) == 0 else None


def paired_bootstrap_cis(differences: Sequence[np.ndarray], confidence: float = 0.95, *, n_resamples: int = 9999,
                         method: str = "percentile", rng: int | None = 0) -> list[tuple[float, float]]:
    """Paired bootstrap interval for the mean of each array of per-seed differences (treatment − control).

    Resampling the seeds jointly is resampling their differences, so this is scipy.stats.bootstrap of the mean of
    each array; arrays of one length share one vectorised call (`_bootstrap_each`). Fewer than two seeds give
    (NaN, NaN), identical differences a zero-width interval.
    """
    return _bootstrap_each([(np.asarray(d, dtype=float),) for d in differences], _fixed_paired, confidence, paired=True,
                           n_resamples=n_resamples, method=method, rng=rng)


def paired_bootstrap_ci(treatment: Mapping[int, float], control: Mapping[int, float], confidence: float = 0.95, *,
                        n_resamples: int = 9999, method: str = "percentile", rng: int | None = 0,
                        allow_unpaired: bool = False) -> tuple[float, float]:
    """Paired bootstrap interval (seeds resampled jointly) for mean(treatment − control) over the shared seeds.

    A check beside the t interval, not a replacement: with 3 seeds there are only 10 distinct resamples, so it is
    narrower than the t interval. Percentile by default because BCa's jackknife degenerates at so few seeds.
    """
    seeds = paired_difference_ci(treatment, control, confidence, allow_unpaired=allow_unpaired).seeds
    differences = np.array([treatment[s] - control[s] for s in seeds], dtype=float)
    return paired_bootstrap_cis([differences], confidence, n_resamples=n_resamples, method=method, rng=rng)[0]


def unpaired_bootstrap_cis(arms: Sequence[tuple[Mapping[int, float], Mapping[int, float]]], confidence: float = 0.95,
                           *, n_resamples: int = 9999, method: str = "percentile",
                           rng: int | None = 0) -> list[tuple[float, float]]:
    """Per (treatment, control): the bootstrap interval for mean(treatment) − mean(control) resampling each arm's
    seeds independently (the check beside `welch_difference_ci`). An arm with fewer than two seeds gives (NaN, NaN).
    Arms of the same sizes share one vectorised call (`_bootstrap_each`)."""
    samples = [(np.array(list(t.values()), dtype=float), np.array(list(c.values()), dtype=float)) for t, c in arms]
    return _bootstrap_each(samples, _fixed_unpaired, confidence, paired=False, n_resamples=n_resamples,
                           method=method, rng=rng)


def unpaired_bootstrap_ci(treatment: Mapping[int, float], control: Mapping[int, float], confidence: float = 0.95, *,
                          n_resamples: int = 9999, method: str = "percentile",
                          rng: int | None = 0) -> tuple[float, float]:
    """`unpaired_bootstrap_cis` of one (treatment, control)."""
    return unpaired_bootstrap_cis([(treatment, control)], confidence, n_resamples=n_resamples, method=method,
                                  rng=rng)[0]


def _require_metric(summaries: pd.DataFrame, metric: str) -> None:
    if metric not in summaries.columns:
        raise ValueError(f"no column {metric!r}; available: {list(summaries.columns)}")


def arm_values(runs: pd.DataFrame, method: str, metric: str) -> dict[int, float]:
    """Seed → metric for one method's runs, refusing missing or repeated seeds."""
    return _seed_values(runs[runs["method"] == method], method, metric)


def _seed_values(rows: pd.DataFrame, method: str, metric: str) -> dict[int, float]:
    """`arm_values` of rows that are all `method`'s."""
    seeds = rows["seed"].to_numpy(dtype=float, na_value=np.nan)
    if np.isnan(seeds).any():
        raise ValueError(f"{method!r} has runs without a seed; compare the untrained base with headroom()")
    if len(np.unique(seeds)) < len(seeds):
        repeated = sorted({int(s) for s in seeds[pd.Series(seeds).duplicated()]})
        raise ValueError(f"{method!r} has repeated seeds {repeated}")
    return dict(zip(seeds.astype(int).tolist(), rows[metric].to_numpy(dtype=float).tolist()))


def _holm(p: pd.Series) -> pd.Series:
    """Holm step-down adjustment over the non-missing p-values (a family-wise error bound across methods)."""
    valid = p.dropna().sort_values()
    m = len(valid)
    adjusted = (valid * (m - np.arange(m))).cummax().clip(upper=1.0)
    return adjusted.reindex(p.index)


def arm_difference(treated: dict[int, float], base: dict[int, float], pairing: str, confidence: float,
                   names: tuple[str, str]) -> tuple[PairedDifference, tuple[int, ...], tuple[int, ...]]:
    """The difference under `pairing`, and the seeds each arm's mean is taken over."""
    if pairing == "unpaired":
        return welch_difference_ci(treated, base, confidence), tuple(sorted(treated)), tuple(sorted(base))
    diff = paired_difference_ci(treated, base, confidence, allow_unpaired=pairing == "shared_seeds", names=names)
    return diff, diff.seeds, diff.seeds


def _equivalence_cells(diff: PairedDifference, margin: float, confidence: float) -> dict[str, float]:
    """A comparison's TOST columns in points (`margin` is in points, `diff` on the summaries' [0, 1] scale)."""
    result = tost(diff.mean, diff.se, diff.df, margin / POINTS, confidence)
    return {"margin": margin, "tost_low": POINTS * result.ci_low, "tost_high": POINTS * result.ci_high,
            "p_tost": result.p_value}


def compare_methods(summaries: pd.DataFrame, metric: str = "DB-12", *, controls: Mapping[str, str],
                    model: str | None = None, confidence: float = 0.95, pairing: str = "paired",
                    bootstrap_resamples: int = 0, equivalence_margin: float = EQUIVALENCE_MARGIN,
                    spread: bool = False) -> pd.DataFrame:
    """One row per (model, method) present in `controls`: the difference to its control, in points. A method whose
    own control has no runs in a cell is left out there where it serves as another method's control (a campaign may
    train it as a reference alone: campaign_checks); otherwise that is an error.

    `pairing` is one of PAIRINGS (module docstring); the row says which. Means are over the seeds the difference uses,
    so delta_mean = method_mean − control_mean. p_holm adjusts p across the methods of each (model, metric): the
    methods of one printed table. dropped_seeds names the cells "shared_seeds" left out. With `bootstrap_resamples`
    > 0, boot_low / boot_high hold the bootstrap interval (paired, or per arm when unpaired) as a check.

    The equivalence columns (dataflex_rl.stats.equivalence, docs/statistics.md): `margin` (points), tost_low /
    tost_high the (2·confidence − 1) interval, p_tost the TOST p-value of |Δ| < margin with the same pairing's
    formulas, p_tost_holm its Holm adjustment over the same family as p_holm, and the row's `verdict`. With `spread`,
    SPREAD_COLUMNS too: what TOST needs at another margin (dataflex_rl.stats.equivalence_summary).
    """
    if pairing not in PAIRINGS:
        raise ValueError(f"pairing must be one of {PAIRINGS}, got {pairing!r}")
    _require_metric(summaries, metric)
    models = [model] if model is not None else sorted(summaries["model"].unique())
    blocks, samples = [], []
    by_model = dict(tuple(summaries.groupby("model", sort=False)))
    for name in models:
        runs = by_model.get(name, summaries.iloc[:0])
        by_method = dict(tuple(runs.groupby("method", sort=False)))  # one split, not a filter per method
        arm = functools.cache(lambda m: _seed_values(by_method[m], m, metric))  # a control serves many methods
        block = []
        references = {control for method, control in controls.items() if method in by_method}
        for method, control in controls.items():
            if method not in by_method:
                continue
            if control not in by_method:
                if method in references:  # in the cell as another method's control only (campaign_checks)
                    continue
                raise ValueError(f"{name}: control {control!r} of {method!r} has no runs")
            treated, base = arm(method), arm(control)
            diff, treated_seeds, base_seeds = arm_difference(treated, base, pairing, confidence,
                                                             (f"{name}/{method}", f"{name}/{control}"))
            block.append({
                "model": name, "method": method, "control": control, "metric": metric, "pairing": pairing,
                "n_seeds": diff.n,
                "method_mean": POINTS * float(np.mean([treated[s] for s in treated_seeds])),
                "control_mean": POINTS * float(np.mean([base[s] for s in base_seeds])),
                "delta_mean": POINTS * diff.mean, "ci_low": POINTS * diff.ci_low, "ci_high": POINTS * diff.ci_high,
                "sd": POINTS * diff.sd, "p": diff.t_p_value,
                "dropped_seeds": ", ".join(f"{side}:seed{seed}" for side, seed in diff.dropped),
                **_equivalence_cells(diff, equivalence_margin, confidence),
                "se": POINTS * diff.se, "df": diff.df,
            })
            samples.append((treated, base) if pairing == "unpaired" else
                           np.array([treated[s] - base[s] for s in diff.seeds], dtype=float))
        if block:
            block_frame = pd.DataFrame(block)
            block_frame["p_holm"] = _holm(block_frame["p"])
            block_frame["p_tost_holm"] = _holm(block_frame["p_tost"])
            block_frame["verdict"] = verdicts(block_frame["delta_mean"], block_frame["p_holm"],
                                              block_frame["p_tost_holm"], 1 - confidence)
            blocks.append(block_frame)
    columns = ["model", "method", "control", "metric", "pairing", "n_seeds", "method_mean", "control_mean",
               "delta_mean", "ci_low", "ci_high", "sd", "p", "p_holm", "dropped_seeds",
               "margin", "tost_low", "tost_high", "p_tost", "p_tost_holm", "verdict"]
    if bootstrap_resamples:
        columns[columns.index("sd"):columns.index("sd")] = ["boot_low", "boot_high"]
    if spread:
        columns += SPREAD_COLUMNS
    if not blocks:
        return pd.DataFrame(columns=columns)
    table = pd.concat(blocks, ignore_index=True)
    if bootstrap_resamples:
        # One call for every comparison: the bootstrap is vectorised over resamples and over comparisons.
        bootstrap = unpaired_bootstrap_cis if pairing == "unpaired" else paired_bootstrap_cis
        intervals = np.array(bootstrap(samples, confidence, n_resamples=bootstrap_resamples), dtype=float)
        table["boot_low"], table["boot_high"] = POINTS * intervals[:, 0], POINTS * intervals[:, 1]
    return table[columns]


def headroom(summaries: pd.DataFrame, metric: str, trained_method: str = "baseline", *,
             confidence: float = 0.95) -> pd.DataFrame:
    """Per model, what training adds over the untrained base, in points.

    The base is one deterministic model, so the sample is the per-seed differences trained_seed − untrained and the
    interval is a one-sample t interval on them. Models lacking either side are left out.
    """
    _require_metric(summaries, metric)
    rows = []
    for name in sorted(summaries["model"].unique()):
        runs = summaries[summaries["model"] == name]
        base = runs.loc[runs["method"] == UNTRAINED, metric]
        if base.empty or not (runs["method"] == trained_method).any():
            continue
        if len(base) > 1:
            raise ValueError(f"{name}: {len(base)} untrained runs, expected one")
        untrained = float(base.iloc[0])
        trained = arm_values(runs, trained_method, metric)
        seeds = tuple(sorted(trained))
        diff = mean_t_interval(seeds, np.array([trained[s] - untrained for s in seeds]), confidence)
        rows.append({
            "model": name, "method": trained_method, "metric": metric, "n_seeds": diff.n,
            "untrained": POINTS * untrained, "trained_mean": POINTS * float(np.mean(list(trained.values()))),
            "delta_mean": POINTS * diff.mean, "ci_low": POINTS * diff.ci_low, "ci_high": POINTS * diff.ci_high,
            "sd": POINTS * diff.sd, "p": diff.t_p_value,
        })
    if not rows:
        raise ValueError(f"no model has both an untrained run and {trained_method!r} runs")
    return pd.DataFrame(rows)
