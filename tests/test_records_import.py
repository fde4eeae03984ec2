"""The authors' released run table as records: sizes, counts, cells, and their own numbers.

The expected summaries are computed here straight from the printed CSV with pandas (or the csv module), never through
the package: the records keep every printed score, so each mean must equal the authors' to rounding error."""
import csv
from collections import defaultdict
from pathlib import Path

import pandas as pd
import pytest

from dataflex_rl.records.run_records import validate_records
from dataflex_rl.records.imported import RELEASED_BENCHMARKS, import_released_runs, infer_benchmark_size, load_records
from dataflex_rl.stats.paired import compare_methods
from dataflex_rl.stats.sensitivity import benchmark_means, method_means
from dataflex_rl.stats.summaries import math_heavy_benchmarks, run_summaries
from dataflex_rl.item_sources.registry import PAPER_BENCHMARKS

RELEASED = Path(__file__).resolve().parents[2] / "shared/data/dataflex-rl-records/all_runs_171.csv"
needs_release = pytest.mark.skipif(not RELEASED.is_file(), reason=f"{RELEASED} not present")

SIX = ["math500", "aime24", "olympiadbench", "minerva_math", "gsm8k", "gpqa_diamond"]
ORDER = ["baseline", "ar", "per", "softmax", "difffilter", "diffband", "maxvar", "gfpo", "topk"]
DOMAINS = {"math": ["math500", "aime24", "olympiadbench", "minerva_math", "gsm8k"],
           "logic": ["kk_hard", "bbh_logical_deduction", "bbh_tracking", "zebra_logic_mc"],
           "science": ["gpqa_diamond", "mmlu_pro_chemistry", "mmlu_pro_physics"]}
SIZES = {"math500": 500, "aime24": 30, "olympiadbench": 675, "minerva_math": 272, "gsm8k": 1319, "kk_hard": 200,
         "bbh_logical_deduction": 750, "bbh_tracking": 750, "zebra_logic_mc": 500, "gpqa_diamond": 198,
         "mmlu_pro_chemistry": 500, "mmlu_pro_physics": 500}


def test_size_exact_multiples_beat_the_registry():
    # Every value an even tenth: 500 items, however large the full benchmark is.
    assert infer_benchmark_size(["56.8", "60.0", "30.2"], registry_size=1132) == (500, "exact")
    assert infer_benchmark_size(["31.818181818181817", "38.888888888888886"], 198) == (198, "exact")


def test_size_rounded_values_take_the_registry_when_consistent():
    assert infer_benchmark_size(["3.3", "6.7", "13.3", "10.0"], registry_size=30) == (30, "registry")
    assert infer_benchmark_size(["3.3", "6.7", "13.3"], registry_size=None) == (30, "rounding")


def test_size_refuses_inconsistent_registry_and_bad_values():
    assert infer_benchmark_size(["3.3", "6.7"], registry_size=40).how == "rounding"
    with pytest.raises(ValueError, match="lie in"):
        infer_benchmark_size(["101.0"])


@needs_release
def test_inferred_sizes_of_the_released_table():
    records = import_released_runs(RELEASED)
    column = {b: c for c, b in RELEASED_BENCHMARKS.items()}
    sizes = records.groupby("benchmark")["n"].agg(set)
    assert {column[b]: n for b, n in sizes.items()} == {c: {n} for c, n in SIZES.items()}
    raw = pd.read_csv(RELEASED, dtype=str)
    assert infer_benchmark_size(raw["mmlu_pro_chemistry"].tolist(),
                                PAPER_BENCHMARKS["MMLU-Pro-chemistry"].size).how == "exact"
    assert infer_benchmark_size(raw["gsm8k"].tolist(), PAPER_BENCHMARKS["GSM8K"].size).how == "registry"


