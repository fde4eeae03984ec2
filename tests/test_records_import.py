"""The authors' released run table as records: sizes, counts, cells, and their own build_tables.py numbers."""
import csv
from collections import defaultdict
from pathlib import Path

import pandas as pd
import pytest

from dataflex_rl.records import validate_records
from dataflex_rl.records_import import RELEASED_BENCHMARKS, import_released_runs, infer_benchmark_size, load_records
from dataflex_rl.stats.sensitivity import benchmark_means
from dataflex_rl.stats.summaries import math_heavy_benchmarks, run_summaries
from dataflex_rl.tasks.registry import PAPER_BENCHMARKS

RELEASED = Path(__file__).resolve().parents[2] / "shared/data/dataflex-rl-records/all_runs_171.csv"
needs_release = pytest.mark.skipif(not RELEASED.is_file(), reason=f"{RELEASED} not present")

SIX = ["math500", "aime24", "olympiadbench", "minerva_math", "gsm8k", "gpqa_diamond"]
ORDER = ["baseline", "ar", "per", "softmax", "difffilter", "diffband", "maxvar", "gfpo", "topk"]
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
def test_import_gives_valid_counts_one_row_per_run_and_benchmark():
    records = import_released_runs(RELEASED)
    validate_records(records)
    assert len(records) == 171 * 12 and records["run_id"].nunique() == 171
    assert set(records["benchmark"]) == set(RELEASED_BENCHMARKS.values())
    assert (records["score"] == records["correct"] / records["n"]).all()
    assert (records["score"] - records["score_reported"]).abs().max() <= 0.0005 + 1e-12  # printed to 0.1 point
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
        assert ours[method] == pytest.approx(theirs[method], abs=0.02)
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
