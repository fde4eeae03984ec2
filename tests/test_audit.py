"""The audit reads a results tree and reports complete, partial and missing cells, unmatched seeds and stale records.

The tree is built by hand in tmp_path with real parquet files in the real schemas (item files, the records table built
by records.records_frame); the expected report is worked out from what was put there.
"""
import copy
import json
import subprocess
import sys
from pathlib import Path

import pandas as pd
import yaml

from dataflex_rl.audit import audit_study, render_markdown
from dataflex_rl.records import config_hash, package_versions, records_frame, summarise_items

REPO = Path(__file__).resolve().parents[1]
BENCHMARKS = ["basic_arithmetic", "syllogism", "molar_mass"]
DOMAINS = {"basic_arithmetic": "math", "syllogism": "logic", "molar_mass": "science"}


def study_config():
    config = yaml.safe_load((REPO / "config/smoke.yaml").read_text())
    config["study"] = "audited"
    config["corpus"]["sources"] = list(BENCHMARKS)
    config["benchmarks"]["names"] = list(BENCHMARKS)
    config["methods"] = {"baseline": {"policy": "baseline"},
                         "softmax": {"policy": "softmax", "control": "baseline"}}
    return config


ITEMS = pd.DataFrame({"prompt_id": ["a", "b"], "response": ["1", "2"], "length": [1, 1], "correct": [1, 0],
                      "parsed": [True, True]})


def _touch(path: Path, frame: pd.DataFrame | None = None) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    if frame is None:
        path.write_bytes(b"weights")
    else:
        frame.to_parquet(path, index=False)


def build_tree(root: Path, config: dict) -> dict:
    """untrained, baseline seeds 1-2 and softmax seed 1 complete; softmax seed 2 has only its weights. Records for
    the complete runs plus a method no longer in the matrix; baseline seed 2 was recorded under another config
    (more steps) and softmax seed 1 with another torch."""
    installed = package_versions()
    other_torch = json.dumps({**json.loads(installed), "torch": "0.0.1"}, separators=(",", ":"))
    changed = copy.deepcopy(config)
    changed["training"]["steps"] = 30
    runs = {("untrained", None): (config, installed), ("baseline", 1): (config, installed),
            ("baseline", 2): (changed, installed), ("softmax", 1): (config, other_torch),
            ("oldmethod", 1): (config, installed)}
    rows = []
    for (method, seed), (hashed, versions) in runs.items():
        run_dir = "untrained" if seed is None else f"{method}/seed{seed}"
        if seed is not None and method != "oldmethod":
            _touch(root / f"results/runs/tiny-qwen2/{run_dir}/weights.pt")
            _touch(root / f"results/runs/tiny-qwen2/{run_dir}/metrics.parquet", pd.DataFrame({"step": [1]}))
        for bench in BENCHMARKS:
            _touch(root / f"results/scores/tiny-qwen2/{run_dir}/{bench}.parquet", ITEMS)
            run_hash = config_hash(hashed, "tiny-qwen2", "baseline" if method == "oldmethod" else method)
            rows.append(summarise_items(ITEMS, model="tiny-qwen2", method=method, seed=seed, benchmark=bench,
                                        domain=DOMAINS[bench], steps=3 if seed else 0, config_hash=run_hash,
                                        package_versions=versions))
    _touch(root / "results/runs/tiny-qwen2/softmax/seed2/weights.pt")
    _touch(root / "results/records/records.parquet", records_frame(rows))
    return {"installed": installed, "changed_hash": config_hash(changed, "tiny-qwen2", "baseline")}


