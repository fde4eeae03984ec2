"""Equivalence verdicts (docs/statistics.md): TOST p-values and (1 − 2α) intervals against statsmodels' ttost_paired /
ttost_ind(usevar="unequal") and its confidence intervals, Holm against statsmodels' multipletests, and the verdict rule
on hand-built and released cases."""
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from statsmodels.stats.multitest import multipletests
from statsmodels.stats.weightstats import CompareMeans, DescrStatsW, ttost_ind, ttost_paired

from dataflex_rl.records.imported import import_released_runs
from dataflex_rl.report.figures import forest_plot
from dataflex_rl.stats.paired import compare_methods
from dataflex_rl.stats.summaries import run_summaries

RELEASED = Path(__file__).resolve().parents[2] / "shared/data/dataflex-rl-records/all_runs_171.csv"
needs_release = pytest.mark.skipif(not RELEASED.is_file(), reason=f"{RELEASED} not present")
DOMAINS = {"math": ["math500", "aime24", "olympiadbench", "minerva_math", "gsm8k"],
           "logic": ["kk_hard", "bbh_logical_deduction", "bbh_tracking", "zebra_logic_mc"],
           "science": ["gpqa_diamond", "mmlu_pro_chemistry", "mmlu_pro_physics"]}

# Per-seed DB-12 in [0, 1]. Against baseline: "up" +3 points with little spread, "down" −3, "flat" within ±0.2 of it,
# "noisy" a wide spread, "nudge" +0.5 points with almost no spread (both tests reject).
ARMS = {"baseline": [0.400, 0.420, 0.410, 0.430, 0.405],
        "up": [0.431, 0.449, 0.441, 0.459, 0.436],
        "down": [0.371, 0.389, 0.379, 0.401, 0.374],
        "flat": [0.401, 0.419, 0.411, 0.429, 0.406],
        "noisy": [0.45, 0.37, 0.44, 0.40, 0.46],
        "nudge": [0.4051, 0.4250, 0.4154, 0.4349, 0.4100]}
CONTROLS = {m: "baseline" for m in ARMS if m != "baseline"}


def _summaries(arms=ARMS):
    return pd.DataFrame([{"model": "m", "method": method, "seed": seed, "DB-12": v}
                         for method, values in arms.items() for seed, v in enumerate(values)])


def _compared(pairing="paired", margin=1.0, arms=ARMS):
    return compare_methods(_summaries(arms), controls=CONTROLS, pairing=pairing,
                           equivalence_margin=margin).set_index("method")


@pytest.mark.parametrize("margin", [0.5, 1.0, 2.5])
def test_paired_tost_equals_statsmodels_ttost_paired(margin):
    table = _compared(margin=margin)
    control = np.array(ARMS["baseline"])
    for method in CONTROLS:
        treated = np.array(ARMS[method])
        p, _, _ = ttost_paired(treated, control, -margin / 100, margin / 100)
        low, high = DescrStatsW(treated - control).tconfint_mean(alpha=0.10)
        row = table.loc[method]
        assert row["p_tost"] == pytest.approx(p, rel=1e-9, abs=1e-15), method
        assert (row["tost_low"], row["tost_high"]) == pytest.approx((100 * low, 100 * high), abs=1e-9), method
        assert row["margin"] == margin


def test_welch_tost_equals_statsmodels_ttost_ind_unequal():
    arms = {**ARMS, "noisy": ARMS["noisy"][:3], "up": ARMS["up"][:4]}  # arms of different sizes
    table = _compared(pairing="unpaired", arms=arms)
    control = np.array(arms["baseline"])
    for method in CONTROLS:
        treated = np.array(arms[method])
        p, _, _ = ttost_ind(treated, control, -0.01, 0.01, usevar="unequal")
        low, high = CompareMeans.from_data(treated, control).tconfint_diff(alpha=0.10, usevar="unequal")
        row = table.loc[method]
        assert row["p_tost"] == pytest.approx(p, rel=1e-9, abs=1e-15), method
        assert (row["tost_low"], row["tost_high"]) == pytest.approx((100 * low, 100 * high), abs=1e-9), method


def test_tost_holm_adjusts_over_the_methods_of_the_table_like_p_holm():
    table = _compared()
    assert table["p_tost_holm"].to_numpy() == pytest.approx(multipletests(table["p_tost"], method="holm")[1])
    assert table["p_holm"].to_numpy() == pytest.approx(multipletests(table["p"], method="holm")[1])


