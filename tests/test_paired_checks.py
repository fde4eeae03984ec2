"""The paired bootstrap check beside the t interval, and the t interval's coverage in simulated studies."""
import math

import numpy as np
import pandas as pd
import pytest
from scipy import stats

from dataflex_rl.stats.paired import (compare_methods, paired_bootstrap_ci, paired_bootstrap_cis, paired_difference_ci,
                                      unpaired_bootstrap_ci, unpaired_bootstrap_cis, welch_difference_ci)


def _arms(rng, n=6):
    control = {s: float(v) for s, v in enumerate(rng.uniform(0.2, 0.6, n))}
    return {s: v + float(rng.normal(0.02, 0.03)) for s, v in control.items()}, control


@pytest.mark.parametrize("method", ["percentile", "basic", "BCa"])
def test_paired_bootstrap_equals_scipy_on_the_differences(method):
    # Resampling seeds jointly is a one-sample bootstrap of the per-seed differences: same draws, same interval.
    treatment, control = _arms(np.random.default_rng(1))
    low, high = paired_bootstrap_ci(treatment, control, 0.9, n_resamples=4999, method=method, rng=7)
    d = np.array([treatment[s] - control[s] for s in sorted(control)])
    reference = stats.bootstrap((d,), np.mean, n_resamples=4999, confidence_level=0.9, method=method,
                                rng=np.random.default_rng(7)).confidence_interval
    assert low == pytest.approx(reference.low, abs=1e-9)
    assert high == pytest.approx(reference.high, abs=1e-9)


def test_paired_bootstrap_degenerate_cases():
    assert all(math.isnan(x) for x in paired_bootstrap_ci({1: 0.5}, {1: 0.4}))
    assert paired_bootstrap_ci({1: 0.5, 2: 0.6}, {1: 0.25, 2: 0.35}) == (0.25, 0.25)


def test_unpaired_bootstrap_equals_scipy_resampling_each_arm():
    treatment, control = _arms(np.random.default_rng(3), n=7)
    del control[0], control[1]
    low, high = unpaired_bootstrap_ci(treatment, control, 0.9, n_resamples=3999, rng=5)
    t, c = np.array(list(treatment.values())), np.array(list(control.values()))
    reference = stats.bootstrap((t, c), lambda a, b, axis=-1: a.mean(axis=axis) - b.mean(axis=axis), paired=False,
                                n_resamples=3999, confidence_level=0.9, method="percentile",
                                rng=np.random.default_rng(5)).confidence_interval
    assert (low, high) == pytest.approx((reference.low, reference.high), abs=1e-9)
    assert all(math.isnan(x) for x in unpaired_bootstrap_ci({1: 0.5, 2: 0.4}, {1: 0.4}))


@pytest.mark.parametrize("method", ["percentile", "BCa"])
def test_batched_paired_bootstrap_gives_each_array_its_own_scipy_interval(method):
    # Arrays of several lengths (grouped into one scipy call per length) and degenerate ones among them: each gets
    # exactly what a lone scipy call with a fresh generator gives it.
    rng = np.random.default_rng(11)
    arrays = [rng.normal(0.01, 0.02, n) for n in (5, 8, 5, 3, 8, 5)]
    arrays[2:2] = [np.array([0.4]), np.full(4, 0.125)]
    intervals = paired_bootstrap_cis(arrays, 0.9, n_resamples=999, method=method, rng=3)
    assert all(math.isnan(x) for x in intervals[2]) and intervals[3] == (0.125, 0.125)
    for d, (low, high) in zip(arrays[:2] + arrays[4:], intervals[:2] + intervals[4:]):
        alone = stats.bootstrap((d,), np.mean, n_resamples=999, confidence_level=0.9, method=method,
                                rng=np.random.default_rng(3)).confidence_interval
        assert (low, high) == (alone.low, alone.high)


