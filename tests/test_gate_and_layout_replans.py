"""What changes that change no result replan on a finished study, through the real `snakemake -n`: a quarantine
threshold (a gate), a deleted gate report, and the scoring jobs' layout (`evaluation.job_per_benchmark`); and what the
data rebuilt for other settings, or a score written with other settings, still replan."""
import copy
import json
import os
import re
import subprocess
from pathlib import Path

import pytest
import yaml

from dataflex_rl.artefacts import layout
from dataflex_rl.artefacts.provenance import fingerprint

from config_edits import set_key
import forked_snakemake

REPO = Path(__file__).resolve().parents[1]
SNAKEMAKE = ["--snakefile", str(REPO / "Snakefile")]  # forked_snakemake.snakemake's arguments
BENCHMARKS = ["basic_arithmetic", "syllogism", "unit_conversion"]  # one per domain keeps the study small
SMOKE = yaml.safe_load((REPO / "config/smoke.yaml").read_text())
CONFIG = {**SMOKE, "corpus": {**SMOKE["corpus"], "sources": BENCHMARKS},
          "benchmarks": {**SMOKE["benchmarks"], "names": BENCHMARKS},
          "methods": {name: SMOKE["methods"][name] for name in ("baseline", "static")}}
MODEL = "tiny-qwen2"
RUN = layout.run_name("static", 1, None, SMOKE["training"]["steps"])
AFTER_SCORES = {"records": 1, "tables": 1, "all": 1}


def changed(**settings) -> dict:
    """CONFIG with each dotted key (`__` for `.`) set to its value."""
    config = copy.deepcopy(CONFIG)
    for key, value in settings.items():
        set_key(config, key.replace("__", "."), value)
    return config


def snakemake(workdir: Path, config: dict, *args: str) -> subprocess.CompletedProcess:
    path = workdir / f"config-{fingerprint(config)[:12]}.yaml"
    path.write_text(yaml.safe_dump(config))
    result = forked_snakemake.snakemake([*SNAKEMAKE, "--configfile", str(path), "--directory", str(workdir), *args])
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
    return result


def planned(workdir: Path, config: dict) -> dict[str, int]:
    """{rule: jobs} of the dry run's job stats; {} when there is nothing to do."""
    output = snakemake(workdir, config, "-n", "--nolock").stdout
    if "Nothing to be done" in output:
        return {}
    table = output.split("Job stats:", 1)[1]
    return {m[1]: int(m[2]) for m in re.finditer(r"^(\w+)\s+(\d+)\s*$", table, re.MULTILINE) if m[1] != "total"}


def planned_inputs(workdir: Path, config: dict, rule: str) -> list[str]:
    """The inputs of every job of `rule` in the dry run's plan."""
    output = snakemake(workdir, config, "-n", "--nolock").stdout
    blocks = re.findall(rf"^(?:local)?rule {rule}:\n((?:    .*\n)+)", output, re.MULTILINE)
    return [path for block in blocks for line in block.splitlines() if line.startswith("    input: ")
            for path in line.removeprefix("    input: ").split(", ")]


@pytest.fixture(scope="module")
def study(tmp_path_factory):
    """The small study, finished once; each test leaves it finished as it found it."""
    root = tmp_path_factory.mktemp("study")
    snakemake(root, CONFIG, "--cores", "2", "--quiet")
    assert planned(root, CONFIG) == {}
    return root


@pytest.mark.slow
def test_a_quarantine_threshold_reruns_its_gate_alone(study):
    """The thresholds are in no data job's params and no slice: the data come out the same, so only the gates rerun."""
    assert planned(study, changed(data_validation__corpus__max_quarantine_fraction=0.2)) == {
        "quarantine_gate": 1, "all": 1}
    assert planned(study, changed(data_validation__benchmarks__max_quarantine_fraction=0.1)) == {
        "quarantine_gate": 3, "all": 1}


