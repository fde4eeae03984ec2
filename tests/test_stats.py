import math
import re

import numpy as np
import pandas as pd
import pytest
from scipy import stats

from dataflex_rl.records.run_records import records_frame, summarise_items
from dataflex_rl.stats.paired import (UnmatchedSeedsError, _holm, compare_methods, headroom,
                                      paired_difference_ci)
from dataflex_rl.stats.summaries import run_summaries

T_975_2 = 4.302652729749462  # t quantile, 2 degrees of freedom, from tables


def test_paired_ci_equals_scipy():
    rng = np.random.default_rng(0)
    control = {s: float(v) for s, v in enumerate(rng.uniform(0.2, 0.6, 9))}
    treatment = {s: v + float(rng.normal(0.02, 0.03)) for s, v in control.items()}
    result = paired_difference_ci(treatment, control, confidence=0.9)
    d = np.array([treatment[s] - control[s] for s in sorted(control)])
    low, high = stats.t.interval(0.9, len(d) - 1, loc=d.mean(), scale=stats.sem(d))
    assert result.mean == pytest.approx(d.mean(), abs=1e-9)
    assert result.ci_low == pytest.approx(low, abs=1e-9)
    assert result.ci_high == pytest.approx(high, abs=1e-9)
    assert result.sd == pytest.approx(d.std(ddof=1), abs=1e-9)
    t_list = [treatment[s] for s in sorted(control)]
    c_list = [control[s] for s in sorted(control)]
    assert result.t_p_value == pytest.approx(stats.ttest_rel(t_list, c_list).pvalue, abs=1e-9)
    assert result.n == 9 and result.seeds == tuple(range(9)) and result.dropped == ()


def test_paired_ci_by_hand():
    result = paired_difference_ci({0: 1.0, 1: 2.0, 2: 3.0}, {0: 0.0, 1: 0.0, 2: 0.0})
    half = T_975_2 / math.sqrt(3)
    assert (result.mean, result.sd, result.n) == (2.0, 1.0, 3)
    assert result.ci_low == pytest.approx(2 - half, abs=1e-9)
    assert result.ci_high == pytest.approx(2 + half, abs=1e-9)


def test_single_seed_gives_nan_interval():
    result = paired_difference_ci({4: 0.5}, {4: 0.25})
    assert result.mean == 0.25 and result.n == 1
    assert all(math.isnan(x) for x in (result.ci_low, result.ci_high, result.sd, result.t_p_value))


def test_identical_differences_have_zero_width():
    result = paired_difference_ci({0: 0.5, 1: 0.75}, {0: 0.25, 1: 0.5})
    assert (result.ci_low, result.ci_high, result.t_p_value) == (0.25, 0.25, 0.0)


def test_unmatched_seeds_raise_naming_the_cell():
    with pytest.raises(UnmatchedSeedsError, match=r"\(control, seed 3\)") as info:
        paired_difference_ci({1: 0.5, 2: 0.5, 3: 0.4}, {1: 0.4, 2: 0.3, 7: 0.2})
    assert info.value.missing == (("control", 3), ("treatment", 7))
    assert isinstance(info.value, ValueError)


def test_allow_unpaired_keeps_intersection_and_records_drops():
    result = paired_difference_ci({1: 0.5, 2: 0.5, 3: 0.4}, {1: 0.4, 2: 0.3, 7: 0.2}, allow_unpaired=True)
    assert result.seeds == (1, 2)
    assert result.dropped == (("control", 3), ("treatment", 7))
    assert result.mean == pytest.approx(0.15)


