"""One verl run: write its inputs into the run's state folder, run `python -m verl.trainer.main_ppo` to the last step
(resuming from the folder's checkpoints), then turn verl's per-step metrics into our metrics.parquet and put the final
actor checkpoint where the merge job reads it.

Each launch is an attempt with its own numbered metrics file and log in the state folder: verl's file logger truncates
its file when it starts, so a resumed attempt would otherwise erase the steps before it. A step logged by several
attempts (one that ran again after a requeue) is taken from the latest.
"""
from __future__ import annotations

import glob
import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any, Mapping, NamedTuple, Sequence

import pandas as pd

from dataflex_rl.artefacts.atomic import atomic_directory, remove_partial_writes, write_parquet
from dataflex_rl.backends.verl.checkpoints import remove_superseded_checkpoints, tracked_step
from dataflex_rl.backends.verl.dataset import verl_frame, write_verl_corpus
from dataflex_rl.backends.verl.gpu_memory import check_free_in_subprocess
from dataflex_rl.backends.verl.job import VerlRunJob
from dataflex_rl.backends.verl.model_heads import model_parameters
from dataflex_rl.backends.verl.overrides import (DEFAULT_PROMPT_TOKENS, RunFiles, attention_implementation, run_overrides,
                                                 verl_command)
from dataflex_rl.backends.verl.rollout_stops import write_rollout_generation_config
from dataflex_rl.backends.verl.probe_settings import ProbeSettings
from dataflex_rl.backends.verl.round_job import RoundSpec, run_round_process
from dataflex_rl.backends.verl.rollout import RolloutSettings
from dataflex_rl.backends.verl.selection_rounds import ROUNDS_FOLDER, policy_driver, round_metrics, run_segments
from dataflex_rl.backends.verl.train_memory import beside_rollout_bytes
from dataflex_rl.policies.methods import MethodSpec
from dataflex_rl.training.recipe import GRPOSettings
from dataflex_rl.corpus.token_caps import TokenCaps
from dataflex_rl.corpus.training_fit import check_prompts_per_step

POLICY_PREFIX = "dataflex/"  # the trainer's policy-driver columns in verl's metrics (PolicyDriver.metrics)
# our metrics column ← verl 0.9.1's key (workers/utils/losses.py, trainer/ppo/metric_utils.py, v1/trainer_base.py).
# verl logs each of them at every step of our recipe: the actor's at every update (trainer_base.py:607 updates the actor
# from critic_warmup = 0 on; pg_clipfrac from compute_policy_loss_vanilla, kl_loss with use_kl_loss, grad_norm from
# every optimizer step), response_length/mean and timing_s/step from _compute_metrics. So a missing one is a renamed
# key or another loss, and metrics_frame refuses it.
VERL_METRICS = {
    "pg_loss": "actor/pg_loss",
    "kl": "actor/kl_loss",
    "clip_fraction": "actor/pg_clipfrac",
    "grad_norm": "actor/grad_norm",
    "mean_response_length": "response_length/mean",
    "seconds": "timing_s/step",
}
METRICS_GLOB = "verl_metrics.attempt*.jsonl"
ROUND_SECONDS = "round_seconds_"  # a selection round's phases (prompt_selection.selector)
LOG_GLOB = "verl.attempt*.log"


class VerlRunError(RuntimeError):
    """verl stopped before the run's last step."""


def final_actor_dir(checkpoint_dir: Path, steps: int) -> Path:
    """Where verl saves the actor's FSDP shards and `huggingface/` folder at the last step."""
    return Path(checkpoint_dir) / f"global_step_{steps}" / "actor"


def next_attempt(state_dir: Path) -> int:
    """One more than the attempts so far, counted by their logs (an attempt that failed early has no metrics)."""
    return len(list(Path(state_dir).glob(LOG_GLOB))) + 1


