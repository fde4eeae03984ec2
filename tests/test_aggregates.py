"""The field's aggregates (dataflex_rl/stats/aggregates.py) against rliable, their reference implementation, and by hand.

rliable draws its stratified bootstrap from numpy's global generator (its `random_state` does not reach the draws), so
each comparison seeds it with np.random.seed(BOOTSTRAP_SEED) and calls rliable for one method: the module draws the
same resamples, so point estimates and intervals must agree to the bit.
"""
import importlib
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from dataflex_rl.stats.aggregates import (BOOTSTRAP_SEED, aggregates, draw_counts, interquartile_mean,
                                          percentile_interval, performance_profile, performance_profiles,
                                          probability_of_improvement, profile_thresholds, resampled, score_matrices,
                                          stratified_indices)

REPO = Path(__file__).resolve().parents[1]
RELEASED = REPO.parent / "shared/data/dataflex-rl-records/all_runs_171.csv"


def _import_rliable():
    """rliable.library imports arch, which rliable pins below 8; arch 7 calls pandas' private deprecate_kwarg in the
    form pandas 3 no longer takes (no warning class first). Adapt that call while rliable imports, then restore it."""
    decorators = importlib.import_module("pandas.util._decorators")
    original = decorators.deprecate_kwarg

    def pre_pandas3_form(*args, **kwargs):
        if args and isinstance(args[0], str):  # (old_arg_name, new_arg_name): arch 7's call
            return original(FutureWarning, *args, **kwargs)
        return original(*args, **kwargs)

    decorators.deprecate_kwarg = pre_pandas3_form
    try:
        from rliable import library, metrics
    finally:
        decorators.deprecate_kwarg = original
    return library, metrics


library, metrics = _import_rliable()
pytestmark = pytest.mark.filterwarnings("ignore::FutureWarning")  # arch's note on the RandomState rliable passes


def rliable_interval(scores, func, reps):
    """rliable's stratified bootstrap of `func` for one method: (point estimate, (low, high))."""
    np.random.seed(BOOTSTRAP_SEED)
    points, intervals = library.get_interval_estimates({"m": scores}, func, reps=reps)
    return points["m"], intervals["m"]


def rliable_iqm(scores, reps):
    point, interval = rliable_interval(scores, lambda s: np.array([metrics.aggregate_iqm(s)]), reps)
    return point[0], tuple(interval.ravel())


def rliable_poi(x, y, reps):
    point, interval = rliable_interval([x, y], lambda a, b: np.array([metrics.probability_of_improvement(a, b)]), reps)
    return point[0], tuple(interval.ravel())


def our_iqm(scores, reps):
    draws, = stratified_indices((len(scores),), scores.shape[1], reps)
    return interquartile_mean(scores), percentile_interval(interquartile_mean(resampled(scores, draws)), 0.95)


def our_poi(x, y, reps):
    counts = draw_counts((len(x), len(y)), x.shape[1], reps)
    return probability_of_improvement(x, y), percentile_interval(probability_of_improvement(x, y, *counts), 0.95)


def scores_of(rng, runs, tasks, levels=20):
    """Scores on a grid of `levels` values, so ties occur as they do with accuracies on a few hundred items."""
    return rng.integers(0, levels + 1, (runs, tasks)) / levels


def test_iqm_by_hand_and_as_rliable():
    # 8 scores: the lowest 2 and highest 2 go, the mean of 0.3, 0.4, 0.5, 0.6 stays.
    eight = np.arange(1, 9, dtype=float).reshape(2, 4) / 10
    assert interquartile_mean(eight) == pytest.approx(0.45)
    # 9 scores: int(0.25 · 9) = 2 go from each end, the mean of 3..7 stays.
    nine = np.arange(1, 10, dtype=float).reshape(3, 3)
    assert interquartile_mean(nine) == 5.0
    # One low outlier moves the mean, not the IQM.
    outlier = eight.copy()
    outlier[0, 0] = -100.0
    assert interquartile_mean(outlier) == pytest.approx(0.45) and outlier.mean() < 0
    for scores in (eight, nine, outlier):
        assert interquartile_mean(scores) == metrics.aggregate_iqm(scores)


def test_probability_of_improvement_by_hand_and_as_rliable():
    # Task 1: 1 > 2? no; 1 > 2? no; 3 > 2 twice: 2 of 4. Task 2: 2 vs 2 ties (half), 2 > 1, 3 > 2, 3 > 1: 3.5 of 4.
    x = np.array([[1.0, 2.0], [3.0, 3.0]])
    y = np.array([[2.0, 2.0], [2.0, 1.0]])
    assert probability_of_improvement(x, y) == pytest.approx((2 / 4 + 3.5 / 4) / 2)
    assert probability_of_improvement(x, x) == 0.5  # a method against itself, ties included
    # Unpaired: reordering one side's runs (breaking the seed pairs) changes nothing.
    assert probability_of_improvement(x, y[::-1]) == probability_of_improvement(x, y)
    rng = np.random.default_rng(3)
    cases = [(x, y), (x, x)] + [(scores_of(rng, nx, 12, 5), scores_of(rng, ny, 12, 5)) for nx, ny in ((3, 3), (3, 5))]
    for a, b in cases:
        assert probability_of_improvement(a, b) == metrics.probability_of_improvement(a, b)


