"""The Snakemake DAG itself: the paper matrix dry run, config refusal, and one small real end-to-end run."""
import json
import re
import shutil
from importlib import metadata
import subprocess
import sys
from pathlib import Path

import pandas as pd
import pytest

REPO = Path(__file__).resolve().parents[1]
SNAKEMAKE = [sys.executable, "-m", "snakemake", "--snakefile", str(REPO / "Snakefile")]


def snakemake(*args, cwd=REPO, check=True):
    result = subprocess.run([*SNAKEMAKE, *args], cwd=cwd, capture_output=True, text=True)
    if check and result.returncode != 0:
        raise AssertionError(f"snakemake {' '.join(args)} failed:\n{result.stdout[-4000:]}\n{result.stderr[-4000:]}")
    return result


def job_counts(output: str) -> dict[str, int]:
    """Parse Snakemake's 'Job stats' table into {rule: count}."""
    table = output.split("Job stats:", 1)[1]
    return {m.group(1): int(m.group(2)) for m in re.finditer(r"^(\w+)\s+(\d+)\s*$", table, re.MULTILINE)}


def test_paper_matrix_dry_run_without_slurm_shows_156_training_jobs():
    result = snakemake("-n", "--profile", "profiles/slurm", "--configfile", "config/paper.yaml")
    counts = job_counts(result.stdout + result.stderr)
    assert counts["train"] == 13 * 12
    assert counts["score"] == (13 * 12 + 1) * 12  # one job per (run, benchmark), the untrained base included
    assert counts["calibrate"] == 12 and counts["records"] == 1
    assert "13 method(s) × 12 seed(s) = 156 training runs" in result.stderr


# Bad configs: tests/test_bad_configs.py (each refusal through the real `snakemake -n`).


@pytest.mark.slow
def test_smoke_study_runs_end_to_end_and_reruns_only_what_changed(tmp_path):
    config = str(REPO / "config/smoke.yaml")
    snakemake("--cores", "2", "--configfile", config, "--directory", str(tmp_path), "--quiet")

    records = pd.read_parquet(tmp_path / "results/records/records.parquet")
    assert len(records) == (4 * 2 + 1) * 12  # (methods × seeds + untrained) × benchmarks
    assert records["n"].eq(8).all()
    tables = tmp_path / "results/tables/smoke"
    headroom = pd.read_csv(tables / "headroom.csv")
    assert headroom.loc[0, "n_seeds"] == 2
    comparisons = pd.read_csv(tables / "comparisons.csv")
    assert sorted(comparisons.loc[comparisons["metric"] == "DB-12", "method"]) == ["difffilter", "softmax", "static"]
    assert (tables / "figures/forest_DB.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert (tables / "figures/training_curves.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert records["config_hash"].str.fullmatch(r"[0-9a-f]{64}").all()
    assert records.groupby("method")["config_hash"].nunique().eq(1).all() and records["config_hash"].nunique() == 5
    assert json.loads(records.loc[0, "package_versions"])["dataflex-rl"] == metadata.version("dataflex-rl")
    metrics = pd.read_parquet(tmp_path / "results/runs/tiny-qwen2/static/seed1/metrics.parquet")
    assert len(metrics) == 3 and {"p:math", "kept_fraction"} <= set(metrics.columns)

    again = snakemake("-n", "--configfile", config, "--directory", str(tmp_path))
    assert "Nothing to be done" in again.stdout + again.stderr

    shutil.rmtree(tmp_path / "results/runs/tiny-qwen2/softmax/seed2")
    plan = snakemake("-n", "--configfile", config, "--directory", str(tmp_path))
    counts = job_counts(plan.stdout + plan.stderr)
    assert counts == {"train": 1, "score": 1, "records": 1, "tables": 1, "training_curves": 1, "all": 1,
                      "total": 6}
