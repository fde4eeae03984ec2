"""One selection round of a verl run as its own process (`python -m dataflex_rl.backends.verl.round_job <spec.json>`),
started by the train job between verl segments (selection_rounds.run_segments): vLLM (one engine process per group
of GPUs: round_engines) and the HF model for the gradients take the job's GPUs, and the process's exit gives all of
that memory back before verl starts again. The round's streams are saved as they finish (round_rollouts) until its
file is written, so a requeued round resumes after them.

The spec (a JSON file, `RoundSpec`) names the run's job file, its GRPO settings, the round, the weights (a Hugging
Face folder or hub name), the rollout and probe settings, the prompt allowance, the round file to write and the train
job's CPUs (its `threads`), which bound the round's reward processes.
"""
from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from dataclasses import asdict, dataclass
from functools import partial
from pathlib import Path

from dataflex_rl.artefacts.atomic import atomic_path
from dataflex_rl.backends.verl.job import VerlRunJob
from dataflex_rl.backends.verl.probe_settings import ProbeSettings
from dataflex_rl.backends.verl.rollout import RolloutSettings
from dataflex_rl.training.recipe import GRPOSettings


@dataclass(frozen=True)
class RoundSpec:
    job_file: str
    training: GRPOSettings
    index: int
    weights: str
    rollout: RolloutSettings
    probe: ProbeSettings
    prompt_tokens: int
    out: str
    cpus: int = 1  # the train job's; a spec written without it reads as 1 (rewards scored in the round process)

    def write(self, path: Path) -> Path:
        with atomic_path(path) as tmp:
            Path(tmp).write_text(json.dumps(asdict(self), indent=1, sort_keys=True))
        return path

    @classmethod
    def read(cls, path: Path) -> "RoundSpec":
        raw = json.loads(Path(path).read_text())
        return cls(**{**raw, "training": GRPOSettings(**raw["training"]), "rollout": RolloutSettings(**raw["rollout"]),
                      "probe": ProbeSettings(**raw["probe"])})


def rollouts_dir(spec: RoundSpec) -> Path:
    """Where the round's streams are saved until its file is written (round_rollouts): beside the round file."""
    out = Path(spec.out)
    return out.parent / f"{out.stem}.rollouts"


def reward_workers(cpus: int) -> int:
    """The round's reward processes: the job's CPUs, or fewer where its affinity holds fewer. Not the affinity alone:
    where Slurm binds no cores it is the whole node (e.g. 224 spawned processes, each importing the verifiers,
    inside a 40-CPU allocation)."""
    return max(1, min(cpus, len(os.sched_getaffinity(0))))


def open_round_boundary(spec: RoundSpec, job: VerlRunJob):
    """The round boundary on a GPU node: the weights as a bf16 HF causal LM (on the CPU until a backward pass, then a
    replica on each of the job's GPUs; on the CPU where there are none, beside vLLM's CPU build), vLLM with the
    training rollout's settings in one engine process per group of the rollout's tensor_parallel_size GPUs
    (round_engines; one where there is no GPU), started before the round goes on, the rows, the saved streams' folder
    and a reward process per CPU of the job (reward_workers)."""
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    from dataflex_rl.backends.verl.probe import RoundBoundary
    from dataflex_rl.backends.verl.probe_rollouts import VllmSampler
    from dataflex_rl.backends.verl.round_engines import DealtSampler, EngineProcess, device_groups, visible_devices
    from dataflex_rl.backends.verl.selection_rounds import run_rows
    from dataflex_rl.corpus.turn_end import stop_token_ids

    tokenizer = AutoTokenizer.from_pretrained(spec.weights)
    gpus = torch.cuda.device_count()
    factory = partial(VllmSampler, spec.weights, max_new_tokens=spec.training.max_new_tokens,
                      prompt_tokens=spec.prompt_tokens, stop_token_ids=stop_token_ids(tokenizer), rollout=spec.rollout,
                      seed=job.seed)
    groups = device_groups(visible_devices(gpus), spec.rollout.tensor_parallel_size)
    print(f"selection round {spec.index}: {len(groups)} vLLM engine(s), on GPUs {groups}", file=sys.stderr, flush=True)
    engines = [EngineProcess(factory, devices) for devices in groups]
    try:  # the HF model loads while the engines start; the first engine that fails to start stops the round here
        model = AutoModelForCausalLM.from_pretrained(spec.weights, dtype=torch.bfloat16)
        rows = run_rows(job)[0].to_dict("records")
        sampler = DealtSampler(engines)
    except BaseException:
        for engine in engines:
            engine.close()
        raise
    devices = tuple(f"cuda:{i}" for i in range(gpus)) or ("cpu",)  # vLLM's CPU build: no GPU
    return RoundBoundary(model, tokenizer, sampler, rows, job.seed, devices=devices, micro_batch=spec.probe.micro_batch,
                         rollouts_dir=rollouts_dir(spec), reward_workers=reward_workers(spec.cpus))


def run_round_process(spec: RoundSpec, spec_file: Path) -> None:
    """Run the round in its own process; its output goes to this job's stderr (its log)."""
    spec.write(spec_file)
    subprocess.run([sys.executable, "-m", __name__, str(spec_file)], check=True, stdout=sys.stderr,
                   stderr=subprocess.STDOUT)


def main(spec_file: str) -> None:
    from dataflex_rl.backends.verl.selection_rounds import run_round, write_round

    spec = RoundSpec.read(Path(spec_file))
    job = VerlRunJob.read(spec.job_file)
    boundary = open_round_boundary(spec, job)
    try:
        write_round(Path(spec.out), run_round(job, spec.training, spec.index, boundary))
    finally:
        boundary.sampler.close()  # the engine processes are not daemons (each starts vLLM's own): end them here
    shutil.rmtree(rollouts_dir(spec), ignore_errors=True)


if __name__ == "__main__":
    main(sys.argv[1])
