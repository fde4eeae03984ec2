"""Prompt selection on the verl backend: the released merge-then-score loop (docs/prompt_selection.md, "On the verl
backend", says why this design).

A prompt-selection run is trained in segments, one per selection round r (I = steps_per_round steps each). Before
segment r the train job, holding all of its GPUs while no verl process runs:
1. takes the current weights: the base model (`path`) for round 0, else the checkpoint verl saved at step r·I merged
   into a Hugging Face folder (merge.py, verl's own merger);
2. runs round r with the shared PromptSelector and the method's policy on the backend's probe (probe.VerlProbe:
   rollouts from vLLM with the training rollout's settings, probe gradients on the HF model), exactly as the
   embedded trainer does at its round's first step;
3. writes the round (the selector's state: the round and its kept rows; and its metrics) to `round_<r>.pt`.
Then verl resumes from its checkpoint and trains to step min((r+1)·I, steps); the plugin's trainer reads the round
file at the segment's first step and draws the kept rows (trainer.py). A rerun finds the rounds and checkpoints
already written and continues where the run stopped.
"""
from __future__ import annotations

import shutil
import sys
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any, Callable, Mapping

import pandas as pd
import torch

from dataflex_rl.artefacts.atomic import atomic_path
from dataflex_rl.artefacts.train_state import load_train_state
from dataflex_rl.backends.verl.checkpoints import tracked_step
from dataflex_rl.backends.verl.job import VerlRunJob
from dataflex_rl.backends.verl.probe_settings import check_selection_options
from dataflex_rl.policies.driver import PolicyDriver
from dataflex_rl.prompt_selection.selector import RowLabels
from dataflex_rl.training.recipe import GRPOSettings
from dataflex_rl.regimes.low_utility import is_easy

ROUNDS_FOLDER = "selection_rounds"  # in the run's state folder
ROUND_WEIGHTS = "round_weights"  # the merged weights of the round being scored, in the state folder


def round_file(rounds_dir: str | Path, index: int) -> Path:
    return Path(rounds_dir) / f"round_{index}.pt"


def write_round(path: Path, result: Mapping[str, Any]) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    with atomic_path(path) as tmp:
        torch.save(dict(result), tmp)


def read_round(path: Path) -> dict:
    """Round file `path` (in the run's state folder's ROUNDS_FOLDER), read without running code (UntrustedStateError
    for a file naming anything beyond tensors and numbers)."""
    return load_train_state(path, Path(path).parent.parent)


def row_labels(frame: pd.DataFrame, target_domain: str | None) -> RowLabels:
    """The round metrics' labels of the corpus rows in verl's parquet schema (dataset.py): domain, reward-noised
    (`extra_info.noise_p` set), a low-utility regime's easy prompt (its metadata)."""
    infos = list(frame["extra_info"])
    return RowLabels(list(frame["domain"]), [info["noise_p"] is not None for info in infos],
                     [is_easy({"metadata": info["metadata"]}) for info in infos], target_domain)


def run_rows(job: VerlRunJob, columns: list[str] | None = None) -> tuple[pd.DataFrame, int]:
    """The rows a run's rounds see, in verl's schema: its train file's, then its own validation rows where its prompt
    selection has them (job.validation_file); and how many are the corpus's."""
    corpus = pd.read_parquet(job.train_file, columns=columns)
    if not job.validation_file:
        return corpus, len(corpus)
    validation = pd.read_parquet(job.validation_file, columns=columns)
    return pd.concat([corpus, validation], ignore_index=True), len(corpus)


def policy_driver(job: VerlRunJob) -> PolicyDriver:
    """The run's policy driver over the rows of its train file (and, after them, its own validation rows, from which
    the selector draws its validation prompts, as on the embedded backend), with the round metrics' labels."""
    frame, corpus_rows = run_rows(job, ["domain", "extra_info"])
    return PolicyDriver(job.method, list(frame["domain"][:corpus_rows]), job.seed,
                        row_labels(frame, job.target_domain), job.validation_draws)


def run_round(job: VerlRunJob, training: GRPOSettings, index: int, boundary) -> dict[str, Any]:
    """Round `index` on the weights of `boundary` (probe.RoundBoundary): the selector's state after it (the round's
    kept rows) and the round's metrics (the columns the embedded run writes on the round's first step)."""
    from dataflex_rl.backends.verl.probe import VerlProbe

    errors = check_selection_options(job.method)
    if errors:
        raise ValueError(f"method {job.method.name!r}: {'; '.join(errors)}")
    driver = policy_driver(job)
    probe = VerlProbe(boundary, driver.score_temperature(training.temperature))
    driver.draw(training.prompts_per_step, index * driver.selector.steps_per_round, probe)
    return {"selection": driver.selector.state_dict(), "metrics": driver.selector.metrics(training.rollouts)}


@dataclass(frozen=True)
class Segment:
    """Round `index` and the verl steps it trains: global steps start + 1 … end."""

    index: int
    start: int
    end: int


def segments(steps: int, steps_per_round: int) -> list[Segment]:
    return [Segment(index, start, min(start + steps_per_round, steps))
            for index, start in enumerate(range(0, steps, steps_per_round))]


def run_segments(*, job: VerlRunJob, training: GRPOSettings, model_path: str, checkpoint_dir: Path, state_dir: Path,
                 score_round: Callable[[str, int, Path], None], train_to: Callable[[GRPOSettings], None],
                 actor_dir: Callable[[Path, int], Path]) -> None:
    """Every segment verl's checkpoints have not reached (checkpoints.tracked_step: a requeued job skips the finished
    ones without starting verl): its round (unless its file is there), then verl to its end.
    `score_round(weights, index, out)`: round `index` on the weights (a Hugging Face folder or hub name) written to
    the round file `out` (round_job.py runs it in its own process); `train_to(settings)`: verl run to
    `settings.steps`; `actor_dir(checkpoint_dir, step)`: verl's actor checkpoint of a step."""
    from dataflex_rl.backends.verl.merge import merge_checkpoint

    steps_per_round = policy_driver(job).selector.steps_per_round
    for segment in segments(training.steps, steps_per_round):
        if (tracked_step(checkpoint_dir) or 0) >= segment.end:
            continue
        path = round_file(state_dir / ROUNDS_FOLDER, segment.index)
        if not path.exists():
            weights = model_path
            merged = state_dir / ROUND_WEIGHTS
            if segment.start:
                shutil.rmtree(merged, ignore_errors=True)
                merge_checkpoint(actor_dir(checkpoint_dir, segment.start), merged)
                weights = str(merged)
            print(f"selection round {segment.index}: scoring on {weights}", file=sys.stderr, flush=True)
            score_round(weights, segment.index, path)
            shutil.rmtree(merged, ignore_errors=True)
        train_to(replace(training, steps=segment.end))


def round_metrics(state_dir: Path) -> dict[int, dict[str, Any]]:
    """The rounds' metrics by round index, from the round files in the state folder."""
    folder = Path(state_dir) / ROUNDS_FOLDER
    return {int(path.stem.split("_")[1]): read_round(path)["metrics"] for path in sorted(folder.glob("round_*.pt"))}