def run_verl(overrides: Sequence[str], state_dir: Path) -> Path:
    """Run main_ppo as a subprocess, its output streamed to this job's stderr (the train job's log) and to the
    attempt's own log; returns the attempt's metrics file. A nonzero exit raises VerlRunError naming that log."""
    attempt = next_attempt(state_dir)
    metrics_path = Path(state_dir) / f"verl_metrics.attempt{attempt}.jsonl"
    log_path = Path(state_dir) / f"verl.attempt{attempt}.log"
    command = verl_command(overrides)
    environment = {**os.environ, "VERL_FILE_LOGGER_PATH": str(metrics_path.resolve())}
    print(f"verl attempt {attempt}: {' '.join(command)}", file=sys.stderr, flush=True)
    with open(log_path, "w") as log, subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                                                      text=True, env=environment) as process:
        for line in process.stdout:
            log.write(line)
            sys.stderr.write(line)
        code = process.wait()
    if code:
        raise VerlRunError(f"verl (python -m verl.trainer.main_ppo) exited with code {code}; its output is in "
                           f"{log_path} (and this job's log). A rerun resumes from the last checkpoint in "
                           f"{state_dir}")
    return metrics_path


class LoggedStep(NamedTuple):
    """One global step's metrics as verl logged them, and the attempt file they came from."""

    data: dict
    path: Path


def read_verl_metrics(paths: Sequence[Path]) -> dict[int, LoggedStep]:
    """verl's file-logger lines ({"step": global step, "data": {key: value}}) by global step; where attempts repeat a
    step, the later file in `paths` wins."""
    steps: dict[int, LoggedStep] = {}
    for path in paths:
        for line in Path(path).read_text().splitlines():
            if line.strip():
                record = json.loads(line)
                steps[int(record["step"])] = LoggedStep(record["data"], Path(path))
    return steps


def attempt_files(state_dir: Path) -> list[Path]:
    return sorted(Path(state_dir).glob(METRICS_GLOB), key=lambda p: int(p.stem.split("attempt")[-1]))


def unlogged_checkpoints(steps: Mapping[int, LoggedStep], last_step: int, tracked: int | None) -> list[int]:
    """The steps verl checkpointed and was stopped before logging: verl saves a step's checkpoint, tracker included,
    before it logs the step's metrics (verl: trainer/ppo/v1/trainer_base.py:481-485 saves, :514 logs), and a resumed
    attempt starts after the checkpoint, so a kill in between leaves that step unlogged for good. A missing step is
    one of them where its attempt's log ends just before it (or it is step 1) and it is the checkpoint that the next
    attempt resumed from (its first logged step is the next one) or the one verl's tracker names (`tracked`)."""
    by_attempt: dict[Path, list[int]] = {}
    for step, logged in steps.items():
        by_attempt.setdefault(logged.path, []).append(step)
    firsts = {min(logged) for logged in by_attempt.values()}
    lasts = {max(logged) for logged in by_attempt.values()}
    return [step for step in range(1, last_step + 1)
            if step not in steps and (step + 1 in firsts or step == tracked) and (step == 1 or step - 1 in lasts)]