def check_report(report: dict, installed: str, changed_hash: str, config: dict) -> None:
    assert report["counts"] == {"complete": 4, "partial": 1, "missing": 0, "cells": 5, "stale": 2,
                                "unmatched_comparisons": 1}
    cells = {cell["run_id"]: cell for cell in report["cells"]}
    assert list(cells) == ["tiny-qwen2/untrained", "tiny-qwen2/baseline/seed1", "tiny-qwen2/baseline/seed2",
                           "tiny-qwen2/softmax/seed1", "tiny-qwen2/softmax/seed2"]
    partial = cells["tiny-qwen2/softmax/seed2"]
    assert partial["status"] == "partial"
    assert partial["missing"] == ["metrics"] + [f"score:{b}" for b in BENCHMARKS]
    assert partial["provenance"] is None and partial["unrecorded_benchmarks"] == BENCHMARKS
    assert report["comparisons"] == [{"model": "tiny-qwen2", "method": "softmax", "control": "baseline",
                                      "matched_seeds": [1], "method_only_seeds": [], "control_only_seeds": [2],
                                      "matched": False}]
    assert report["stale_runs"] == ["tiny-qwen2/baseline/seed2", "tiny-qwen2/softmax/seed1"]
    stale_config = cells["tiny-qwen2/baseline/seed2"]["provenance"]
    assert stale_config["stale"] == ["config"] and stale_config["recorded_config_hash"] == changed_hash
    assert stale_config["expected_config_hash"] == config_hash(config, "tiny-qwen2", "baseline")
    stale_packages = cells["tiny-qwen2/softmax/seed1"]["provenance"]
    assert stale_packages["stale"] == ["packages"]
    assert stale_packages["package_changes"] == {"torch": ["0.0.1", json.loads(installed)["torch"]]}
    fresh = cells["tiny-qwen2/baseline/seed1"]["provenance"]
    assert fresh["stale"] == [] and fresh["package_changes"] == {}
    assert report["records_not_in_matrix"] == ["tiny-qwen2/oldmethod/seed1"]


def test_audit_reports_cells_unmatched_seeds_and_stale_records(tmp_path):
    config = study_config()
    facts = build_tree(tmp_path, config)
    report = audit_study(config, tmp_path, installed=facts["installed"])
    check_report(report, facts["installed"], facts["changed_hash"], config)
    markdown = render_markdown(report)
    assert "5 cells (runs and untrained bases): 4 complete, 1 partial, 0 missing; 2 stale; 1 comparison(s)" in markdown
    assert "| tiny-qwen2 | softmax | baseline | 1 | — | 2 |" in markdown
    assert f"- tiny-qwen2/baseline/seed2: config_hash {facts['changed_hash']} ≠ current" in markdown
    assert f"- tiny-qwen2/softmax/seed1: packages torch 0.0.1 → {json.loads(facts['installed'])['torch']}" in markdown


def test_audit_of_an_empty_tree_lists_every_cell_as_missing(tmp_path):
    report = audit_study(study_config(), tmp_path)
    assert report["counts"] == {"complete": 0, "partial": 0, "missing": 5, "cells": 5, "stale": 0,
                                "unmatched_comparisons": 0}
    assert report["records_file"] is None and report["stale_runs"] == []


def test_snakemake_audit_target_writes_the_report_without_training(tmp_path):
    config = study_config()
    facts = build_tree(tmp_path, config)
    (tmp_path / "study.yaml").write_text(yaml.safe_dump(config))
    before = sorted(p.relative_to(tmp_path) for p in (tmp_path / "results").rglob("*"))
    for _ in range(2):  # a target without outputs: it runs again every time it is asked for
        result = subprocess.run(
            [sys.executable, "-m", "snakemake", "audit", "--cores", "1", "--snakefile", str(REPO / "Snakefile"),
             "--directory", str(tmp_path), "--configfile", str(tmp_path / "study.yaml")],
            capture_output=True, text=True, timeout=300)
        assert result.returncode == 0, result.stderr[-3000:]
        assert "audit        1" in result.stdout + result.stderr
    after = sorted(p.relative_to(tmp_path) for p in (tmp_path / "results").rglob("*"))
    assert sorted(set(after) - set(before)) == [Path("results/audit"), Path("results/audit/audit.json"),
                                                Path("results/audit/audit.md")]
    report = json.loads((tmp_path / "results/audit/audit.json").read_text())
    check_report(report, facts["installed"], facts["changed_hash"], config)
    assert (tmp_path / "results/audit/audit.md").read_text() == render_markdown(report)