def test_performance_profile_by_hand_and_as_rliable():
    scores = np.array([[0.1, 0.5], [0.5, 0.9]])
    # Strictly above τ: at 0.5 only 0.9 counts.
    assert list(performance_profile(scores, np.array([0.0, 0.1, 0.5, 0.9]))) == [1.0, 0.75, 0.25, 0.0]
    assert list(profile_thresholds(scores)) == [0.0, 0.1, 0.5, 0.9, 1.0]
    rng = np.random.default_rng(4)
    for case in (scores, scores_of(rng, 3, 12), scores_of(rng, 5, 7)):
        taus = np.linspace(0, 1, 41)
        np.testing.assert_array_equal(performance_profile(case, taus),
                                      library.score_distributions(case, taus))


def test_a_profile_holds_between_its_thresholds():
    """profile_thresholds: the sample's and every resample's profile move only at a score, so between two thresholds
    it equals its value at the lower one."""
    scores = scores_of(np.random.default_rng(5), 3, 12)
    taus = profile_thresholds(scores)
    counts, = draw_counts((3,), 12, 200)
    grid = np.linspace(0, 1, 1001)
    held = np.searchsorted(taus, grid, side="right") - 1
    np.testing.assert_array_equal(performance_profile(scores, grid), performance_profile(scores, taus)[held])
    np.testing.assert_array_equal(performance_profile(scores, grid, counts),
                                  performance_profile(scores, taus, counts)[:, held])


def test_resamples_are_drawn_within_each_benchmark():
    """Stratified: each benchmark's column keeps its own scores. Where every seed scores the same on each benchmark,
    every resample is the sample, so the interval has no width; a bootstrap over all (seed, benchmark) cells would
    mix benchmarks and give one."""
    constant_columns = np.array([[0.1, 0.2, 0.7, 0.9]] * 3)
    point, (low, high) = our_iqm(constant_columns, 999)
    assert low == high == point
    draws, = stratified_indices((3,), 4, 999)
    assert resampled(constant_columns, draws).shape == (999, 3, 4)
    assert (resampled(constant_columns, draws) == constant_columns).all()
    assert rliable_iqm(constant_columns, 999) == (point, (low, high))


@pytest.mark.parametrize("runs", [(3,), (5,)])
def test_iqm_interval_is_rliables_stratified_bootstrap(runs):
    scores = scores_of(np.random.default_rng(6), runs[0], 12)
    point, interval = rliable_iqm(scores, 2000)
    assert our_iqm(scores, 2000) == (point, interval)


@pytest.mark.parametrize("runs", [(3, 3), (3, 5)])
def test_poi_interval_is_rliables_stratified_independent_bootstrap(runs):
    """Equal arms take one draw for all resamples, unequal ones one per resample and arm: both are rliable's order."""
    rng = np.random.default_rng(7)
    x, y = scores_of(rng, runs[0], 12, 10), scores_of(rng, runs[1], 12, 10)
    point, interval = rliable_poi(x, y, 200)  # rliable calls scipy's Mann-Whitney per task and resample: slow
    assert our_poi(x, y, 200) == (point, interval)


def test_profile_band_is_rliables():
    scores = scores_of(np.random.default_rng(8), 3, 12)
    taus = profile_thresholds(scores)
    np.random.seed(BOOTSTRAP_SEED)
    profiles, bands = library.create_performance_profile({"m": scores}, taus, reps=2000)
    table = performance_profiles({("model", "m"): scores}, reps=2000)
    np.testing.assert_array_equal(table["tau"], 100 * taus)
    np.testing.assert_array_equal(table["share"], profiles["m"])
    np.testing.assert_array_equal(table["low"], bands["m"][0])
    np.testing.assert_array_equal(table["high"], bands["m"][1])


