"""The audit reads a results tree and reports complete, partial and missing cells, unmatched seeds, stale artefacts
with the config keys that changed, damaged artefacts and stale records.

The tree is built by hand in tmp_path with real provenance records (dataflex_rl.artefacts.provenance) written for the
slices of the study (or of a changed one), real parquet score files and a records table built by records.records_frame;
the expected report is worked out from what was put there.
"""
import copy
import hashlib
import json
import subprocess
import sys
from pathlib import Path

import pandas as pd
import yaml

from dataflex_rl.artefacts import layout
from dataflex_rl.report.audit import audit_study, render_markdown
from dataflex_rl.artefacts.provenance import fingerprint, plain_input, write_provenance
from dataflex_rl.records.package_versions import package_versions
from dataflex_rl.records.run_records import records_frame, summarise_items
from dataflex_rl.report.outputs import table_paths
from dataflex_rl.study.resolved import Study

REPO = Path(__file__).resolve().parents[1]
BENCHMARKS = ["basic_arithmetic", "syllogism", "molar_mass"]
DOMAINS = {"basic_arithmetic": "math", "syllogism": "logic", "molar_mass": "science"}
MODEL = "tiny-qwen2"
WEIGHTS = "results/runs/tiny-qwen2/{run}/model/model.safetensors"
ITEMS = pd.DataFrame({"prompt_id": ["a", "b"], "response": ["1", "2"], "length": [1, 1], "correct": [1, 0],
                      "parsed": [True, True]})


def study_config():
    config = yaml.safe_load((REPO / "config/smoke.yaml").read_text())
    config["study"] = "audited"
    config["corpus"]["sources"] = list(BENCHMARKS)
    config["benchmarks"]["names"] = list(BENCHMARKS)
    config["methods"] = {"baseline": {"policy": "baseline"},
                         "softmax": {"policy": "softmax", "control": "baseline"}}
    return config


def _write(path: Path, data: bytes | pd.DataFrame) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(data) if isinstance(data, bytes) else data.to_parquet(path, index=False)
    return path


def run_path(run: str) -> str:
    """The `{run}` wildcard value of "untrained" or "{method}/seed{seed}" trained for the smoke study's 3 steps."""
    if run == layout.UNTRAINED:
        return run
    method, seed = run.split("/seed")
    return layout.run_name(method, int(seed), None, 3)


def _build_run(root: Path, study: Study, short: str, with_scores: bool = True) -> None:
    """A run's artefacts with provenance records of `study`'s slices (the study it was built under)."""
    run = run_path(short)
    if run == layout.UNTRAINED:
        base = root / layout.base_model(MODEL)
        _write(base / "config.json", b"{}")
        write_provenance(base / layout.PROVENANCE, study.base_slice(MODEL), [base])
    else:
        files = [_write(root / layout.run_model(MODEL, run) / "model.safetensors", b"weights").parent,
                 _write(root / layout.metrics(MODEL, run), pd.DataFrame({"step": [1]}))]
        write_provenance(root / layout.train_provenance(MODEL, run), study.train_slice(study.run(MODEL, run)), files)
    for bench in BENCHMARKS if with_scores else []:
        score = _write(root / layout.score(MODEL, run, bench), ITEMS)
        write_provenance(root / layout.score_provenance(MODEL, run, bench), study.score_slice(MODEL, run, bench),
                         [score])


def build_tree(root: Path, config: dict) -> dict:
    """untrained, baseline seeds 1-2 and softmax seed 1 complete; softmax seed 2 has only its weights, no record.
    baseline seed 2 was trained (and scored) at another learning rate; softmax seed 1's weights were damaged after
    its record was written, and its records come from another torch. Records also hold a method no longer in the
    matrix."""
    current = Study.from_config(config)
    changed_config = copy.deepcopy(config)
    changed_config["training"]["learning_rate"] = 0.01
    changed = Study.from_config(changed_config)
    for run, built_under in (("untrained", current), ("baseline/seed1", current), ("baseline/seed2", changed),
                             ("softmax/seed1", current)):
        _build_run(root, built_under, run)
    _write(root / WEIGHTS.format(run=run_path("softmax/seed1")), b"weigh")  # truncated after its record was written
    _write(root / WEIGHTS.format(run=run_path("softmax/seed2")), b"weights")
    installed = package_versions()
    other_torch = json.dumps({**json.loads(installed), "torch": "0.0.1"}, separators=(",", ":"))
    write_records(root, [("untrained", installed), ("baseline/seed1", installed), ("baseline/seed2", installed),
                         ("softmax/seed1", other_torch), ("oldmethod/seed1", installed)])
    return {"installed": installed, "current": current}


