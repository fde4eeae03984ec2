"""The selection round's spec (dataflex_rl/backends/verl/round_job.py RoundSpec) and the bound on its reward
processes: the train job's CPUs, or its affinity where that holds fewer."""
import json
import os

import pytest

from dataflex_rl.backends.verl import round_job
from dataflex_rl.backends.verl.probe_settings import ProbeSettings
from dataflex_rl.backends.verl.rollout import RolloutSettings
from dataflex_rl.backends.verl.round_job import RoundSpec, reward_workers
from dataflex_rl.training.recipe import GRPOSettings


@pytest.mark.parametrize("cpus, affinity, workers", [
    (40, 224, 40),  # Slurm binds no cores: the affinity is the whole node, the job has 40
    (40, 16, 16),  # bound to fewer cores than it asked for
    (8, 8, 8),
    (0, 8, 1),  # never no process at all
])
def test_the_reward_processes_are_the_jobs_cpus_within_its_affinity(cpus, affinity, workers, monkeypatch):
    monkeypatch.setattr(round_job.os, "sched_getaffinity", lambda pid: set(range(affinity)))
    assert reward_workers(cpus) == workers


def _spec(tmp_path, **more):
    return RoundSpec(str(tmp_path / "job.json"), GRPOSettings(steps=2, prompts_per_step=4, rollouts=4),
                     3, "weights", RolloutSettings(tensor_parallel_size=2), ProbeSettings(micro_batch=4), 1024,
                     str(tmp_path / "round_3.pt"), **more)


def test_the_spec_reads_back_with_the_jobs_cpus(tmp_path):
    spec = _spec(tmp_path, cpus=40)
    assert RoundSpec.read(spec.write(tmp_path / "spec.json")) == spec


def test_a_spec_written_without_the_cpus_reads_as_one(tmp_path):
    path = _spec(tmp_path, cpus=40).write(tmp_path / "spec.json")
    raw = json.loads(path.read_text())
    del raw["cpus"]
    path.write_text(json.dumps(raw))
    assert RoundSpec.read(path) == _spec(tmp_path) and RoundSpec.read(path).cpus == 1
    assert reward_workers(RoundSpec.read(path).cpus) == 1 <= len(os.sched_getaffinity(0))
