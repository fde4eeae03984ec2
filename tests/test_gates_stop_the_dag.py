"""The gates in front of training, run through Snakemake itself: a verifier that accepts wrong answers stops the DAG at
calibration, a base model whose answers cannot be parsed stops it at the parse gate, and a corpus file with too many
bad rows stops it at its quarantine gate — nothing trains."""
import json
import os
import subprocess
import sys
from pathlib import Path

import pandas as pd
import yaml

from dataflex_rl.artefacts import layout

REPO = Path(__file__).resolve().parents[1]
SNAKEMAKE = [sys.executable, "-m", "snakemake", "--snakefile", str(REPO / "Snakefile")]
BENCHMARKS = ["basic_arithmetic", "syllogism", "unit_conversion"]  # one per domain keeps the DAG small

# Imported by every Python process Snakemake starts (PYTHONPATH), so the planted fault is in the real jobs: the
# multiple-choice verifier calls every response correct.
ACCEPT_EVERYTHING = '''
import dataclasses
from dataflex_rl.formats import FORMATS
from dataflex_rl.formats.base import Verdict
FORMATS["multiple_choice"] = dataclasses.replace(
    FORMATS["multiple_choice"], verify=lambda response, item: Verdict(parsed=True, correct=True))
'''


# The smoke study's first trained run (3 steps on the full data).
FIRST_RUN_MODEL = layout.run_model("tiny-qwen2", layout.run_name("baseline", 1, None, 3))


def _config(tmp_path, **calibration):
    config = yaml.safe_load((REPO / "config/smoke.yaml").read_text())
    config["corpus"]["sources"] = config["benchmarks"]["names"] = BENCHMARKS
    config["methods"] = {"baseline": {"policy": "baseline"}}
    config["seeds"] = [1]
    config["calibration"] = calibration
    path = tmp_path / "config.yaml"
    path.write_text(yaml.safe_dump(config))
    return path


def test_a_verifier_accepting_wrong_answers_stops_the_dag_before_training(tmp_path):
    plant = tmp_path / "plant"
    plant.mkdir()
    (plant / "sitecustomize.py").write_text(ACCEPT_EVERYTHING)
    workdir = tmp_path / "work"
    result = subprocess.run(
        [*SNAKEMAKE, "--cores", "2", "--keep-going", "--configfile", str(_config(tmp_path)), "--directory",
         str(workdir), FIRST_RUN_MODEL],
        capture_output=True, text=True,
        env={**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, [str(plant), os.environ.get("PYTHONPATH")]))})
    assert result.returncode != 0
    log = (workdir / "logs/calibration/unit_conversion.log").read_text()
    assert "verifier calibration failed for benchmark 'unit_conversion'" in log and "multiple_choice" in log
    assert (workdir / "results/calibration/basic_arithmetic.json").is_file()      # the sound verifiers passed
    assert not (workdir / "results/models").exists() and not (workdir / "results/runs").exists()


def _untrained_scores(workdir, parsed):
    for bench, rate in zip(BENCHMARKS, parsed):
        path = workdir / f"results/scores/tiny-qwen2/untrained/{bench}.parquet"
        path.parent.mkdir(parents=True, exist_ok=True)
        flags = [i < rate * 10 for i in range(10)]
        pd.DataFrame({"prompt_id": [f"p{i}" for i in range(10)], "response": ["x" if f else "???" for f in flags],
                      "length": 2, "correct": False, "parsed": flags}).to_parquet(path)


def test_the_parse_gate_stands_between_the_base_model_and_training(tmp_path):
    config = _config(tmp_path, min_base_parse_rate=0.5)
    plan = subprocess.run([*SNAKEMAKE, "-n", "--cores", "1", "--configfile", str(config), "--directory",
                           str(tmp_path / "plan"), FIRST_RUN_MODEL],
                          capture_output=True, text=True)
    assert plan.returncode == 0, plan.stderr[-2000:]
    assert "rule parse_gate:" in plan.stdout and "rule train:" in plan.stdout

    gate = ["results/calibration/parse_gate/tiny-qwen2.json", "--allowed-rules", "parse_gate", "--cores", "1",
            "--configfile", str(config)]
    failing, passing = tmp_path / "failing", tmp_path / "passing"
    _untrained_scores(failing, [1.0, 0.9, 0.2])
    result = subprocess.run([*SNAKEMAKE, *gate, "--directory", str(failing)], capture_output=True, text=True)
    assert result.returncode != 0, result.stderr[-2000:]
    log = (failing / "logs/calibration/parse_gate_tiny-qwen2.log").read_text()
    assert "unit_conversion: parse rate 0.200 (2 of 10)" in log and "syllogism:" not in log
    assert not (failing / "results/calibration/parse_gate/tiny-qwen2.json").exists()

    _untrained_scores(passing, [1.0, 0.9, 0.5])
    result = subprocess.run([*SNAKEMAKE, *gate, "--directory", str(passing)], capture_output=True, text=True)
    assert result.returncode == 0, result.stderr[-2000:]
    report = yaml.safe_load((passing / "results/calibration/parse_gate/tiny-qwen2.json").read_text())
    assert report["failed"] == [] and report["benchmarks"]["unit_conversion"]["parse_rate"] == 0.5