def write_records(root: Path, runs: list[tuple[str, str]], model: str = MODEL) -> None:
    """The records table of (run, package versions JSON) pairs, each row with the fingerprint of its score on disk,
    recorded under the cell name `model` (a campaign overlay records the same runs as "<model>@<campaign>")."""
    rows = []
    for run, versions in runs:
        key = layout.parse_run(run_path(run))
        for bench in BENCHMARKS:
            record = root / layout.score_provenance(MODEL, run_path(run), bench)
            recorded = json.loads(record.read_text())["fingerprint"] if record.exists() else "0" * 64
            rows.append(summarise_items(ITEMS, model=model, method=key.method, seed=key.seed, benchmark=bench,
                                        domain=DOMAINS[bench], steps=3 if key.seed else 0, fingerprint=recorded,
                                        package_versions=versions))
    _write(root / layout.RECORDS, records_frame(rows))


def check_report(report: dict, installed: str) -> None:
    assert report["counts"] == {"complete": 3, "partial": 2, "missing": 0, "cells": 5, "stale": 2, "damaged": 2,
                                "unmatched_comparisons": 1}
    cells = {cell["run_id"]: cell for cell in report["cells"]}
    assert list(cells) == [f"{MODEL}/untrained", f"{MODEL}/baseline/seed1", f"{MODEL}/baseline/seed2",
                           f"{MODEL}/softmax/seed1", f"{MODEL}/softmax/seed2"]
    partial = cells[f"{MODEL}/softmax/seed2"]
    assert partial["status"] == "partial" and partial["records"] is None
    assert partial["missing"] == [f"score:{b}" for b in BENCHMARKS] and partial["unrecorded_benchmarks"] == BENCHMARKS
    assert "no provenance record" in partial["damaged"][0]
    damaged = cells[f"{MODEL}/softmax/seed1"]
    assert damaged["status"] == "partial"
    (line,) = damaged["damaged"]
    assert f"{WEIGHTS.format(run=run_path('softmax/seed1'))}: sha256 " in line
    assert line.endswith("results/runs/tiny-qwen2/full/softmax/seed1/steps3/provenance.json (damaged or changed "
                         "after it was written)")
    assert damaged["stale"] == ["packages"]
    assert damaged["records"]["package_changes"] == {"torch": ["0.0.1", json.loads(installed)["torch"]]}
    stale = cells[f"{MODEL}/baseline/seed2"]
    assert stale["status"] == "complete" and stale["damaged"] == []
    assert stale["stale"] == ["score:basic_arithmetic", "score:molar_mass", "score:syllogism", "training", "records"]
    assert stale["changed_keys"] == {"training.learning_rate": [0.01, 1e-4]}
    assert report["comparisons"] == [{"model": MODEL, "method": "softmax", "control": "baseline",
                                      "matched_seeds": [], "method_only_seeds": [], "control_only_seeds": [1, 2],
                                      "matched": False}]
    assert report["stale_runs"] == [f"{MODEL}/baseline/seed2", f"{MODEL}/softmax/seed1"]
    fresh = cells[f"{MODEL}/baseline/seed1"]
    assert fresh["stale"] == [] and fresh["damaged"] == [] and fresh["records"]["fingerprint_mismatch"] == []
    assert report["records_not_in_matrix"] == [f"{MODEL}/oldmethod/seed1"]


