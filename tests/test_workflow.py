"""The Snakemake DAG itself: the paper matrix dry run, config refusal, and one small real end-to-end run."""
import copy
import hashlib
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from importlib import metadata
from pathlib import Path

import pandas as pd
import pytest
import yaml

from dataflex_rl.artefacts import layout
from dataflex_rl.study.plan import planned_jobs
from dataflex_rl.artefacts.atomic import write_parquet
from dataflex_rl.artefacts.provenance import fingerprint, inputs_metadata, parquet_inputs
from dataflex_rl.study.resolved import Study
from dataflex_rl.corpus.build import benchmark_items

from config_edits import set_key
import forked_snakemake

REPO = Path(__file__).resolve().parents[1]
SNAKEFILE = ["--snakefile", str(REPO / "Snakefile")]
SNAKEMAKE = [sys.executable, "-m", "snakemake", *SNAKEFILE]


def snakemake(*args, cwd=REPO, check=True):
    result = forked_snakemake.snakemake([*SNAKEFILE, *args], cwd=cwd)
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
    # the dry-run summary's job plan (dataflex_rl.study.plan) is the one Snakemake makes
    study = Study.from_config(yaml.safe_load((REPO / "config/paper.yaml").read_text()))
    assert {rule: n for rule, n in planned_jobs(study).items() if n} == {
        rule: n for rule, n in counts.items() if rule not in ("all", "total")}
    # the hours the jobs request (dataflex_rl.study.allocation), by hand: train 156 jobs × 8 GPUs × 2880 min / 60 =
    # 59,904 GPU-h and × 40 CPUs = 299,520 CPU-h; score 1884 × 1 GPU × 2 h = 3,768 GPU-h and × 8 CPUs = 30,144 CPU-h;
    # merge 156 × 8 CPUs × 1 h = 1,248; the CPU rules 1 h each at 2 CPUs (decontaminate 8): corpus 2, benchmark_items
    # 24, quarantine_gate 26, calibrate 24, decontaminate 8, parse_gate, records, tables, training_curves 4 × 2: 92
    assert re.search(r"^    train +156 .* 2880 +59,904\.0 +299,520\.0  gpu$", result.stderr, re.MULTILINE)
    assert ("not a measurement): 63,672.0 GPU-hours, 331,004.0 CPU-hours\n" in result.stderr)
    assert ("  score layout (evaluation.job_per_benchmark; one model load per job; 120 min of score runtime per "
            "benchmark):") in result.stderr
    assert ("    true (this study):    1884 jobs = 1884 model loads, a run's 12 benchmarks side by side, 1 GPU each "
            "(120 min): 3,768.0 GPU-h, 30,144.0 CPU-h\n"
            "    false:                 157 jobs = 157 model loads, a run's 12 benchmarks in turn on 1 GPU (1440 min): "
            "3,768.0 GPU-h, 30,144.0 CPU-h") in result.stderr


# Bad configs: tests/test_bad_configs.py (each refusal through the real `snakemake -n`).


def test_the_workflow_passes_snakemakes_lint_and_snakefmt():
    lint = snakemake("--lint")
    assert "Congratulations, your workflow is in a good condition!" in lint.stdout + lint.stderr
    files = [str(REPO / "Snakefile"), *map(str, sorted((REPO / "rules").glob("*.smk")))]
    formatted = subprocess.run([sys.executable, "-m", "snakefmt", "--check", *files], capture_output=True, text=True)
    assert formatted.returncode == 0, formatted.stderr[-3000:]


SMOKE = yaml.safe_load((REPO / "config/smoke.yaml").read_text())
SMOKE_BENCHMARKS = SMOKE["benchmarks"]["names"]


def smoke_run(method: str, seed: int | None) -> str:
    """The `{run}` wildcard value of a smoke run (full data, the smoke study's step budget)."""
    return layout.run_name(method, seed, None, SMOKE["training"]["steps"] if seed is not None else None)