def test_aggregates_rows():
    rng = np.random.default_rng(9)
    matrices = {("A", "baseline"): scores_of(rng, 3, 6), ("A", "topk"): scores_of(rng, 3, 6),
                ("A", "static"): scores_of(rng, 3, 6), ("B", "topk"): scores_of(rng, 3, 6)}
    controls = {"topk": "baseline", "static": "baseline"}
    table = aggregates(matrices, controls, reps=500).set_index(["model", "method"])
    assert table.loc[("A", "baseline"), "control"] == "" and np.isnan(table.loc[("A", "baseline"), "poi"])
    assert table.loc[("A", "topk"), "control"] == "baseline"
    assert table.loc[("A", "topk"), "poi"] == probability_of_improvement(matrices[("A", "topk")],
                                                                         matrices[("A", "baseline")])
    assert table.loc[("A", "topk"), "iqm"] == 100 * interquartile_mean(matrices[("A", "topk")])
    assert table.loc[("B", "topk"), "control"] == "" and np.isnan(table.loc[("B", "topk"), "poi"])  # no control in B
    row = table.loc[("A", "topk")]
    assert row["iqm_low"] <= row["iqm"] <= row["iqm_high"] and row["poi_low"] <= row["poi"] <= row["poi_high"]
    # Each row draws afresh: without the other methods a row is the same to the bit.
    alone = aggregates({k: matrices[k] for k in [("A", "baseline"), ("A", "topk")]}, controls, reps=500)
    pd.testing.assert_series_equal(alone.set_index(["model", "method"]).loc[("A", "topk")], row)
    # No resamples: the estimates without intervals.
    bare = aggregates(matrices, controls, reps=0).set_index(["model", "method"])
    assert bare["iqm_low"].isna().all() and bare["poi_high"].isna().all()
    assert (bare["iqm"] == table["iqm"]).all()


def test_score_matrices_sort_seeds_and_benchmarks_and_leave_out_exclusions():
    rows = [{"model": "A", "method": m, "seed": s, "benchmark": b, "score": v}
            for m, s, b, v in [("x", 2, "b2", 0.4), ("x", 1, "b2", 0.2), ("x", 2, "b1", 0.3), ("x", 1, "b1", 0.1),
                               ("x", 1, "b3", 0.9), ("x", 2, "b3", 0.8), ("untrained", None, "b1", 0.0)]]
    records = pd.DataFrame(rows)
    np.testing.assert_array_equal(score_matrices(records)[("A", "x")], [[0.1, 0.2, 0.9], [0.3, 0.4, 0.8]])
    assert list(score_matrices(records)) == [("A", "x")]
    np.testing.assert_array_equal(score_matrices(records, {"A": ["b3"]})[("A", "x")], [[0.1, 0.2], [0.3, 0.4]])
    with pytest.raises(ValueError, match="A/x: seeds lack benchmarks"):
        score_matrices(records.drop(index=0))


@pytest.fixture(scope="module")
def released_main_cell():
    if not RELEASED.is_file():
        pytest.skip(f"{RELEASED} not present")
    from dataflex_rl.records.imported import load_records

    records = load_records(RELEASED)
    cell = records[(records["model"] == "Qwen2.5-7B-Instruct@main") & records["method"].isin(["baseline", "gfpo"])]
    return score_matrices(cell)


def test_released_cell_row_is_rliables(released_main_cell):
    """The flagship cell's gfpo row as the tables job computes it, against rliable. 200 resamples, not the job's 9,999:
    rliable's PoI takes about a millisecond per resample and benchmark (scipy's Mann-Whitney U)."""
    gfpo = released_main_cell[("Qwen2.5-7B-Instruct@main", "gfpo")]
    baseline = released_main_cell[("Qwen2.5-7B-Instruct@main", "baseline")]
    assert gfpo.shape == (3, 12)
    row = aggregates(released_main_cell, {"gfpo": "baseline"}, reps=200).set_index("method").loc["gfpo"]
    iqm, (iqm_low, iqm_high) = rliable_iqm(gfpo, 200)
    poi, (poi_low, poi_high) = rliable_poi(gfpo, baseline, 200)
    assert (row["iqm"], row["iqm_low"], row["iqm_high"]) == (100 * iqm, 100 * iqm_low, 100 * iqm_high)
    assert (row["poi"], row["poi_low"], row["poi_high"]) == (poi, poi_low, poi_high)
    assert round(row["iqm"], 2) == 52.61 and round(row["poi"], 2) == 0.61  # docs/statistics.md quotes these


def test_released_cell_profile_is_rliables(released_main_cell):
    scores = released_main_cell[("Qwen2.5-7B-Instruct@main", "baseline")]
    taus = profile_thresholds(scores)
    np.random.seed(BOOTSTRAP_SEED)
    profiles, bands = library.create_performance_profile({"m": scores}, taus, reps=2000)
    counts, = draw_counts((3,), 12, 2000)
    np.testing.assert_array_equal(performance_profile(scores, taus), profiles["m"])
    np.testing.assert_array_equal(np.array(percentile_interval(performance_profile(scores, taus, counts), 0.95)),
                                  bands["m"])
