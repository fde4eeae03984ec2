"""A run killed under one thread count and resumed under another, through Snakemake itself: Snakemake scales a job's
threads down to `--cores`, so `threads_per_job: 2` trains with 1 under `--cores 1`. The resume is refused (the two
counts give different weights), and a rerun that gives the job its recorded count again finishes and records it, as
the base model's build records its own."""
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from dataflex_rl.artefacts import layout
from dataflex_rl.training.faults import ENV

REPO = Path(__file__).resolve().parents[1]
SNAKEMAKE = [sys.executable, "-m", "snakemake", "--snakefile", str(REPO / "Snakefile")]
BENCHMARKS = ["basic_arithmetic", "syllogism", "unit_conversion"]  # one per domain keeps the DAG small
RUN = layout.run_name("baseline", 1, None, 3)  # the smoke study's 3 steps, checkpoints after steps 2 and 3
MODEL = layout.run_model("tiny-qwen2", RUN)


def _config(tmp_path: Path) -> Path:
    config = yaml.safe_load((REPO / "config/smoke.yaml").read_text())
    config["corpus"]["sources"] = config["benchmarks"]["names"] = BENCHMARKS
    config["methods"] = {"baseline": {"policy": "baseline"}}
    config["seeds"] = [1]
    config["threads_per_job"] = 2
    path = tmp_path / "config.yaml"
    path.write_text(yaml.safe_dump(config))
    return path


def _train(tmp_path: Path, cores: int, fault: str | None = None) -> subprocess.CompletedProcess:
    env = {key: value for key, value in os.environ.items() if key != ENV}
    if fault:
        env[ENV] = fault
    return subprocess.run([*SNAKEMAKE, "--cores", str(cores), "--configfile", str(_config(tmp_path)), "--directory",
                           str(tmp_path / "work"), MODEL], capture_output=True, text=True, env=env)


@pytest.mark.slow
def test_a_run_resumed_under_fewer_cores_is_refused_and_resumes_under_its_own(tmp_path):
    work = tmp_path / "work"
    killed = _train(tmp_path, cores=2, fault="after_checkpoint:2")
    assert killed.returncode != 0
    # one settings' state folder beside the train job's lock file
    state, = (path for path in (work / layout.train_state("tiny-qwen2", RUN)).iterdir() if path.is_dir())
    assert (state / "checkpoint.pt").is_file()

    log = work / f"logs/train/tiny-qwen2/{RUN}.log"
    refused = _train(tmp_path, cores=1)
    assert refused.returncode != 0
    message = log.read_text()
    assert (f"training state {state.relative_to(work)} was trained with 2 thread(s) up to step 2, and this job has 1"
            in message), message[-3000:]
    assert "--cores 2 or more" in message and f"delete {state.relative_to(work)}" in message
    assert not (work / MODEL).exists()

    resumed = _train(tmp_path, cores=2)
    assert resumed.returncode == 0, resumed.stderr[-3000:]
    assert "resuming from step 2" in log.read_text()
    record = json.loads((work / layout.train_provenance("tiny-qwen2", RUN)).read_text())
    assert record["runtime"] == {"threads": 2}
    base = json.loads((work / layout.scored_model_provenance("tiny-qwen2", layout.UNTRAINED)).read_text())
    assert base["runtime"] == {"threads": 2}  # the base's warm-up trained with the job's threads too