def test_verdicts_on_hand_built_cases():
    table = _compared()
    assert table["verdict"].to_dict() == {"up": "better", "down": "worse", "flat": "equivalent",
                                          "noisy": "inconclusive", "nudge": "equivalent"}
    # "nudge" is the both-reject case: the difference test rejects too, and the verdict is still "equivalent".
    assert table.loc["nudge", "p_holm"] < 0.05 and table.loc["nudge", "p_tost_holm"] < 0.05
    assert table.loc["nudge", "delta_mean"] == pytest.approx(0.5, abs=0.01)


def test_a_margin_below_the_difference_makes_the_both_reject_case_better():
    assert _compared(margin=0.2).loc["nudge", "verdict"] == "better"


def test_one_seed_is_inconclusive_with_nan_tost():
    table = _compared(arms={m: v[:1] for m, v in ARMS.items()})
    assert set(table["verdict"]) == {"inconclusive"}
    assert table[["p_tost", "tost_low", "tost_high", "p_tost_holm"]].isna().all().all()


def test_identical_differences_are_known_exactly():
    """Every seed's difference the same (binary-exact values): no spread, so p is 0 inside the margin, 1 outside."""
    base = [0.5, 0.25]
    arms = {"baseline": base, "up": [v + 0.03125 for v in base], "down": [v - 0.03125 for v in base],
            "flat": [v + 0.00390625 for v in base], "noisy": base, "nudge": base}
    table = _compared(arms=arms, margin=1.0)
    assert table.loc["flat", ["p_tost", "tost_low", "tost_high"]].tolist() == [0.0, 0.390625, 0.390625]
    assert table.loc[["up", "down"], "p_tost"].tolist() == [1.0, 1.0]
    assert table["verdict"].to_dict() == {"up": "better", "down": "worse", "flat": "equivalent",
                                          "noisy": "equivalent", "nudge": "equivalent"}


def test_margin_must_be_positive():
    with pytest.raises(ValueError, match="margin must be positive"):
        _compared(margin=0.0)


def _printed_db12(cell_model: str, campaign: str) -> pd.DataFrame:
    """DB-12 in points per (method, seed), straight from the printed CSV: the mean of the three domain means."""
    raw = pd.read_csv(RELEASED)
    raw = raw[(raw["model"] == cell_model) & (raw["campaign"] == campaign)]
    db = sum(raw[columns].mean(axis=1) for columns in DOMAINS.values()) / len(DOMAINS)
    return raw.assign(db=db).pivot(index="seed", columns="method", values="db")


@needs_release
@pytest.mark.parametrize("pairing", ["paired", "unpaired"])
def test_released_crossfamily_cell_against_statsmodels(pairing):
    printed = _printed_db12("Qwen2.5-7B-base", "crossfamily")
    summaries = run_summaries(import_released_runs(RELEASED))
    cell = summaries[summaries["model"] == "Qwen2.5-7B-base@crossfamily"]
    methods = ["difffilter", "maxvar", "topk"]
    table = compare_methods(cell, "DB-12", controls={m: "baseline" for m in methods}, pairing=pairing,
                            equivalence_margin=1.0).set_index("method")
    tost = ttost_paired if pairing == "paired" else lambda a, b, lo, hi: ttost_ind(a, b, lo, hi, usevar="unequal")
    expected = {m: tost(printed[m].to_numpy(), printed["baseline"].to_numpy(), -1.0, 1.0)[0] for m in methods}
    assert table["p_tost"].to_dict() == pytest.approx(expected, rel=1e-6)
    adjusted = dict(zip(methods, multipletests([expected[m] for m in methods], method="holm")[1]))
    assert table["p_tost_holm"].to_dict() == pytest.approx(adjusted, rel=1e-6)
    # difffilter is within a point of uniform GRPO on the 7B base (Δ −0.22, 90% CI about [−0.54, 0.11]).
    assert table.loc["difffilter", "verdict"] == ("equivalent" if pairing == "paired" else "inconclusive")
    assert table.loc[["maxvar", "topk"], "verdict"].tolist() == ["inconclusive", "inconclusive"]


def test_forest_plot_draws_the_margin_band(tmp_path):
    table = _compared().reset_index()
    forest_plot(table, tmp_path / "plain.png", "DB-12")
    forest_plot(table, tmp_path / "band.png", "DB-12", margin=1.0)
    assert (tmp_path / "band.png").read_bytes() != (tmp_path / "plain.png").read_bytes()