def _records():
    """Two domains, math with two benchmarks: DB, Macro and Item all differ."""
    layout = [("b1", "math", 10), ("b2", "math", 10), ("b3", "logic", 40)]
    solved = {("untrained", None): (8, 2, 10), ("baseline", 0): (9, 3, 12), ("baseline", 1): (8, 4, 16)}
    rows = []
    for (method, seed), counts in solved.items():
        for (bench, domain, n), correct in zip(layout, counts):
            items = pd.DataFrame({"prompt_id": [f"p{i}" for i in range(n)], "response": "x", "length": 5,
                                  "correct": [i < correct for i in range(n)], "parsed": True})
            rows.append(summarise_items(items, model="m", method=method, seed=seed, benchmark=bench,
                                        domain=domain, steps=0 if seed is None else 300))
    return records_frame(rows)


def test_db_is_mean_of_domain_means():
    summaries = run_summaries(_records())
    base = summaries[summaries["method"] == "untrained"].iloc[0]
    assert list(summaries.columns) == ["model", "method", "seed", "run_id", "excluded_benchmarks", "domain:math",
                                       "domain:logic", "DB-3", "Macro-3", "Item-3"]
    assert base["domain:math"] == pytest.approx(0.5)          # (0.8 + 0.2) / 2
    assert base["domain:logic"] == pytest.approx(0.25)        # 10 / 40
    assert base["DB-3"] == pytest.approx(0.375)               # (0.5 + 0.25) / 2
    assert base["Macro-3"] == pytest.approx((0.8 + 0.2 + 0.25) / 3)
    assert base["Item-3"] == pytest.approx(20 / 60)
    assert pd.isna(base["seed"]) and summaries["seed"].dtype == "Int64"
    assert len(summaries) == 3


def test_summaries_refuse_runs_missing_a_benchmark():
    records = _records()
    records = records[~((records["run_id"] == "m/baseline/seed1") & (records["benchmark"] == "b2"))]
    with pytest.raises(ValueError, match="b2"):
        run_summaries(records)


def test_headroom_by_hand():
    summaries = pd.DataFrame({"model": "m", "method": ["untrained", "baseline", "baseline", "baseline"],
                              "seed": pd.array([None, 0, 1, 2], dtype="Int64"), "DB-12": [0.30, 0.35, 0.40, 0.45]})
    row = headroom(summaries, "DB-12").iloc[0]
    assert row["untrained"] == pytest.approx(30) and row["trained_mean"] == pytest.approx(40)
    assert row["delta_mean"] == pytest.approx(10) and row["sd"] == pytest.approx(5) and row["n_seeds"] == 3
    assert row["ci_low"] == pytest.approx(10 - T_975_2 * 5 / math.sqrt(3), abs=1e-9)
    assert row["ci_high"] == pytest.approx(10 + T_975_2 * 5 / math.sqrt(3), abs=1e-9)
    assert row["p"] == pytest.approx(stats.ttest_1samp([5, 10, 15], 0).pvalue, abs=1e-9)


def _method_summaries():
    values = {"baseline": [0.40, 0.42, 0.41], "difffilter": [0.43, 0.44, 0.45], "static": [0.40, 0.40, 0.41],
              "dump_ucb": [0.39, 0.41, 0.40]}
    return pd.DataFrame([{"model": "m", "method": method, "seed": seed, "DB-12": v}
                         for method, vs in values.items() for seed, v in enumerate(vs)])


def test_compare_methods_in_points_against_each_control():
    table = compare_methods(_method_summaries(), controls={"difffilter": "baseline", "dump_ucb": "static"})
    assert list(table["method"]) == ["difffilter", "dump_ucb"]
    assert list(table["control"]) == ["baseline", "static"]
    row = table.iloc[0]
    direct = paired_difference_ci({0: 0.43, 1: 0.44, 2: 0.45}, {0: 0.40, 1: 0.42, 2: 0.41})
    assert row["delta_mean"] == pytest.approx(100 * direct.mean)
    assert row["ci_low"] == pytest.approx(100 * direct.ci_low)
    assert row["method_mean"] - row["control_mean"] == pytest.approx(row["delta_mean"])
    assert row["n_seeds"] == 3 and row["dropped_seeds"] == ""
    assert (table["p_holm"] >= table["p"]).all()


