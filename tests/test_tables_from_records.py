"""Every table and figure from records alone: the library call, the LaTeX body, and the Snakemake `tables` target."""
import subprocess
import sys
from pathlib import Path

import pandas as pd
import pytest

from dataflex_rl.item_sources.registry import EMBEDDED_BENCHMARKS
from dataflex_rl.records.run_records import validate_records
from dataflex_rl.report.outputs import FIGURES, TABLES, figure_paths, table_paths
from dataflex_rl.report.regenerate import regenerate
from dataflex_rl.report.tables import latex_table_body
from dataflex_rl.stats.simulate import simulate_records

import forked_snakemake

REPO = Path(__file__).resolve().parents[1]
RELEASED = REPO.parent / "shared/data/dataflex-rl-records/all_runs_171.csv"
SNAKEFILE = ["--snakefile", str(REPO / "Snakefile")]
SNAKEMAKE = [sys.executable, "-m", "snakemake", *SNAKEFILE]


def job_counts(output: str) -> dict[str, int]:
    import re

    table = output.split("Job stats:", 1)[1].split("\n\n", 1)[0]
    return {m.group(1): int(m.group(2)) for m in re.finditer(r"^(\w+)\s+(\d+)\s*$", table, re.MULTILINE)
            if m.group(1) != "total"}


def _embedded_records():
    return simulate_records(["tiny-qwen2"], ["baseline", "difffilter", "softmax", "static"], [1, 2, 3],
                            benchmarks=list(EMBEDDED_BENCHMARKS), items=100, rng=5)


def test_regenerate_writes_every_table_in_three_formats_and_every_figure(tmp_path):
    records = _embedded_records()
    validate_records(records)
    tables = regenerate(records, tmp_path, controls={"difffilter": "baseline", "softmax": "baseline",
                                                     "static": "baseline"}, bootstrap_resamples=200)
    for path in table_paths(tmp_path) + figure_paths(tmp_path):
        assert Path(path).stat().st_size > 0, path
    assert len(TABLES) * 3 + len(FIGURES) == len(list(tmp_path.rglob("*.*")))
    # kinematics stands for GPQA-Diamond, so the embedded study has a Math-Heavy-6 too.
    assert set(tables["comparisons"]["metric"]) == {"DB-12", "Macro-12", "Item-12", "Math-Heavy-6"}
    assert {"boot_low", "boot_high"} <= set(tables["comparisons"].columns)
    assert len(tables["headroom"]) == 1 and len(tables["efficiency"]) == 4
    assert tables["seed_sufficiency"]["n_seeds"].max() == 3
    assert "\\midrule" in (tmp_path / "comparisons.tex").read_text()
    reread = pd.read_csv(tmp_path / "run_summaries.csv")
    assert len(reread) == 1 + 4 * 3


def test_latex_body_escapes_and_marks_missing():
    body = latex_table_body(pd.DataFrame({"a_b": ["x&y", "50%"], "v": [1.23456, float("nan")]}))
    assert body.splitlines() == [r"a\_b & v \\", r"\midrule", r"x\&y & 1.23 \\", r"50\% & -- \\"]


def test_released_tables_dag_has_only_the_tables_job():
    if not RELEASED.is_file():
        pytest.skip(f"{RELEASED} not present")
    result = forked_snakemake.snakemake([*SNAKEFILE, "-n", "-F", "tables", "--configfile", "config/released.yaml"],
                                        cwd=REPO)
    assert result.returncode == 0, result.stderr[-3000:]
    assert job_counts(result.stdout + result.stderr) == {"tables": 1}
    assert "no training or scoring" in result.stderr


def test_tables_with_training_outputs_deleted_retrains_nothing(tmp_path):
    """Only the records survive (every model, run and score deleted): the tables target reads them and stops there."""
    (tmp_path / "results/records").mkdir(parents=True)
    _embedded_records().to_parquet(tmp_path / "results/records/records.parquet", index=False)
    result = forked_snakemake.snakemake([*SNAKEFILE, "-n", "tables", "--configfile", str(REPO / "config/config.yaml"),
                                         "--directory", str(tmp_path)])
    assert result.returncode == 0, result.stderr[-3000:]
    assert job_counts(result.stdout + result.stderr) == {"tables": 1}


@pytest.mark.slow
def test_released_tables_target_runs(tmp_path):
    if not RELEASED.is_file():
        pytest.skip(f"{RELEASED} not present")
    result = subprocess.run([*SNAKEMAKE, "tables", "--cores", "1", "--configfile", str(REPO / "config/released.yaml"),
                             "--config", f"records_file={RELEASED}", "--directory", str(tmp_path)],
                            capture_output=True, text=True)
    assert result.returncode == 0, result.stderr[-3000:]
    out = tmp_path / "results/tables/released"
    sensitivity = pd.read_csv(out / "sensitivity.csv")
    main = sensitivity[sensitivity["model"] == "Qwen2.5-7B-Instruct@main"].set_index("metric")
    assert main.loc["Math-Heavy-6", "spearman_vs_DB-12"] == pytest.approx(-5 / 15)
    assert pd.read_csv(out / "headroom.csv").empty  # the release has no untrained runs
    assert not (tmp_path / "results/runs").exists() and not (tmp_path / "results/scores").exists()


def test_a_one_seed_pilot_gets_every_table_and_figure(tmp_path):
    """seeds: [1] is a valid study (a pilot): no subset of seeds exists, so seed sufficiency has no rows (its columns
    kept) and its figure says why; every comparison is inconclusive (no spread to test). Before, the tables job
    failed on a KeyError for the empty table's missing columns."""
    records = simulate_records(["tiny-qwen2"], ["baseline", "difffilter"], [1], benchmarks=list(EMBEDDED_BENCHMARKS),
                               items=100, rng=5)
    tables = regenerate(records, tmp_path, controls={"difffilter": "baseline"}, bootstrap_resamples=50)
    for path in table_paths(tmp_path) + figure_paths(tmp_path):
        assert Path(path).stat().st_size > 0, path
    assert tables["seed_sufficiency"].empty and "winner_agreement" in tables["seed_sufficiency"].columns
    assert set(tables["comparisons"]["n_seeds"]) == {1}
    assert set(tables["comparisons"]["verdict"]) == {"inconclusive"}