def metrics_frame(steps: dict[int, LoggedStep], last_step: int, method: str, seed: int, attention: str,
                  rounds: Mapping[int, Mapping[str, Any]] | None = None, tracked: int | None = None) -> pd.DataFrame:
    """Our per-step metrics from verl's: step counted from 0 as in the embedded trainer (verl's global step 1 is
    step 0), the policy driver's columns without their prefix, the verl values we name (VERL_METRICS), and the
    attention implementation the run trained with. Every step 1..last_step must be there, with every VERL_METRICS
    key, except a step checkpointed and never logged (`unlogged_checkpoints`, given the step verl's tracker names:
    `tracked`), whose metrics are written as missing (NaN), with a warning. `rounds`: a prompt selection's round
    metrics by the step that opened the round (selection_rounds.py), put on that step's row, whose `seconds` then
    include the round's selection phases, as the embedded trainer's first step of a round does (report/selection.py
    takes a round's training time as its steps' seconds less those)."""
    unlogged = unlogged_checkpoints(steps, last_step, tracked)
    for step in unlogged:
        print(f"warning: verl's metrics lack global step {step}, which it checkpointed and was stopped before logging "
              f"(a kill between its checkpoint and its log line); its metrics are written as missing (NaN)",
              file=sys.stderr, flush=True)
    missing = [step for step in range(1, last_step + 1) if step not in steps and step not in unlogged]
    if missing:
        raise VerlRunError(f"verl's metrics lack global steps {missing[:5]}{' ...' if len(missing) > 5 else ''} of "
                           f"1..{last_step}; the run did not log every step — rerun the train job")
    rows = []
    for step in range(1, last_step + 1):
        data, path = steps.get(step) or LoggedStep(dict.fromkeys(VERL_METRICS.values(), float("nan")), None)
        absent = [theirs for theirs in VERL_METRICS.values() if theirs not in data]
        if absent:
            raise VerlRunError(f"{path}: global step {step} lacks verl's metric(s) {absent}, which "
                               f"dataflex_rl/backends/verl/launch.py VERL_METRICS maps into metrics.parquet; verl "
                               f"renamed or stopped logging them (this verl is not 0.9.1, or the run changed the "
                               f"loss) — update VERL_METRICS to the keys in that file")
        row = {"method": method, "seed": seed, "step": step - 1}
        row.update({key.removeprefix(POLICY_PREFIX): value for key, value in data.items()
                    if key.startswith(POLICY_PREFIX)})
        row.update({ours: data[theirs] for ours, theirs in VERL_METRICS.items()})
        row["attention"] = attention
        opened = (rounds or {}).get(step - 1)
        if opened:
            row.update(opened)
            row["seconds"] += sum(value for key, value in opened.items() if key.startswith(ROUND_SECONDS))
        rows.append(row)
    return pd.DataFrame(rows)


def keep_final_model(actor_dir: Path, out_model: Path) -> None:
    """`out_model` becomes a copy of the final actor folder made of hard links (no second copy of the shards on
    disk), atomically."""
    if not actor_dir.is_dir():
        raise VerlRunError(f"{actor_dir}: verl's final actor checkpoint is missing after the run; check save_freq "
                           f"and the run's log, then rerun the train job")
    remove_partial_writes(Path(out_model).parent, glob.escape(Path(out_model).name))
    with atomic_directory(out_model) as tmp:
        for source in sorted(actor_dir.rglob("*")):
            target = tmp / source.relative_to(actor_dir)
            if source.is_dir():
                target.mkdir(parents=True, exist_ok=True)
            else:
                target.parent.mkdir(parents=True, exist_ok=True)
                os.link(source, target)


def write_metrics(state_dir: Path, out_metrics, last_step: int, method: str, seed: int, attention: str,
                  steps_per_round: int | None = None) -> None:
    """`steps_per_round`: a prompt selection's I, whose round files in the state folder give the rounds' metrics."""
    rounds = None
    if steps_per_round:
        rounds = {index * steps_per_round: record for index, record in round_metrics(state_dir).items()}
    frame = metrics_frame(read_verl_metrics(attempt_files(state_dir)), last_step, method, seed, attention, rounds,
                          tracked_step(RunFiles.in_state(state_dir).checkpoint_dir))
    write_parquet(out_metrics, frame)