def test_compare_methods_names_the_missing_run():
    summaries = _method_summaries()
    summaries = summaries[~((summaries["method"] == "baseline") & (summaries["seed"] == 2))]
    with pytest.raises(UnmatchedSeedsError, match="m/baseline, seed 2"):
        compare_methods(summaries, controls={"difffilter": "baseline"})
    table = compare_methods(summaries, controls={"difffilter": "baseline"}, pairing="shared_seeds")
    assert table["n_seeds"].tolist() == [2] and table["dropped_seeds"].tolist() == ["m/baseline:seed2"]
    assert table["pairing"].tolist() == ["shared_seeds"]


def test_unmatched_seeds_error_names_the_switch():
    with pytest.raises(UnmatchedSeedsError, match="stats.pairing"):
        paired_difference_ci({1: 0.5, 2: 0.4}, {1: 0.4})


@pytest.mark.parametrize("arm, seeds, message", [
    ("baseline", [1, 2, 2], "'baseline' has repeated seeds [2]"),
    ("difffilter", [3, 1, 3], "'difffilter' has repeated seeds [3]"),
    ("difffilter", [1, None, 2], "'difffilter' has runs without a seed"),
])
def test_compare_methods_refuses_an_arm_with_repeated_or_missing_seeds(arm, seeds, message):
    rows = [{"model": "m", "method": method, "seed": seed, "DB-12": 0.5}
            for method in ("baseline", "difffilter") for seed in (seeds if method == arm else [1, 2, 3])]
    summaries = pd.DataFrame(rows).astype({"seed": "Int64"})
    with pytest.raises(ValueError, match=re.escape(message)):
        compare_methods(summaries, controls={"difffilter": "baseline"})


def test_unpaired_comparison_is_welch_by_hand():
    """Welch's interval from its textbook formula (Welch–Satterthwaite df), over every seed of each arm."""
    summaries = _method_summaries()
    summaries = summaries[~((summaries["method"] == "baseline") & (summaries["seed"] == 2))]
    row = compare_methods(summaries, controls={"difffilter": "baseline"}, pairing="unpaired").iloc[0]
    t, c = np.array([0.43, 0.44, 0.45]), np.array([0.40, 0.42])
    vt, vc = t.var(ddof=1) / 3, c.var(ddof=1) / 2
    df = (vt + vc) ** 2 / (vt ** 2 / 2 + vc ** 2 / 1)
    half = stats.t.ppf(0.975, df) * math.sqrt(vt + vc)
    delta = t.mean() - c.mean()
    assert row["pairing"] == "unpaired" and row["n_seeds"] == 2 and row["dropped_seeds"] == ""
    assert row["method_mean"] == pytest.approx(44.0) and row["control_mean"] == pytest.approx(41.0)
    assert row["delta_mean"] == pytest.approx(100 * delta, abs=1e-9)
    assert row["ci_low"] == pytest.approx(100 * (delta - half), abs=1e-9)
    assert row["ci_high"] == pytest.approx(100 * (delta + half), abs=1e-9)
    assert row["p"] == pytest.approx(2 * stats.t.sf(delta / math.sqrt(vt + vc), df), abs=1e-9)
    assert row["sd"] == pytest.approx(100 * math.sqrt(t.var(ddof=1) + c.var(ddof=1)), abs=1e-9)


def test_unknown_pairing_is_refused():
    with pytest.raises(ValueError, match="pairing must be one of"):
        compare_methods(_method_summaries(), controls={"difffilter": "baseline"}, pairing="welch")


def test_compare_methods_requires_the_control():
    with pytest.raises(ValueError, match="control 'gone'"):
        compare_methods(_method_summaries(), controls={"difffilter": "gone"})


def test_holm_by_hand():
    adjusted = _holm(pd.Series([0.01, 0.04, 0.03, np.nan]))
    assert adjusted.iloc[:3].tolist() == pytest.approx([0.03, 0.06, 0.06])
    assert math.isnan(adjusted.iloc[3])