@needs_release
def test_import_keeps_printed_scores_with_inferred_counts_one_row_per_run_and_benchmark():
    records = import_released_runs(RELEASED)
    validate_records(records)
    assert len(records) == 171 * 12 and records["run_id"].nunique() == 171
    assert set(records["benchmark"]) == set(RELEASED_BENCHMARKS.values())
    printed = pd.read_csv(RELEASED).melt(id_vars="run_id", value_vars=list(RELEASED_BENCHMARKS), value_name="percent")
    printed = printed.assign(benchmark=printed["variable"].map(RELEASED_BENCHMARKS))
    both = records.merge(printed, left_on=["source_run_id", "benchmark"], right_on=["run_id", "benchmark"])
    assert len(both) == len(records)
    assert (both["score"] == both["percent"] / 100).all()
    assert records["counts_inferred"].all()
    assert ((records["score"] * records["n"] - records["correct"]).abs() <= 0.5).all()
    assert records.groupby("domain")["benchmark"].nunique().to_dict() == {"math": 5, "logic": 4, "science": 3}
    # The same model/method/seed in two campaigns stays two runs.
    baseline_7b = records[(records["base_model"] == "Qwen2.5-7B-Instruct") & (records["method"] == "baseline")]
    assert sorted(baseline_7b["model"].unique()) == [
        "Qwen2.5-7B-Instruct@constrained:noise20_20pct_label_noise",
        "Qwen2.5-7B-Instruct@constrained:sub25_25pct_data_subset",
        "Qwen2.5-7B-Instruct@long_training", "Qwen2.5-7B-Instruct@main"]
    assert set(records.loc[records["campaign"] == "long_training", "steps"]) == {1000}
    assert math_heavy_benchmarks(records) == ["MATH-500", "AIME-2024", "OlympiadBench", "Minerva-Math", "GSM8K",
                                              "GPQA-Diamond"]


def _published_runs() -> pd.DataFrame:
    """Per released run, in points, from the printed CSV: each domain's mean, DB-12 (the mean of the three),
    Macro-12 (the mean of all twelve) and Math-Heavy-6; `cell` names the study cell as the records do."""
    raw = pd.read_csv(RELEASED)
    out = pd.DataFrame({f"domain:{d}": raw[columns].mean(axis=1) for d, columns in DOMAINS.items()})
    out["DB-12"] = out.mean(axis=1)
    out["Macro-12"] = raw[list(SIZES)].mean(axis=1)
    out["Math-Heavy-6"] = raw[SIX].mean(axis=1)
    regime = raw["regime"].fillna("")
    out["cell"] = raw["model"] + "@" + raw["campaign"] + regime.where(regime == "", ":" + regime)
    return pd.concat([raw[["run_id", "method", "seed"]], out], axis=1)


PUBLISHED = ["domain:math", "domain:logic", "domain:science", "DB-12", "Macro-12", "Math-Heavy-6"]


@needs_release
def test_every_run_summary_equals_the_published_means():
    summaries = run_summaries(import_released_runs(RELEASED), extra_keys=["source_run_id"])
    both = summaries.merge(_published_runs(), left_on="source_run_id", right_on="run_id", suffixes=("", "_csv"))
    assert len(both) == 171
    for metric in PUBLISHED:
        assert (100 * both[metric] - both[f"{metric}_csv"]).abs().max() <= 1e-12, metric


@needs_release
@pytest.mark.parametrize("cell", ["Qwen2.5-7B-Instruct@main", "Qwen2.5-0.5B-Instruct@mixer",
                                  "Qwen2.5-7B-Instruct@constrained:noise20_20pct_label_noise",
                                  "Llama-3.1-8B-base@crossfamily"])
def test_method_means_and_paired_differences_equal_the_published_values(cell):
    published = _published_runs()
    published = published[published["cell"] == cell]
    expected = published.groupby("method")[PUBLISHED].mean()
    summaries = run_summaries(import_released_runs(RELEASED))
    summaries = summaries[summaries["model"] == cell]
    ours = method_means(summaries, PUBLISHED).set_index("method")
    assert sorted(ours.index) == sorted(expected.index)
    assert (ours[PUBLISHED] - expected).abs().max().max() <= 1e-12
    control = "static" if "static" in expected.index else "baseline"
    by_seed = published.set_index(["method", "seed"])["DB-12"]
    methods = [m for m in expected.index if m != control]
    compared = compare_methods(summaries, "DB-12", controls={m: control for m in methods}).set_index("method")
    for method in methods:
        delta = (by_seed[method] - by_seed[control]).mean()
        assert abs(compared.loc[method, "delta_mean"] - delta) <= 1e-12, method


def _round_trip(percent: pd.Series, column: str) -> pd.Series:
    """What the importer used to keep: the printed percent rounded to a count of the inferred size, and back."""
    n = SIZES[column]
    return (percent * n / 100).round() / n * 100