def test_audit_reports_cells_unmatched_seeds_stale_and_damaged_artefacts(tmp_path):
    config = study_config()
    facts = build_tree(tmp_path, config)
    report = audit_study(facts["current"].expected_artefacts(), tmp_path, installed=facts["installed"])
    check_report(report, facts["installed"])
    markdown = render_markdown(report)
    assert "5 cells (runs and untrained bases): 3 complete, 2 partial, 0 missing; 2 stale; 2 damaged;" in markdown
    assert "| tiny-qwen2 | softmax | baseline | — | — | 1, 2 |" in markdown
    assert (f"- {MODEL}/baseline/seed2: training.learning_rate: 0.01 → 0.0001; built with other settings: "
            "score:basic_arithmetic, score:molar_mass, score:syllogism, training; records of basic_arithmetic, "
            "molar_mass, syllogism carry fingerprints other than the current study's") in markdown
    assert f"- {MODEL}/softmax/seed1: packages torch 0.0.1 → {json.loads(facts['installed'])['torch']}" in markdown


def test_records_whose_fingerprint_is_not_the_scores_are_stale(tmp_path):
    """A records row that does not carry its current score's fingerprint (e.g. a table built before a rescoring,
    or edited by hand) is named, with the benchmarks."""
    config = study_config()
    facts = build_tree(tmp_path, config)
    records = pd.read_parquet(tmp_path / layout.RECORDS)
    records.loc[(records["run_id"] == f"{MODEL}/baseline/seed1") & (records["benchmark"] == "syllogism"),
                "fingerprint"] = fingerprint({"tampered": True})
    records.to_parquet(tmp_path / layout.RECORDS, index=False)
    cell = next(c for c in audit_study(facts["current"].expected_artefacts(), tmp_path,
                                       installed=facts["installed"])["cells"]
                if c["run_id"] == f"{MODEL}/baseline/seed1")
    assert cell["stale"] == ["records"] and cell["records"]["fingerprint_mismatch"] == ["syllogism"]


def test_the_runtime_runs_were_trained_with_is_reported_by_value(tmp_path):
    """The provenance `runtime` (outside the fingerprint) of each cell's weights, trained or a built base, is in its
    cell, and the Markdown lists each value with its runs, naming those of the less common values."""
    config = study_config()
    facts = build_tree(tmp_path, config)
    for run, threads in (("untrained", 1), ("baseline/seed1", 1), ("baseline/seed2", 2), ("softmax/seed1", 1)):
        path = tmp_path / layout.scored_model_provenance(MODEL, run_path(run))
        path.write_text(json.dumps({**json.loads(path.read_text()), "runtime": {"threads": threads}}))
    report = audit_study(facts["current"].expected_artefacts(), tmp_path, installed=facts["installed"])
    cells = {cell["run_id"]: cell for cell in report["cells"]}
    assert cells[f"{MODEL}/baseline/seed2"]["runtime"] == {"threads": 2}
    assert cells[f"{MODEL}/untrained"]["runtime"] == {"threads": 1}
    assert cells[f"{MODEL}/softmax/seed2"]["runtime"] == {}
    assert report["counts"]["stale"] == 2  # the runtime is no setting: nothing more is stale
    assert (f"- threads: 1 (3 runs); 2 (1 run: {MODEL}/baseline/seed2)"
            in render_markdown(report).split("## Training runtime")[1])
def write_tables(root: Path, study: Study) -> None:
    """The study's tables as its tables job leaves them: a table file and the provenance record naming the settings
    and the records file it read."""
    table = _write(root / table_paths(layout.tables_dir(study.name))[0], b"method,score\n")
    write_provenance(root / layout.tables_provenance(study.name), study.tables_slice(), [table],
                     inputs={"records": plain_input(root / layout.RECORDS)})


