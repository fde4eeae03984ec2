"""Long-training and constrained-data contrasts: a method's Δ in a variant cell against its Δ in the reference cell."""
import math
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from scipy import stats

from dataflex_rl.report.regenerate import efficiency_table
from dataflex_rl.stats.contrasts import constrained_data_contrasts, long_training_contrasts
from dataflex_rl.stats.paired import compare_methods

RELEASED = Path(__file__).resolve().parents[2] / "shared/data/dataflex-rl-records/all_runs_171.csv"

SHORT = {"baseline": [0.50, 0.52, 0.51], "topk": [0.52, 0.53, 0.55]}   # Δ per seed: 2, 1, 4 points
LONG = {"baseline": [0.56, 0.55, 0.57], "topk": [0.56, 0.58, 0.56]}    # Δ per seed: 0, 3, -1 points


def _summaries(cells):
    rows = []
    for cell, base_model, regime, steps, values in cells:
        for method, scores in values.items():
            rows += [{"model": cell, "base_model": base_model, "regime": regime, "steps": steps, "method": method,
                      "seed": seed, "DB-12": v} for seed, v in enumerate(scores, start=1)]
    return pd.DataFrame(rows).astype({"seed": "Int64", "steps": "Int64"})


def test_a_control_trained_in_a_cell_only_as_a_reference_is_not_compared_there():
    """An ablation cell trains gradalign, gradalign_dot and their control random, not random's own control baseline
    (the campaign check allows it: random is there as a reference): each is compared with random, and random is left
    out of that cell, while a method whose control is missing and which serves no other is still an error."""
    values = {"gradalign": [0.52, 0.53, 0.55], "gradalign_dot": [0.50, 0.54, 0.50], "random": [0.50, 0.52, 0.51]}
    controls = {"gradalign": "random", "gradalign_dot": "random", "random": "baseline"}
    table = compare_methods(_summaries([("ablation", "m", None, 80, values)]), controls=controls)
    assert table[["method", "control"]].values.tolist() == [["gradalign", "random"], ["gradalign_dot", "random"]]
    assert table["delta_mean"].tolist() == pytest.approx([7 / 3, 1 / 3])  # (2 + 1 + 4) / 3, (0 + 2 − 1) / 3 points
    alone = {"random": values["random"]}
    with pytest.raises(ValueError, match="ablation: control 'baseline' of 'random' has no runs"):
        compare_methods(_summaries([("ablation", "m", None, 80, alone)]), controls=controls)


def test_long_training_contrast_by_hand():
    summaries = _summaries([("m@main", "m", None, 300, SHORT), ("m@long", "m", None, 1000, LONG)])
    row = long_training_contrasts(summaries, "DB-12", {"topk": "baseline"}).iloc[0]
    d_short, d_long = np.array([2.0, 1.0, 4.0]), np.array([0.0, 3.0, -1.0])
    assert (row["reference"], row["variant"], row["reference_cell"], row["variant_cell"]) == (
        "300 steps", "1000 steps", "m@main", "m@long")
    assert row["control_reference"] == pytest.approx(51.0) and row["control_variant"] == pytest.approx(56.0)
    assert row["control_shift"] == pytest.approx(5.0)
    assert row["delta_reference"] == pytest.approx(d_short.mean()) and row["delta_variant"] == pytest.approx(2 / 3)
    half = stats.t.ppf(0.975, 2) * d_long.std(ddof=1) / math.sqrt(3)
    assert (row["variant_ci_low"], row["variant_ci_high"]) == pytest.approx((2 / 3 - half, 2 / 3 + half), abs=1e-9)
    # Welch on the two cells' per-seed Δ: equal sizes, so df = (a + b)² / ((a² + b²) / 2) with a, b = s²/3.
    a, b = d_long.var(ddof=1) / 3, d_short.var(ddof=1) / 3
    df = (a + b) ** 2 / ((a ** 2 + b ** 2) / 2)
    change = d_long.mean() - d_short.mean()
    half = stats.t.ppf(0.975, df) * math.sqrt(a + b)
    assert row["change"] == pytest.approx(change, abs=1e-9)
    assert (row["change_low"], row["change_high"]) == pytest.approx((change - half, change + half), abs=1e-9)
    assert row["change_p"] == pytest.approx(2 * stats.t.sf(abs(change) / math.sqrt(a + b), df), abs=1e-9)
    assert constrained_data_contrasts(summaries, "DB-12", {"topk": "baseline"}).empty