@pytest.mark.slow
def test_data_built_again_are_read_only_after_their_gate_has_counted_them_again(study):
    """A gate report is no input of a finished job, but data rebuilt for other settings wait for their gate again:
    the corpus for decontamination, a benchmark's items for its calibration."""
    assert layout.quarantine_gate("corpus") not in planned_inputs(study, changed(decontamination__threshold=0.7),
                                                                  "decontaminate")
    assert layout.quarantine_gate("corpus") in planned_inputs(study, changed(corpus__seed=2), "decontaminate")
    calibrate = planned_inputs(study, changed(benchmarks__seed=1001), "calibrate")
    assert {layout.quarantine_gate(b) for b in BENCHMARKS} <= set(calibrate)


@pytest.mark.slow
def test_a_deleted_gate_report_reruns_that_gate_alone_and_comes_back_the_same(study):
    reports = {layout.calibration("syllogism"): "calibrate", layout.parse_gate(MODEL): "parse_gate",
               layout.quarantine_gate("corpus"): "quarantine_gate"}
    kept = {path: (study / path).read_bytes() for path in reports}
    for path in reports:
        (study / path).unlink()
    assert planned(study, CONFIG) == {**dict.fromkeys(reports.values(), 1), "all": 1}
    snakemake(study, CONFIG, "--cores", "2", "--quiet")
    assert {path: (study / path).read_bytes() for path in reports} == kept
    assert planned(study, CONFIG) == {}


@pytest.mark.slow
def test_the_scoring_layout_reuses_every_score_and_both_write_the_same_bytes(study):
    per_benchmark = changed(evaluation__job_per_benchmark=True)
    assert planned(study, per_benchmark) == {}

    score = study / layout.score(MODEL, RUN, "syllogism")
    record = study / layout.score_provenance(MODEL, RUN, "syllogism")
    kept = score.read_bytes(), record.read_bytes()  # written by the run's one scoring job
    score.unlink(), record.unlink()
    assert planned(study, per_benchmark) == {"score": 1, **AFTER_SCORES}
    snakemake(study, per_benchmark, "--cores", "2", "--quiet")
    assert (score.read_bytes(), record.read_bytes()) == kept
    assert planned(study, CONFIG) == {} and planned(study, per_benchmark) == {}


@pytest.mark.slow
def test_a_score_written_with_other_settings_is_rescored_in_either_layout(study):
    """Each score is held to its own slice by its record's fingerprint: a changed evaluation setting rescores every
    score, and a single score written with another setting only its own scoring job."""
    per_benchmark = changed(evaluation__job_per_benchmark=True)
    scored_runs = 1 + 2 * 2  # the untrained base and 2 methods × 2 seeds
    rescored = {"parse_gate": 1, **AFTER_SCORES}
    assert planned(study, changed(evaluation__batch_size=7)) == {"score": scored_runs, **rescored}
    assert planned(study, changed(evaluation__batch_size=7, evaluation__job_per_benchmark=True)) == {
        "score": scored_runs * len(BENCHMARKS), **rescored}

    path = study / layout.score_provenance(MODEL, RUN, "syllogism")
    kept, stat = path.read_bytes(), path.stat()
    record = json.loads(kept)
    record["settings"]["evaluation.batch_size"] = 7
    record["fingerprint"] = fingerprint(record["settings"])
    path.write_text(json.dumps(record))
    try:
        assert planned(study, per_benchmark) == {"score": 1, **AFTER_SCORES}
        assert planned(study, CONFIG) == {"score": 1, **AFTER_SCORES}  # the run's one job, all its benchmarks
        dry_run = snakemake(study, CONFIG, "-n", "--nolock")
        assert ("scores built with other settings (evaluation.batch_size): their scoring jobs are planned again"
                in dry_run.stderr)
    finally:
        path.write_bytes(kept)
        os.utime(path, ns=(stat.st_atime_ns, stat.st_mtime_ns))
    assert planned(study, CONFIG) == {}