def test_the_headline_says_first_when_records_or_tables_are_another_configs(tmp_path):
    """A campaign overlay run in the same folder rebuilds the shared records table for its own cells (here the same
    runs recorded as "tiny-qwen2@main", and one more) and, under the same study name, the tables: every cell of this
    study stays complete and current, so only the headline can say that what the records and tables show is not
    this study's results."""
    config = study_config()
    study = Study.from_config(config)
    runs = ["untrained", "baseline/seed1", "baseline/seed2", "softmax/seed1", "softmax/seed2"]
    for run in runs:
        _build_run(tmp_path, study, run)
    installed = package_versions()
    write_records(tmp_path, [(run, installed) for run in runs])
    write_tables(tmp_path, study)
    expected = study.expected_artefacts()
    report = audit_study(expected, tmp_path, installed=installed)
    assert report["counts"]["complete"] == 5 and report["counts"]["stale"] == 0
    assert report["built_elsewhere"] == {"records": None, "tables": None}
    assert "another config" not in render_markdown(report)

    write_records(tmp_path, [(run, installed) for run in runs + ["oldmethod/seed1"]], model=f"{MODEL}@main")
    report = audit_study(expected, tmp_path, installed=installed)
    assert report["counts"]["complete"] == 5 and report["counts"]["stale"] == 0  # what the counts alone said
    assert report["built_elsewhere"] == {
        "records": {"file": layout.RECORDS, "runs_outside_matrix": 6, "runs_covered": 0, "runs": 5},
        "tables": {"dir": "results/tables/audited",
                   "problems": ["built from other records than results/records/records.parquet holds now"]}}
    markdown = render_markdown(report)
    headline = markdown.index("**Built from another config — not this study's results.**")
    assert headline < markdown.index("5 cells (runs and untrained bases): 5 complete")
    assert ("- `results/records/records.parquet` was built from another config: it holds the records of 6 run(s) "
            "outside this study's matrix and covers 0 of its 5 runs.") in markdown

    overlay = copy.deepcopy(config)
    overlay.setdefault("stats", {})["confidence"] = 0.9
    write_tables(tmp_path, Study.from_config(overlay))  # the overlay's tables job, from the overlay's records
    assert audit_study(expected, tmp_path, installed=installed)["built_elsewhere"]["tables"]["problems"] == [
        "built with other settings: stats.confidence: 0.9 → 0.95",
        "built from the records in results/records/records.parquet, which are another config's"]

    (tmp_path / layout.tables_provenance("audited")).unlink()  # tables from before tables recorded provenance
    (problem,) = audit_study(expected, tmp_path, installed=installed)["built_elsewhere"]["tables"]["problems"]
    assert problem == ("no provenance record (results/tables/audited/provenance.json): which config and records "
                       "built them is unknown")


def snakemake_audit(root: Path, config: dict) -> dict:
    """`snakemake audit` on the tree under `root` with `config`; the JSON report it wrote."""
    (root / "study.yaml").write_text(yaml.safe_dump(config))
    result = subprocess.run(
        [sys.executable, "-m", "snakemake", "audit", "--cores", "1", "--snakefile", str(REPO / "Snakefile"),
         "--directory", str(root), "--configfile", str(root / "study.yaml")],
        capture_output=True, text=True, timeout=300)
    assert result.returncode == 0, result.stderr[-3000:]
    return json.loads((root / layout.AUDIT_JSON).read_text())