def test_a_parse_gate_that_cannot_fail_holds_no_training_back(tmp_path):
    """At `min_base_parse_rate` 0 no parse rate is below the gate, so training does not wait for the untrained base's
    scores (it runs beside them); any higher threshold puts the gate, and so the untrained scoring, before training.
    The gate is planned either way: it is a target of the whole study."""
    def planned_rules(config, *targets):
        plan = subprocess.run([*SNAKEMAKE, "-n", "--cores", "1", "--configfile", str(config), "--directory",
                               str(tmp_path / "plan"), *targets], capture_output=True, text=True)
        assert plan.returncode == 0, plan.stderr[-2000:]
        return {line.split()[-1].rstrip(":") for line in plan.stdout.splitlines() if line.startswith(("rule ",
                                                                                                     "localrule "))}

    report_only = _config(tmp_path, min_base_parse_rate=0.0)
    assert {"train", "base_model"} <= planned_rules(report_only, FIRST_RUN_MODEL)
    assert not {"parse_gate", "score"} & planned_rules(report_only, FIRST_RUN_MODEL)
    assert {"parse_gate", "score", "train"} <= planned_rules(report_only)
    assert {"parse_gate", "score", "train"} <= planned_rules(_config(tmp_path, min_base_parse_rate=0.01),
                                                             FIRST_RUN_MODEL)


def test_a_quarantine_gate_stops_the_dag_before_anything_reads_the_data(tmp_path):
    """A corpus file 10% of whose rows are bad (the corpus threshold's default is 0.05): the corpus is built, its
    quarantine gate fails naming the file, the threshold and the fix, and nothing reads the corpus. The threshold is no
    setting of the corpus: raising it reruns the gate, not the corpus job."""
    workdir = tmp_path / "work"
    workdir.mkdir()
    rows = [{"question": f"Tom has {i} red and {i} green apples. How many apples has he?", "answer": str(2 * i)}
            for i in range(18)] + [{"question": "Q1?", "answer": ""}, {"question": "Q2?"}]
    (workdir / "mine.jsonl").write_text("".join(json.dumps(row) + "\n" for row in rows))
    config = yaml.safe_load(_config(tmp_path).read_text())
    config["corpus"]["files"] = [{"path": "mine.jsonl", "domain": "math", "answer_format": "math"}]
    strict, raised = tmp_path / "strict.yaml", tmp_path / "raised.yaml"
    strict.write_text(yaml.safe_dump(config))
    raised.write_text(yaml.safe_dump({**config, "data_validation": {"corpus": {"max_quarantine_fraction": 0.1}}}))

    result = subprocess.run([*SNAKEMAKE, "--cores", "2", "--keep-going", "--configfile", str(strict), "--directory",
                             str(workdir), FIRST_RUN_MODEL], capture_output=True, text=True)
    assert result.returncode != 0
    log = (workdir / "logs/gates/quarantine_corpus.log").read_text()
    assert ("quarantine gate failed (results/corpus/raw_audit.json): 1 file(s) lost more rows than "
            "data_validation.corpus.max_quarantine_fraction allows:\n  mine.jsonl: 2 of 20 rows quarantined (10.0%) > "
            "data_validation.corpus.max_quarantine_fraction = 0.05 (quarantined: missing_answer 2); inspect "
            "results/corpus/quarantine.jsonl\nFix the rows, or raise data_validation.corpus.max_quarantine_fraction: "
            "only this gate reruns, the data stay as built") in log
    assert (workdir / "results/corpus/raw.parquet").is_file()
    assert (workdir / layout.quarantine_gate("syllogism")).is_file()  # the benchmarks passed theirs
    assert not (workdir / layout.quarantine_gate("corpus")).exists()
    assert not (workdir / layout.CORPUS_CLEAN).exists() and not (workdir / "results/models").exists()

    plan = subprocess.run([*SNAKEMAKE, "-n", "--cores", "1", "--configfile", str(raised), "--directory", str(workdir),
                           FIRST_RUN_MODEL], capture_output=True, text=True)
    assert plan.returncode == 0, plan.stderr[-2000:]
    rules = {line.split()[-1].rstrip(":") for line in plan.stdout.splitlines() if line.startswith("rule ")}
    assert {"quarantine_gate", "decontaminate", "base_model", "train"} <= rules
    assert not {"corpus", "benchmark_items", "calibrate"} & rules