def test_batched_unpaired_bootstrap_gives_each_pair_of_arms_its_own_scipy_interval():
    rng = np.random.default_rng(12)
    arms = [(dict(enumerate(rng.uniform(0.3, 0.6, nt))), dict(enumerate(rng.uniform(0.3, 0.6, nc))))
            for nt, nc in ((9, 12), (4, 6), (9, 12), (5, 5), (9, 12))]
    arms.append(({1: 0.5, 2: 0.5}, {1: 0.25, 2: 0.25, 3: 0.25}))
    intervals = unpaired_bootstrap_cis(arms, 0.95, n_resamples=999, rng=8)
    assert intervals[-1] == (0.25, 0.25)
    for (t, c), interval in zip(arms[:-1], intervals):
        alone = stats.bootstrap((np.array(list(t.values())), np.array(list(c.values()))),
                                lambda a, b, axis=-1: a.mean(axis=axis) - b.mean(axis=axis), n_resamples=999,
                                method="percentile", rng=np.random.default_rng(8)).confidence_interval
        assert interval == (alone.low, alone.high)


def test_welch_interval_equals_scipy_ttest_ind():
    treatment, control = _arms(np.random.default_rng(4), n=9)
    control = {s: v for s, v in control.items() if s < 6}
    result = welch_difference_ci(treatment, control, 0.9)
    reference = stats.ttest_ind(list(treatment.values()), list(control.values()), equal_var=False)
    interval = reference.confidence_interval(0.9)
    assert (result.ci_low, result.ci_high) == pytest.approx((interval.low, interval.high), abs=1e-9)
    assert result.t_p_value == pytest.approx(reference.pvalue, abs=1e-9) and result.n == 6


def test_compare_methods_reports_bootstrap_beside_t_interval():
    treatment, control = _arms(np.random.default_rng(2), n=8)
    summaries = pd.DataFrame(
        [{"model": "m", "method": "baseline", "seed": s, "DB-12": v} for s, v in control.items()]
        + [{"model": "m", "method": "topk", "seed": s, "DB-12": v} for s, v in treatment.items()])
    table = compare_methods(summaries, controls={"topk": "baseline"}, bootstrap_resamples=2000)
    row = table.iloc[0]
    low, high = paired_bootstrap_ci(treatment, control, n_resamples=2000)
    assert (row["boot_low"], row["boot_high"]) == pytest.approx((100 * low, 100 * high), abs=1e-9)
    assert row["ci_low"] < row["delta_mean"] < row["ci_high"]
    assert row["boot_low"] < row["delta_mean"] < row["boot_high"]
    assert "boot_low" not in compare_methods(summaries, controls={"topk": "baseline"}).columns


@pytest.mark.parametrize("n_seeds", [3, 12])
def test_paired_t_interval_covers_true_delta_95_percent_of_2000_studies(n_seeds):
    rng = np.random.default_rng(2026)
    studies, delta = 2000, 0.015
    seed_effect = rng.normal(0.5, 0.05, (studies, n_seeds))           # shared by both arms: pairing cancels it
    control = seed_effect + rng.normal(0, 0.01, (studies, n_seeds))
    treatment = seed_effect + delta + rng.normal(0, 0.01, (studies, n_seeds))
    covered = 0
    for t_row, c_row in zip(treatment, control):
        result = paired_difference_ci(dict(enumerate(t_row)), dict(enumerate(c_row)))
        covered += result.ci_low <= delta <= result.ci_high
    # The same intervals computed in one vectorised pass agree with the function.
    d = treatment - control
    half = stats.t.ppf(0.975, n_seeds - 1) * d.std(axis=1, ddof=1) / math.sqrt(n_seeds)
    vectorised = np.mean((d.mean(axis=1) - half <= delta) & (delta <= d.mean(axis=1) + half))
    assert covered / studies == pytest.approx(vectorised, abs=1e-12)
    assert 0.93 <= covered / studies <= 0.97