def test_constrained_contrast_uses_the_full_data_cell_at_the_same_steps():
    noisy = {"baseline": [0.40, 0.41, 0.42], "topk": [0.44, 0.41, 0.43]}
    summaries = _summaries([("m@main", "m", None, 300, SHORT), ("m@noise", "m", "noise20", 300, noisy),
                            ("m@long", "m", None, 1000, LONG), ("other@main", "other", None, 300, SHORT)])
    table = constrained_data_contrasts(summaries, "DB-12", {"topk": "baseline"})
    assert table[["reference", "variant", "variant_cell"]].values.tolist() == [["full data", "noise20", "m@noise"]]
    assert table["control_shift"].iloc[0] == pytest.approx(41.0 - 51.0)
    assert table["delta_variant"].iloc[0] == pytest.approx(np.mean([4.0, 0.0, 1.0]))


def test_unmatched_seeds_inside_a_cell_are_an_error_unless_asked():
    summaries = _summaries([("m@main", "m", None, 300, SHORT), ("m@long", "m", None, 1000, LONG)])
    summaries = summaries[~((summaries["model"] == "m@long") & (summaries["method"] == "topk")
                            & (summaries["seed"] == 3))]
    with pytest.raises(ValueError, match=r"m@long/topk, seed 3"):
        long_training_contrasts(summaries, "DB-12", {"topk": "baseline"})
    row = long_training_contrasts(summaries, "DB-12", {"topk": "baseline"}, pairing="shared_seeds").iloc[0]
    assert row["n_seeds"] == 2 and row["delta_variant"] == pytest.approx(1.5)


def test_efficiency_per_thousand_characters_by_hand():
    records = pd.DataFrame({
        "model": "m", "method": ["topk", "topk", "untrained"], "seed": pd.array([1, 1, None], dtype="Int64"),
        "n": [10, 30, 10], "correct": [5, 9, 1], "mean_length": [20.0, 10.0, 5.0], "mean_chars": [80.0, 50.0, 9.0]})
    row = efficiency_table(records).iloc[0]
    assert row["mean_chars"] == pytest.approx((10 * 80 + 30 * 50) / 40)
    assert row["correct_per_1k_chars"] == pytest.approx(14 / (800 + 1500) * 1000)
    assert row["correct_per_1k_tokens"] == pytest.approx(14 / (200 + 300) * 1000)
    assert len(efficiency_table(records)) == 1
    legacy = records.assign(mean_chars=[80.0, float("nan"), 9.0])
    assert math.isnan(efficiency_table(legacy)["correct_per_1k_chars"].iloc[0])


@pytest.mark.skipif(not RELEASED.is_file(), reason=f"{RELEASED} not present")
def test_released_long_training_and_constrained_tables():
    from dataflex_rl.records.imported import load_records
    from dataflex_rl.report.regenerate import RUN_LEVEL_EXTRAS
    from dataflex_rl.stats.summaries import run_summaries

    summaries = run_summaries(load_records(RELEASED), extra_keys=RUN_LEVEL_EXTRAS)
    controls = {m: "baseline" for m in ("difffilter", "maxvar", "topk")}
    long = long_training_contrasts(summaries, "DB-12", controls)
    assert long["method"].tolist() == ["difffilter", "topk"]  # maxvar has no 1,000-step runs
    assert set(long["variant_cell"]) == {"Qwen2.5-7B-Instruct@long_training"}
    compared = compare_methods(summaries, "DB-12", controls=controls).set_index(["model", "method"])
    for row in long.itertuples():
        assert row.delta_variant == pytest.approx(compared.loc[(row.variant_cell, row.method), "delta_mean"])
        assert row.delta_reference == pytest.approx(compared.loc[(row.reference_cell, row.method), "delta_mean"])
    constrained = constrained_data_contrasts(summaries, "DB-12", controls)
    assert sorted(set(constrained["variant"])) == ["noise20_20pct_label_noise", "sub25_25pct_data_subset"]
    assert len(constrained) == 6 and set(constrained["reference"]) == {"full data"}