@needs_release
def test_the_count_round_trip_moved_printed_values_and_reordered_two_methods():
    raw = pd.read_csv(RELEASED)
    records = import_released_runs(RELEASED).set_index(["source_run_id", "benchmark"])
    # Llama-3.1-8B topk seed 2 printed 6.2 on Minerva-Math: 16.86 of 272 items, so 17, and 17/272 is 6.25.
    printed = raw.set_index("run_id").loc["v3_llama8b__topk_s2", "minerva_math"]
    assert printed == 6.2 and _round_trip(pd.Series([printed]), "minerva_math")[0] == 6.25
    row = records.loc[("v3_llama8b__topk_s2", "Minerva-Math")]
    assert (row["score"], row["n"], row["correct"]) == (0.062, 272, 17)
    moved = {c: int((_round_trip(raw[c], c) - raw[c]).abs().gt(1e-9).sum()) for c in SIZES}
    assert moved == {**{c: 0 for c in SIZES}, "aime24": 81, "olympiadbench": 160, "minerva_math": 170, "gsm8k": 171}
    # The authors' own six-benchmark average on 7B-Instruct main: per leads difffilter as printed, and trailed it after
    # the round trip.
    main = raw[(raw["model"] == "Qwen2.5-7B-Instruct") & (raw["campaign"] == "main")]
    as_printed = main[SIX].mean(axis=1).groupby(main["method"]).mean()
    rounded = pd.concat([_round_trip(main[c], c) for c in SIX], axis=1).mean(axis=1).groupby(main["method"]).mean()
    assert as_printed["per"] > as_printed["difffilter"] and rounded["per"] < rounded["difffilter"]
    summaries = run_summaries(import_released_runs(RELEASED))
    ours = method_means(summaries[summaries["model"] == "Qwen2.5-7B-Instruct@main"]).set_index("method")
    assert ours.loc["per", "Math-Heavy-6"] > ours.loc["difffilter", "Math-Heavy-6"]


def _build_tables_six(model: str, campaign: str) -> dict[str, float]:
    """The authors' build_tables.py six-benchmark average, recomputed from the printed CSV with the csv module."""
    values = defaultdict(lambda: defaultdict(list))
    with open(RELEASED) as handle:
        for row in csv.DictReader(handle):
            if row["model"] == model and row["campaign"] == campaign:
                for column in SIX:
                    values[row["method"]][column].append(float(row[column]))
    return {m: sum(sum(v) / len(v) for v in cols.values()) / len(SIX) for m, cols in values.items()}


@needs_release
def test_seven_b_main_six_benchmark_means_reproduce_build_tables():
    records = import_released_runs(RELEASED)
    theirs = _build_tables_six("Qwen2.5-7B-Instruct", "main")
    ours = benchmark_means(records[records["model"] == "Qwen2.5-7B-Instruct@main"],
                           math_heavy_benchmarks(records)).set_index("method")["mean"]
    assert f"{theirs['baseline']:.1f}" == "50.7" and f"{ours['baseline']:.1f}" == "50.7"
    for method in ORDER:
        assert f"{ours[method]:.1f}" == f"{theirs[method]:.1f}", method
        assert ours[method] == pytest.approx(theirs[method], abs=1e-12)
    summaries = run_summaries(records)
    main = summaries[summaries["model"] == "Qwen2.5-7B-Instruct@main"].groupby("method")["Math-Heavy-6"].mean()
    assert (100 * main).to_dict() == pytest.approx(ours.to_dict(), abs=1e-9)


@needs_release
def test_a_value_that_is_not_a_count_is_refused_naming_the_run(tmp_path):
    frame = pd.read_csv(RELEASED, dtype=str, keep_default_na=False)
    frame.loc[0, "bbh_tracking"] = "85.61"
    path = tmp_path / "runs.csv"
    frame.to_csv(path, index=False)
    with pytest.raises(ValueError, match="v2_7b__ar_s1"):
        import_released_runs(path, sizes={"bbh_tracking": 750})


@needs_release
def test_load_records_reads_released_csv_and_tidy_parquet(tmp_path):
    records = load_records(RELEASED)
    assert "campaign" in records.columns
    records.to_parquet(tmp_path / "records.parquet", index=False)
    again = load_records(tmp_path / "records.parquet")
    pd.testing.assert_frame_equal(again, records)
    with pytest.raises(ValueError, match="parquet or .csv"):
        load_records(tmp_path / "records.json")