def train_verl_run(model_path: str, *, corpus, method: MethodSpec, seed: int, training: GRPOSettings, template: str,
                   out_model, out_metrics, state_dir: Path, gpus: int, cpus: int, token_caps: TokenCaps | None = None,
                   target_domain: str | None = None, rollout_engine: RolloutSettings = RolloutSettings(),
                   probe: ProbeSettings = ProbeSettings(),
                   validation_draws: tuple[tuple[int, int], ...] = ()) -> dict[str, str]:
    """Train one run to `training.steps` (skipping verl when its final checkpoint is already in `state_dir`), then
    write the metrics and the final actor folder (`out_model`, FSDP shards plus `huggingface/`: the merge job's
    input). Returns the run's runtime facts: the attention kernel (flash-attn or sdpa, whichever was importable)."""
    state_dir.mkdir(parents=True, exist_ok=True)
    files = RunFiles.in_state(state_dir)
    corpus_rows = write_verl_corpus(corpus, files.train_file, template)
    check_prompts_per_step(corpus_rows, training.prompts_per_step, str(corpus))
    rounds_dir = str(state_dir / ROUNDS_FOLDER) if method.family.needs_probe else None
    validation = method.validation_rows()  # a prompt selection's own validation prompts, after the corpus rows
    if validation:
        write_parquet(files.validation_file, verl_frame(pd.DataFrame(validation), template, start=corpus_rows))
    job = VerlRunJob(method, seed, str(files.train_file), training.rollouts, target_domain, rounds_dir,
                     validation_draws, str(files.validation_file) if validation else None)
    job.write(files.job_file)
    attention = attention_implementation()
    final = final_actor_dir(files.checkpoint_dir, training.steps)
    prompt_tokens = token_caps.prompt["tokens"] if token_caps else DEFAULT_PROMPT_TOKENS

    parameters = model_parameters(model_path) or probe.parameters
    if parameters is None:
        print(f"the free GPU memory before each verl segment is checked for vLLM's share alone: the parameter count "
              f"of {model_path} (for the FSDP state beside it) is neither in its config.json nor in "
              f"models.<m>.probe.parameters", file=sys.stderr, flush=True)

    def train_to(settings: GRPOSettings) -> None:
        # vLLM's share and, beside it, verl's FSDP state and context (train_memory's sum, which the dry run checked
        # against the declared GPUs); first the GPUs the job got against the declared probe.gpu_memory_gb
        check_free_in_subprocess(rollout_engine.gpu_memory_utilization,
                                 "verl's rollout (vLLM at the model's rollout.gpu_memory_utilization)",
                                 beside=beside_rollout_bytes(parameters, gpus) if parameters else 0,
                                 gpu_memory_gb=probe.gpu_memory_gb, model=model_path)
        stops = write_rollout_generation_config(model_path, files.generation_config_dir)
        print(f"rollouts stop at token ids {stops} ({files.generation_config_dir})", file=sys.stderr, flush=True)
        run_verl(run_overrides(model_path, settings, seed, gpus=gpus, cpus=cpus, files=files, attention=attention,
                               rollout_engine=rollout_engine, prompt_tokens=prompt_tokens,
                               experiment=f"{method.name}-seed{seed}", validation=bool(validation)), state_dir)

    steps_per_round = None
    if method.family.needs_probe:
        steps_per_round = policy_driver(job).selector.steps_per_round

        def score_round(weights: str, index: int, out: Path) -> None:
            run_round_process(RoundSpec(str(files.job_file), training, index, weights, rollout_engine, probe,
                                        prompt_tokens, str(out), cpus), state_dir / f"round_{index}.spec.json")

        run_segments(job=job, training=training, model_path=model_path, checkpoint_dir=files.checkpoint_dir,
                     state_dir=state_dir, score_round=score_round, train_to=train_to, actor_dir=final_actor_dir)
    elif not final.is_dir():
        train_to(training)
    write_metrics(state_dir, out_metrics, training.steps, method.name, seed, attention, steps_per_round)
    # the trainer removes superseded checkpoints after each save; this also covers a run that verl finished before
    for removed in remove_superseded_checkpoints(files.checkpoint_dir):
        print(f"removed {removed}: older than the checkpoint verl's tracker names", file=sys.stderr, flush=True)
    keep_final_model(final, Path(out_model))
    return {"attention": attention}