AFTER_TRAIN = {"records": 1, "tables": 1, "training_curves": 1, "all": 1}  # downstream of retrained runs
AFTER_BASE = {"base_model": 1, "train": 8, "score": 9, "parse_gate": 1, **AFTER_TRAIN}  # downstream of a new base
# What a change of one setting replans on the finished smoke study (4 methods × 2 seeds, 12 benchmarks, one scoring
# job per run): the README's table. Result-neutral settings replan nothing.
REPLANNED = {
    **{f"training.{key}": value for key, value in (
        ("steps", 4), ("prompts_per_step", 5), ("rollouts", 4), ("max_new_tokens", 5), ("learning_rate", 3e-4),
        ("kl_coef", 0.01), ("kl_kind", "k1"), ("clip_low", 0.3), ("clip_high", 0.3), ("temperature", 0.9),
        ("grad_clip", 0.5), ("loss_aggregation", "token-mean"))},
    "methods.difffilter.params.low": 0.15,
    "prompt_template": "Q: {question}\nAnswer:",
    "evaluation.max_new_tokens": 5, "evaluation.batch_size": 7, "evaluation.min_parse_rate": 0.1,
    "evaluation.seed": 5, "decontamination.threshold": 0.7, "corpus.items_per_domain": 50, "corpus.seed": 2,
    "models.tiny-qwen2.shape.hidden_size": 48, "models.tiny-qwen2.warmup.steps": 4, "benchmarks.items": 9,
    "benchmarks.seed": 1001, "stats.confidence": 0.9, "stats.curve_window": 3, "training.checkpoint_every": 1,
    "calibration.min_base_parse_rate": 0.01,
    "data_validation.corpus.max_prompt_tokens": 500, "data_validation.corpus.max_answer_tokens": 500,
    "data_validation.benchmarks.max_prompt_tokens": 500, "data_validation.benchmarks.max_answer_tokens": 500,
    "data_validation.corpus.max_answer_chars": 1999,
    "benchmarks.names": SMOKE["benchmarks"]["names"][::-1],
    "data_validation.corpus.max_quarantine_fraction": 0.2, "data_validation.benchmarks.max_quarantine_fraction": 0.1,
    "evaluation.job_per_benchmark": True, "benchmarks.hub_fallback": True,
    # a model's own lengths (models.<m>.training / evaluation): as the study's, for that model's jobs
    "models.tiny-qwen2.training.max_new_tokens": 5, "models.tiny-qwen2.evaluation.max_new_tokens": 5,
}
# The same settings written another way: a reordered seed list, and an integer where a float is declared (YAML reads
# `1` as an int, `1.0` as a float; the slices hold the float either way)
REWRITTEN = {"seeds in reverse order": ("seeds", SMOKE["seeds"][::-1]),
             "training.temperature written 1": ("training.temperature", 1),
             "methods.softmax.params.temperature written 1": ("methods.softmax.params.temperature", 1),
             "the model's own lengths written as the study's": ("models.tiny-qwen2",
                                                                {**SMOKE["models"]["tiny-qwen2"],
                                                                 "training": {"max_new_tokens": SMOKE["training"][
                                                                     "max_new_tokens"]},
                                                                 "evaluation": {"max_new_tokens": SMOKE["evaluation"][
                                                                     "max_new_tokens"]}})}
EXPECTED = {
    **{f"training.{key}": {"train": 8, "score": 8, **AFTER_TRAIN} for key in (
        "steps", "prompts_per_step", "rollouts", "max_new_tokens", "learning_rate", "kl_coef", "kl_kind",
        "clip_low", "clip_high", "temperature", "grad_clip", "loss_aggregation")},
    "methods.difffilter.params.low": {"train": 2, "score": 2, **AFTER_TRAIN},
    "methods.softmax.policy": {"train": 2, "score": 2, **AFTER_TRAIN},
    "prompt_template": AFTER_BASE,
    "evaluation.max_new_tokens": {"score": 9, "parse_gate": 1, "records": 1, "tables": 1, "all": 1},
    "models.tiny-qwen2.training.max_new_tokens": {"train": 8, "score": 8, **AFTER_TRAIN},
    "models.tiny-qwen2.evaluation.max_new_tokens": {"score": 9, "parse_gate": 1, "records": 1, "tables": 1, "all": 1},
    "evaluation.batch_size": {"score": 9, "parse_gate": 1, "records": 1, "tables": 1, "all": 1},
    "evaluation.min_parse_rate": {"records": 1, "tables": 1, "all": 1},
    "evaluation.seed": {},  # greedy decoding draws nothing
    "benchmarks.names": {},  # the same benchmarks in another order: the same corpus, scores and tables
    "decontamination.threshold": {"decontaminate": 1, **AFTER_BASE},
    "corpus.items_per_domain": {"corpus": 1, "quarantine_gate": 1, "decontaminate": 1, **AFTER_BASE},
    "corpus.seed": {"corpus": 1, "quarantine_gate": 1, "decontaminate": 1, **AFTER_BASE},
    "models.tiny-qwen2.shape.hidden_size": AFTER_BASE,
    "models.tiny-qwen2.warmup.steps": AFTER_BASE,
    **{key: {"benchmark_items": 12, "quarantine_gate": 12, "calibrate": 12, "decontaminate": 1, **AFTER_BASE}
       for key in ("benchmarks.items", "benchmarks.seed")},
    "seeds": {"train": 4, "score": 4, **AFTER_TRAIN},
    "stats.confidence": {"tables": 1, "all": 1},
    "stats.curve_window": {"training_curves": 1, "all": 1},
    "training.checkpoint_every": {},  # a resumed run is bit-identical
    "calibration.min_base_parse_rate": {"parse_gate": 1, "all": 1},  # a gate: it reruns, nothing downstream does
    # token caps are gates checked by the jobs that tokenize (texts within them pass unchanged): nothing reruns; a
    # character cap quarantines rows when the corpus is built
    **{f"data_validation.{section}.{cap}": {} for section in ("corpus", "benchmarks")
       for cap in ("max_prompt_tokens", "max_answer_tokens")},
    "data_validation.corpus.max_answer_chars": {"corpus": 1, "quarantine_gate": 1, "decontaminate": 1, **AFTER_BASE},
    # gates too: the data come out the same, so only the quarantine gates rerun
    "data_validation.corpus.max_quarantine_fraction": {"quarantine_gate": 1, "all": 1},
    "data_validation.benchmarks.max_quarantine_fraction": {"quarantine_gate": 12, "all": 1},
    "evaluation.job_per_benchmark": {},  # a job layout: both write the same scores (test_gate_and_layout_replans.py)
    "benchmarks.hub_fallback": {},  # the smoke benchmarks are generated: there is nothing to read from the hub
    **{key: {} for key in REWRITTEN},
    # two changes in one edit: a rerun gate must not hide the other change from Snakemake's rerun checks
    "calibration.min_base_parse_rate+evaluation.batch_size": {"score": 9, "parse_gate": 1, "records": 1, "tables": 1,
                                                              "all": 1},
}