@pytest.mark.skipif(not RELEASED.is_file(), reason=f"{RELEASED} not present")
def test_released_scale_curve_lists_each_method_across_the_reference_cells():
    from dataflex_rl.records.imported import load_records
    from dataflex_rl.report.regenerate import RUN_LEVEL_EXTRAS, scale_curve_table
    from dataflex_rl.stats.summaries import run_summaries

    summaries = run_summaries(load_records(RELEASED), extra_keys=RUN_LEVEL_EXTRAS)
    controls = {m: "baseline" for m in ("difffilter", "maxvar", "topk", "gfpo")}
    compared = compare_methods(summaries, "DB-12", controls=controls)
    curve = scale_curve_table(compared, summaries).set_index("method")
    # the 300-step full-data cells with a baseline (main, scale curve, cross family); not long training, not the
    # constrained-data regimes
    assert list(curve.columns[1:]) == [  # the records' order
        "Llama-3.1-8B-base@crossfamily", "Qwen2.5-0.5B-Instruct@main", "Qwen2.5-1.5B-Instruct@scale_curve",
        "Qwen2.5-14B-base@crossfamily", "Qwen2.5-3B-Instruct@scale_curve", "Qwen2.5-7B-Instruct@main",
        "Qwen2.5-7B-base@crossfamily"]
    assert sorted(curve.index) == ["difffilter", "gfpo", "maxvar", "topk"]
    row = compared.set_index(["model", "method"]).loc[("Qwen2.5-3B-Instruct@scale_curve", "topk")]
    assert curve.loc["topk", "Qwen2.5-3B-Instruct@scale_curve"] == (
        f"{row.delta_mean:+.2f} [{row.ci_low:+.2f}, {row.ci_high:+.2f}]")
    assert pd.isna(curve.loc["gfpo", "Qwen2.5-3B-Instruct@scale_curve"])  # gfpo ran in the main campaign only


def test_tables_refuse_unmatched_seeds_unless_the_pairing_says_otherwise(tmp_path):
    from dataflex_rl.artefacts.layout import UNTRAINED
    from dataflex_rl.report.regenerate import regenerate
    from dataflex_rl.stats.paired import UnmatchedSeedsError
    from dataflex_rl.stats.simulate import simulate_records

    records = simulate_records(["m"], ["baseline", "topk"], [1, 2, 3], rng=4)
    records = records[records["run_id"] != "m/topk/seed2"]
    with pytest.raises(UnmatchedSeedsError, match=r"topk, seed 2\).*stats.pairing"):
        regenerate(records, tmp_path / "paired", {"topk": "baseline"}, bootstrap_resamples=0)
    for pairing, n_seeds in (("shared_seeds", 2), ("unpaired", 2)):
        tables = regenerate(records, tmp_path / pairing, {"topk": "baseline"}, bootstrap_resamples=0,
                            pairing=pairing)
        comparisons = tables["comparisons"]
        assert set(comparisons["pairing"]) == {pairing} and set(comparisons["n_seeds"]) == {n_seeds}
        # Seed sufficiency needs every method at every seed: seed 2 is left out.
        assert set(tables["seed_sufficiency"]["of_seeds"]) == {2}
    assert UNTRAINED in set(records["method"])