def test_audit_of_an_empty_tree_lists_every_cell_as_missing(tmp_path):
    report = audit_study(Study.from_config(study_config()).expected_artefacts(), tmp_path)
    assert report["counts"] == {"complete": 0, "partial": 0, "missing": 5, "cells": 5, "stale": 0, "damaged": 0,
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
    check_report(report, facts["installed"])
    assert (tmp_path / "results/audit/audit.md").read_text() == render_markdown(report)


def test_snakemake_audit_reports_an_unreadable_records_table_and_record_instead_of_crashing(tmp_path):
    """A truncated records table and a train record that is JSON but no provenance record: the audit replaces the
    previous report, names both files, and reports the cells without records."""
    config = study_config()
    build_tree(tmp_path, config)
    records = tmp_path / layout.RECORDS
    records.write_bytes(records.read_bytes()[: records.stat().st_size // 2])
    record = layout.train_provenance(MODEL, run_path("baseline/seed1"))
    (tmp_path / record).write_text('{"fingerprint": "0"}')
    _write(tmp_path / layout.AUDIT_MD, b"the previous report\n")
    report = snakemake_audit(tmp_path, config)
    (unreadable,) = report["unreadable"]
    assert unreadable.startswith(f"{layout.RECORDS}: ") and "magic bytes not found in footer" in unreadable
    assert unreadable.endswith("the next `snakemake` run rebuilds it")
    assert report["records_file"] is None
    assert all(cell["records"] is None and cell["recorded_benchmarks"] == 0 for cell in report["cells"])
    cell = next(c for c in report["cells"] if c["run_id"] == f"{MODEL}/baseline/seed1")
    assert cell["damaged"] == [f"{record}: not a provenance record (lacks settings, outputs); rerun the job that "
                               "wrote it"]
    markdown = (tmp_path / layout.AUDIT_MD).read_text()
    assert markdown == render_markdown(report)
    assert "Records: unreadable." in markdown and f"## Unreadable artefacts\n\n- {unreadable}\n" in markdown


def test_snakemake_audit_names_a_benchmark_scored_against_two_item_sets_and_the_runs_of_each(tmp_path, monkeypatch):
    """syllogism's items file was replaced after three cells were scored (an older mtime replans nothing) and two were
    rescored since: one study, one benchmark, two item sets. The audit's headline names the benchmark, each set's
    sha256 (hashlib, here) and its runs; the cells scored against items no longer on disk are stale, naming the file
    and both digests; so is the calibration that read the first items."""
    config = study_config()
    current = Study.from_config(config)
    runs = ["untrained", "baseline/seed1", "baseline/seed2", "softmax/seed1", "softmax/seed2"]
    for run in runs:
        _build_run(tmp_path, current, run)
    write_records(tmp_path, [(run, package_versions()) for run in runs])
    items = layout.benchmark_items("syllogism")
    monkeypatch.chdir(tmp_path)  # the jobs record paths as Snakemake passes them: relative to the working directory
    digests = {}
    for version, scored in ((b"first items", ["untrained", "baseline/seed1", "softmax/seed2"]),
                            (b"other items", ["baseline/seed2", "softmax/seed1"])):
        _write(tmp_path / items, version)
        digests[version] = hashlib.sha256(version).hexdigest()
        if version == b"first items":  # calibrated against the first items, as the scores of the first runs were
            _write(tmp_path / layout.calibration("syllogism"),
                   json.dumps({"inputs": {"items": plain_input(items)}}).encode())
        for run in scored:
            score = layout.score(MODEL, run_path(run), "syllogism")
            write_provenance(layout.score_provenance(MODEL, run_path(run), "syllogism"),
                             current.score_slice(MODEL, run_path(run), "syllogism"), [score],
                             inputs={"items": plain_input(items)})
    report = snakemake_audit(tmp_path, config)
    first, other = digests[b"first items"], digests[b"other items"]
    old_runs = [f"{MODEL}/untrained", f"{MODEL}/baseline/seed1", f"{MODEL}/softmax/seed2"]
    new_runs = [f"{MODEL}/baseline/seed2", f"{MODEL}/softmax/seed1"]
    assert report["item_sets"] == [{"benchmark": "syllogism", "path": items, "sets": [
        {"sha256": first, "runs": old_runs, "on_disk": False},
        {"sha256": other, "runs": new_runs, "on_disk": True}]}]
    assert report["stale_runs"] == [f"{MODEL}/untrained", f"{MODEL}/baseline/seed1", f"{MODEL}/softmax/seed2"]
    cells = {cell["run_id"]: cell for cell in report["cells"]}
    assert cells[f"{MODEL}/untrained"]["changed_inputs"] == [
        {"kind": "score:syllogism", "role": "items", "path": items, "recorded": first, "now": other}]
    assert all(cells[run]["changed_inputs"] == [] and cells[run]["stale"] == [] for run in new_runs)
    assert report["inputs_changed_since_read"] == [{"reader": layout.calibration("syllogism"), "role": "items",
                                                    "path": items, "recorded": first, "now": other}]
    markdown = (tmp_path / layout.AUDIT_MD).read_text()
    assert markdown == render_markdown(report)
    assert (f"## Inputs changed since they were read (reports and tables)\n\n- {layout.calibration('syllogism')} read "
            f"items `{items}` as sha256 {first[:12]}…, which holds {other[:12]}… now\n") in markdown
    headline = markdown.split(f"{report['counts']['cells']} cells (runs and untrained bases)")[0]
    assert "**Scored against different items — these runs are not comparable on these benchmarks.**" in headline
    assert (f"- `syllogism` scored against 2 item sets — sha256 {first[:12]}…: {', '.join(old_runs)}; "
            f"sha256 {other[:12]}… (the items in `{items}` now): {', '.join(new_runs)}\n") in headline
    assert (f"- {MODEL}/untrained: score:syllogism read items `{items}` as sha256 {first[:12]}…, which holds "
            f"{other[:12]}… now\n") in markdown