def changed_config(key: str) -> dict:
    """The smoke config with one setting changed (or several, joined by '+'); a policy change takes the new policy's
    default parameters, `seeds` gains a third seed, and a REWRITTEN entry writes a setting another way."""
    config = copy.deepcopy(SMOKE)
    for part in key.split("+"):
        if part == "methods.softmax.policy":
            config["methods"]["softmax"] = {"policy": "ar", "control": "baseline"}
        elif part == "seeds":
            config["seeds"] = [1, 2, 3]
        elif part in REWRITTEN:
            set_key(config, *REWRITTEN[part])
        else:
            set_key(config, part, REPLANNED[part])
    return config


def planned(config: dict, workdir: Path, name: str) -> dict[str, int]:
    path = workdir / f"{name}.yaml"
    path.write_text(yaml.safe_dump(config))
    result = snakemake("-n", "--nolock", "--configfile", str(path), "--directory", str(workdir))
    output = result.stdout + result.stderr
    return {} if "Nothing to be done" in output else {k: v for k, v in job_counts(output).items() if k != "total"}


@pytest.mark.slow
def test_smoke_study_runs_end_to_end(smoke_tree):
    records = pd.read_parquet(smoke_tree / "results/records/records.parquet")
    assert len(records) == (4 * 2 + 1) * 12  # (methods × seeds + untrained) × benchmarks
    assert records["n"].eq(8).all()
    tables = smoke_tree / "results/tables/smoke"
    headroom = pd.read_csv(tables / "headroom.csv")
    assert headroom.loc[0, "n_seeds"] == 2
    comparisons = pd.read_csv(tables / "comparisons.csv")
    assert sorted(comparisons.loc[comparisons["metric"] == "DB-12", "method"]) == ["difffilter", "softmax", "static"]
    assert (tables / "figures/forest_DB.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert (tables / "figures/training_curves.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    study = Study.from_config(SMOKE)
    for row in records.itertuples():  # each row carries the fingerprint its score was built with
        run = smoke_run(row.method, None if pd.isna(row.seed) else row.seed)
        record = json.loads((smoke_tree / layout.score_provenance(row.model, run, row.benchmark)).read_text())
        assert row.fingerprint == record["fingerprint"] == fingerprint(study.score_slice(row.model, run,
                                                                                         row.benchmark))
    assert json.loads(records.loc[0, "package_versions"])["dataflex-rl"] == metadata.version("dataflex-rl")
    metrics = pd.read_parquet(smoke_tree / layout.metrics("tiny-qwen2", smoke_run("static", 1)))
    assert len(metrics) == 3 and {"p:math", "kept_fraction"} <= set(metrics.columns)
    # the smoke study trains: each run's weights differ from the untrained base's and from every other run's
    runs = [smoke_run(method, seed) for method in SMOKE["methods"] for seed in SMOKE["seeds"]]
    digests = {run: _sha256(smoke_tree / layout.run_model("tiny-qwen2", run) / "model.safetensors") for run in runs}
    base = _sha256(smoke_tree / layout.base_model("tiny-qwen2") / "model.safetensors")
    assert len(runs) == 4 * 2 and len({base, *digests.values()}) == 1 + len(runs), (base, digests)
    assert planned(SMOKE, smoke_tree, "unchanged") == {}

    report = snakemake("--report", "report.html", "--configfile", str(REPO / "config/smoke.yaml"), "--directory",
                       str(smoke_tree))
    html = (smoke_tree / "report.html").read_text()
    assert "forest_DB.png" in html and "training_curves.png" in html and "comparisons.csv" in html, report.stderr


def _sha256(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


@pytest.mark.slow
def test_every_artefact_a_job_read_is_recorded_by_its_sha256(smoke_tree):
    """Each job that reads another job's artefact recorded its sha256 (dataflex_rl.artefacts.provenance, `inputs`):
    equal to hashlib.sha256 of the file's bytes, for every file input (a model directory is checked through its own
    record)."""
    results = smoke_tree / "results"
    recorded = {path.relative_to(smoke_tree).as_posix(): json.loads(path.read_text())["inputs"]
                for path in [*results.rglob("provenance.json"), *results.glob("scores/**/*.provenance.json"),
                             *results.glob("calibration/**/*.json"), results / "corpus/decontamination.json"]}
    recorded[layout.RECORDS] = parquet_inputs(smoke_tree / layout.RECORDS)
    roles = {reader: sorted(inputs) for reader, inputs in recorded.items()}
    assert roles[layout.DECONTAMINATION_AUDIT] == sorted(["corpus", *(f"items:{b}" for b in SMOKE_BENCHMARKS)])
    assert all(roles[layout.calibration(b)] == ["items"] for b in SMOKE_BENCHMARKS)
    assert roles[layout.parse_gate("tiny-qwen2")] == sorted(f"score:{b}" for b in SMOKE_BENCHMARKS)
    assert roles[layout.train_provenance("tiny-qwen2", smoke_run("baseline", 1))] == ["base", "corpus"]
    assert roles[layout.score_provenance("tiny-qwen2", smoke_run("baseline", 1), "gcd")] == ["items", "model"]
    assert len(roles[layout.RECORDS]) == (4 * 2 + 1) * 12
    assert roles[layout.tables_provenance("smoke")] == ["records"]
    files = [(reader, entry) for reader, inputs in recorded.items() for entry in inputs.values()
             if (smoke_tree / entry["path"]).is_file()]
    # decontamination, calibrations, gate, train records, score records, records table, base model, tables
    assert len(files) == 13 + 12 + 12 + 8 + 9 * 12 + 9 * 12 + 1 + 1
    for reader, entry in files:
        assert entry["sha256"] == _sha256(smoke_tree / entry["path"]), (reader, entry["path"])


@pytest.mark.slow
def test_a_changed_setting_replans_exactly_the_jobs_it_changes(smoke_tree):
    with ThreadPoolExecutor(max_workers=2) as pool:
        got = dict(zip(EXPECTED, pool.map(lambda key: planned(changed_config(key), smoke_tree, key), EXPECTED)))
    assert got == EXPECTED


@pytest.mark.slow
def test_an_edit_of_the_workflows_code_alone_replans_nothing(smoke_tree, tmp_path):
    """A release that edits a workflow script without changing a setting (an import moved, a comment) replans nothing
    on a finished study: every setting travels in params, and the workflow's profile (profiles/default) leaves out
    Snakemake's `code` trigger, under which this same edit replans every training of the study."""
    workflow = tmp_path / "workflow"
    workflow.mkdir()
    shutil.copy(REPO / "Snakefile", workflow)
    for folder in ("rules", "workflow_scripts", "envs", "profiles", "config"):
        shutil.copytree(REPO / folder, workflow / folder)
    script = workflow / "workflow_scripts/train.py"
    script.write_text("# moved imports: no setting changed\n" + script.read_text())
    dry = ["-m", "snakemake", "-n", "--nolock", "--snakefile", str(workflow / "Snakefile"), "--configfile",
           str(REPO / "config/smoke.yaml"), "--directory", str(smoke_tree)]
    unchanged = subprocess.run([sys.executable, *dry], capture_output=True, text=True)
    assert "Nothing to be done" in unchanged.stdout + unchanged.stderr, unchanged.stderr[-3000:]
    with_code = subprocess.run([sys.executable, *dry, "--rerun-triggers", "mtime", "params", "software-env", "code"],
                               capture_output=True, text=True)
    assert job_counts(with_code.stdout + with_code.stderr)["train"] == 8, with_code.stderr[-3000:]


def _truncated(path: Path, keep: bytes) -> None:
    """`path` cut to half of `keep` (its bytes), its mtime newer: a copy or a restore that stopped half-way."""
    path.write_bytes(keep[: len(keep) // 2])


@pytest.mark.slow
def test_a_damaged_records_table_or_train_record_is_found_while_planning_and_rebuilt(smoke_tree):
    """A truncated records table replans the records job (forced) before anything is deleted, and a plain rerun
    heals it: records and tables byte-identical. A truncated train record replans its run's training (which resumes
    from its final checkpoint) instead of letting the score job delete 12 valid scores and then refuse."""
    smoke = ["--configfile", str(REPO / "config/smoke.yaml"), "--directory", str(smoke_tree)]
    tables = {path: path.read_bytes() for path in (smoke_tree / "results/tables/smoke").rglob("*") if path.is_file()}
    records = smoke_tree / layout.RECORDS
    records_bytes = records.read_bytes()
    _truncated(records, records_bytes)
    dry = snakemake("-n", *smoke)
    assert job_counts(dry.stdout + dry.stderr) == {"records": 1, "tables": 1, "all": 1, "total": 3}
    assert f"damaged: {layout.RECORDS}: unreadable parquet (Parquet magic bytes not found in footer" in dry.stderr
    assert "its job is planned again to rebuild it" in dry.stderr and "reason: Forced execution" in dry.stdout
    snakemake("--cores", "2", "--quiet", *smoke)
    assert records.read_bytes() == records_bytes
    assert {path: path.read_bytes() for path in tables} == tables

    record = smoke_tree / layout.train_provenance("tiny-qwen2", smoke_run("baseline", 1))
    record_bytes, stat = record.read_bytes(), record.stat()
    _truncated(record, record_bytes)
    dry = snakemake("-n", *smoke)
    assert job_counts(dry.stdout + dry.stderr) == {"train": 1, "score": 1, "training_curves": 1, "records": 1,
                                                   "tables": 1, "all": 1, "total": 6}
    assert f"damaged: {record.relative_to(smoke_tree)}: unreadable provenance record (" in dry.stderr
    record.write_bytes(record_bytes)  # restored as it was: nothing was deleted, nothing is left to do
    os.utime(record, ns=(stat.st_atime_ns, stat.st_mtime_ns))
    assert planned(SMOKE, smoke_tree, "restored") == {}


@pytest.mark.slow
def test_damaged_benchmark_items_are_rebuilt_alone_and_the_jobs_that_read_them_kept(smoke_tree):
    """A truncated benchmark items file was not replanned (issue 36, item 8): every rerun failed at decontaminate and
    calibrate on a raw pyarrow error, after Snakemake had deleted the clean corpus and the calibration report. Its job
    is now forced while the DAG is built, alone: its readers take it as ancient, and a plain rerun brings it back byte
    for byte without touching them."""
    smoke = ["--configfile", str(REPO / "config/smoke.yaml"), "--directory", str(smoke_tree)]
    items = smoke_tree / layout.benchmark_items("chain_sum")
    items_bytes = items.read_bytes()
    readers = [smoke_tree / path for path in (layout.CORPUS_CLEAN, layout.DECONTAMINATION_AUDIT,
                                              layout.calibration("chain_sum"), layout.score("tiny-qwen2", "untrained",
                                                                                            "chain_sum"))]
    stamps = {path: path.stat().st_mtime_ns for path in readers}
    _truncated(items, items_bytes)
    dry = snakemake("-n", *smoke)
    assert job_counts(dry.stdout + dry.stderr) == {"benchmark_items": 1, "quarantine_gate": 1, "all": 1, "total": 3}
    assert (f"damaged: {layout.benchmark_items('chain_sum')}: unreadable parquet (Parquet magic bytes not found in "
            "footer") in dry.stderr
    assert "its job is planned again to rebuild it alone: the jobs that read it are not rerun for it" in dry.stderr
    snakemake("--cores", "2", "--quiet", *smoke)
    assert items.read_bytes() == items_bytes
    assert {path: path.stat().st_mtime_ns for path in readers} == stamps
    assert planned(SMOKE, smoke_tree, "items rebuilt") == {}


@pytest.mark.slow
def test_a_killed_base_is_built_again_and_a_base_rebuilt_byte_for_byte_retrains_nothing(smoke_tree):
    """Issue 36, item 8. A base_model job killed while it rebuilds the base leaves no partial directory (it is written
    in `.<model>.tmp` and renamed whole), but the base gone — Snakemake deletes a job's outputs before it runs — and
    the study said "Nothing to be done": a deleted intermediate is not rebuilt while what was built from it exists.
    The base is now a target; the dry run says how to rebuild it alone; rebuilt so, its bytes are those the runs
    read, and nothing retrains (before: every train job and the untrained base's scoring, for the directory's mtime)."""
    smoke = ["--configfile", str(REPO / "config/smoke.yaml"), "--directory", str(smoke_tree)]
    base = smoke_tree / layout.base_model("tiny-qwen2")
    digests = {path.name: _sha256(path) for path in base.iterdir() if path.is_file()}
    rebuild = subprocess.Popen([*SNAKEMAKE, layout.base_model("tiny-qwen2"), "-f", "--cores", "2", *smoke],
                               stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True)
    partial = base.with_name(f".{base.name}.tmp")
    while not partial.is_dir() and rebuild.poll() is None:
        time.sleep(0.05)
    os.killpg(rebuild.pid, signal.SIGKILL)
    rebuild.wait()
    assert partial.is_dir() and not base.exists()
    snakemake("--unlock", *smoke)
    dry = snakemake("-n", *smoke)
    assert job_counts(dry.stdout + dry.stderr)["base_model"] == 1
    assert (f"{layout.base_model('tiny-qwen2')}: missing, though finished jobs read it (e.g. results/runs/"
            in dry.stderr)
    assert f"rebuild it alone first, `snakemake --cores N {layout.base_model('tiny-qwen2')}`" in dry.stderr
    snakemake(layout.base_model("tiny-qwen2"), "--cores", "2", "--quiet", *smoke)
    assert {path.name: _sha256(path) for path in base.iterdir() if path.is_file()} == digests
    assert not partial.exists() and planned(SMOKE, smoke_tree, "base rebuilt") == {}


@pytest.mark.slow
def test_records_from_another_study_and_a_lost_tables_record_are_rebuilt_as_the_audit_advises(smoke_tree):
    """Issue 36, items 8 and 12. Records copied from another study (one of seed 1 alone, with a newer mtime) were named
    by the audit, but the rerun it advises planned only the tables, from those records; a deleted tables provenance
    record was never written again, and the audit called the tables another config's. The advised command now
    rebuilds both, byte for byte, and the audit finds nothing built elsewhere."""
    smoke = ["--configfile", str(REPO / "config/smoke.yaml"), "--directory", str(smoke_tree)]
    records = smoke_tree / layout.RECORDS
    records_bytes = records.read_bytes()
    tables = {path: path.read_bytes() for path in (smoke_tree / layout.tables_dir("smoke")).rglob("*")
              if path.is_file()}
    rows, inputs = pd.read_parquet(records), parquet_inputs(records)
    write_parquet(records, rows[~rows["run_id"].str.endswith("seed2")].reset_index(drop=True),
                  metadata=inputs_metadata({key: entry for key, entry in inputs.items() if "seed2" not in key}))
    (smoke_tree / layout.tables_provenance("smoke")).unlink()
    snakemake("audit", "--cores", "1", *smoke)
    elsewhere = json.loads((smoke_tree / layout.AUDIT_JSON).read_text())["built_elsewhere"]
    assert elsewhere["records"]["runs_covered"] == 5 and elsewhere["tables"] is not None
    assert "(`snakemake --cores N --configfile <this config>`)" in (smoke_tree / layout.AUDIT_MD).read_text()
    dry = snakemake("-n", *smoke)
    assert job_counts(dry.stdout + dry.stderr) == {"records": 1, "tables": 1, "all": 1, "total": 3}
    assert (f"damaged: {layout.RECORDS}: built from other scores than this config's records job reads (of its 60 "
            "score files, 0 are not this study's and 0 hold other bytes than their records name now; 48 of this "
            "study's 108 are not in it)") in dry.stderr
    snakemake("--cores", "2", "--quiet", *smoke)
    assert records.read_bytes() == records_bytes
    assert {path: path.read_bytes() for path in tables} == tables
    snakemake("audit", "--cores", "1", *smoke)
    assert json.loads((smoke_tree / layout.AUDIT_JSON).read_text())["built_elsewhere"] == {"records": None,
                                                                                           "tables": None}


@pytest.mark.slow
def test_a_changed_setting_retrains_and_the_audit_names_what_predates_it(smoke_tree):
    """The defect of a rerun that kept old weights under a new config: a learning-rate change now replans every
    training; forcing one run retrains it afresh (its resumable state is keyed by its settings); with the rest not
    retrained, the audit names each stale run and the key that changed; a damaged weights file is found, named, and
    refused by the job that would use it."""
    config = changed_config("training.learning_rate")
    lr = smoke_tree / "lr.yaml"
    lr.write_text(yaml.safe_dump(config))
    run = smoke_run("softmax", 1)
    forced = snakemake("--cores", "2", "--configfile", str(lr), "--directory", str(smoke_tree), "-f",
                       layout.run_model("tiny-qwen2", run), "--allowed-rules", "train")
    assert "resuming" not in (smoke_tree / f"logs/train/tiny-qwen2/{run}.log").read_text()
    # the old state is kept, not used (beside the train job's lock file)
    states = [path for path in (smoke_tree / layout.train_state("tiny-qwen2", run)).iterdir() if path.is_dir()]
    assert len(states) == 2
    assert job_counts(forced.stdout + forced.stderr)["train"] == 1

    snakemake("audit", "--cores", "1", "--configfile", str(lr), "--directory", str(smoke_tree))
    report = json.loads((smoke_tree / "results/audit/audit.json").read_text())
    stale = {cell["run_id"]: cell for cell in report["cells"] if cell["stale"]}
    assert sorted(stale) == sorted(f"tiny-qwen2/{m}/seed{s}" for m in SMOKE["methods"] for s in (1, 2))
    for run_id, cell in stale.items():
        assert cell["changed_keys"] == {"training.learning_rate": [0.0001, 0.0003]}, run_id
        # the forced run is retrained, not yet rescored
        assert ("training" in cell["stale"]) == (run_id != "tiny-qwen2/softmax/seed1")
    markdown = (smoke_tree / "results/audit/audit.md").read_text()
    assert "- tiny-qwen2/baseline/seed1: training.learning_rate: 0.0001 → 0.0003" in markdown

    weights = smoke_tree / layout.run_model("tiny-qwen2", smoke_run("baseline", 2)) / "model.safetensors"
    stat = weights.stat()
    with open(weights, "r+b") as handle:
        handle.truncate(stat.st_size // 2)
    os.utime(weights, ns=(stat.st_atime_ns, stat.st_mtime_ns))  # nothing but the bytes tells
    snakemake("audit", "--cores", "1", "--configfile", str(REPO / "config/smoke.yaml"), "--directory",
              str(smoke_tree))
    report = json.loads((smoke_tree / "results/audit/audit.json").read_text())
    assert report["damaged_runs"] == ["tiny-qwen2/baseline/seed2"]
    rescore = snakemake("--cores", "1", "--configfile", str(REPO / "config/smoke.yaml"), "--directory",
                        str(smoke_tree), "-f", layout.score("tiny-qwen2", smoke_run("baseline", 2), "gcd"), check=False)
    assert rescore.returncode != 0
    log = (smoke_tree / f"logs/scores/tiny-qwen2/{smoke_run('baseline', 2)}/all.log").read_text()
    assert "DamagedArtefactError: damaged input artefact:" in log
    assert f"{weights.relative_to(smoke_tree)}: sha256" in log


@pytest.mark.slow
def test_a_touched_model_trained_with_other_settings_is_refused_by_its_score_job(smoke_study_copy):
    """`snakemake --touch` after a learning-rate change marks the old weights current; the rescore their stale scores
    plan refuses them, naming the run's record and the key (recorded vs expected), instead of writing a score whose
    provenance claims the new rate."""
    lr = smoke_study_copy / "lr.yaml"
    lr.write_text(yaml.safe_dump(changed_config("training.learning_rate")))
    on_lr = ["--configfile", str(lr), "--directory", str(smoke_study_copy)]
    snakemake("--touch", "--cores", "1", *on_lr)
    run = smoke_run("baseline", 1)
    rescore = snakemake(layout.score("tiny-qwen2", run, "gcd"), "--cores", "1", *on_lr, check=False)
    assert rescore.returncode != 0
    assert job_counts(rescore.stdout + rescore.stderr).get("train") is None  # the touch hid the retraining
    log = (smoke_study_copy / f"logs/scores/tiny-qwen2/{run}/all.log").read_text()
    record = layout.train_provenance("tiny-qwen2", run)
    assert f"StaleArtefactError: {record}: the model was built with other settings than this job's slice" in log
    assert "training.learning_rate: recorded 0.0001, expected 0.0003" in log
    assert f"snakemake -R {record}" in log
    scored = [smoke_study_copy / layout.score_provenance("tiny-qwen2", run, b) for b in SMOKE_BENCHMARKS]
    assert all(json.loads(path.read_text())["settings"]["training.learning_rate"] == 0.0001
               for path in scored if path.exists())  # no score claims the new rate


@pytest.mark.slow
def test_items_replaced_under_an_older_mtime_and_one_run_rescored_are_two_item_sets_in_the_audit(smoke_tree):
    """The issue's reproduction: gcd's items replaced by other items under an older mtime (`cp -p`, `rsync -t`, a
    restore), then one run rescored. The audit's headline names gcd, the run scored against the new items and the
    runs scored against the old ones, each set by its sha256 (hashlib, here); the old runs are stale, and so are the
    calibration and the decontamination that read the old items."""
    smoke = ["--configfile", str(REPO / "config/smoke.yaml"), "--directory", str(smoke_tree)]
    items = smoke_tree / layout.benchmark_items("gcd")
    old, stat = _sha256(items), items.stat()
    other = benchmark_items("gcd", n_items=SMOKE["benchmarks"]["items"], seed=SMOKE["benchmarks"]["seed"] + 1)
    other.to_parquet(items, index=False)
    os.utime(items, ns=(stat.st_atime_ns, stat.st_mtime_ns - 3600 * 10**9))
    new = _sha256(items)
    assert new != old
    rescored = smoke_run("static", 1)
    snakemake("--cores", "2", "--quiet", *smoke, "-f", layout.score("tiny-qwen2", rescored, "gcd"),
              "--allowed-rules", "score")
    snakemake("audit", "--cores", "1", *smoke)
    report = json.loads((smoke_tree / layout.AUDIT_JSON).read_text())
    # every other run scored on gcd before (one whose scores an earlier test deleted is in neither set)
    others = [("untrained", None),
              *((m, s) for m in SMOKE["methods"] for s in SMOKE["seeds"] if (m, s) != ("static", 1))]
    old_runs = [f"tiny-qwen2/{method}" + (f"/seed{seed}" if seed else "") for method, seed in others
                if (smoke_tree / layout.score_provenance("tiny-qwen2", smoke_run(method, seed), "gcd")).is_file()]
    assert len(old_runs) >= len(others) - 1
    (split,) = report["item_sets"]
    assert split == {"benchmark": "gcd", "path": layout.benchmark_items("gcd"), "sets": [
        {"sha256": old, "runs": old_runs, "on_disk": False},
        {"sha256": new, "runs": ["tiny-qwen2/static/seed1"], "on_disk": True}]}
    assert set(old_runs) <= set(report["stale_runs"]) and "tiny-qwen2/static/seed1" not in report["stale_runs"]
    readers = {change["reader"] for change in report["inputs_changed_since_read"] if change["now"] == new}
    assert {layout.calibration("gcd"), layout.DECONTAMINATION_AUDIT} <= readers
    markdown = (smoke_tree / layout.AUDIT_MD).read_text()
    assert markdown.index("`gcd` scored against 2 item sets") < markdown.index("cells (runs and untrained bases)")


def test_the_solve_rates_are_measured_by_chunk_jobs_and_put_together_by_the_table_job(smoke_study_copy):
    """A low_utility regime added to the finished smoke study: its solve rates are the only new work the target asks
    for, one solve_rates job (the embedded backend's one chunk: its samples come from one stream) and the table job,
    whose file holds every clean-corpus prompt once, K samples each, with the inputs' sha256, byte for byte the
    chunk's; deleting the table alone re-runs the table job only."""
    study = smoke_study_copy
    overlay = study / "low_utility.yaml"
    overlay.write_text(yaml.safe_dump({"regimes": {"easy": {"transform": "low_utility", "share": 0.5}}}))
    target = layout.solve_rates("tiny-qwen2")
    args = [target, "--cores", "2", "--directory", str(study), "--configfile", str(REPO / "config/smoke.yaml"),
            str(overlay)]
    result = snakemake(*args)
    counts = job_counts(result.stdout + result.stderr)
    assert {rule: n for rule, n in counts.items() if rule not in ("total",)} == {"solve_rates": 1,
                                                                                "solve_rate_table": 1}
    chunk = study / layout.solve_rate_chunk("tiny-qwen2", 0)
    table = pd.read_parquet(study / target)
    clean = pd.read_parquet(study / layout.CORPUS_CLEAN)
    assert sorted(table["id"]) == sorted(clean["id"]) and table["id"].is_unique
    assert set((table["solve_rate"] * 6).round(9) % 1) == {0}  # K = training.rollouts = 6 samples a prompt
    assert parquet_inputs(study / target)["corpus"]["path"] == layout.CORPUS_CLEAN
    assert (study / target).read_bytes() == chunk.read_bytes()
    (study / target).unlink()
    again = snakemake(*args)
    assert job_counts(again.stdout + again.stderr) == {"solve_rate_table": 1, "total": 1}
