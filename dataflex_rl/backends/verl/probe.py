"""The verl backend's probe (dataflex_rl.prompt_selection.round.Probe), measured at a round boundary of the
merge-then-score loop (dataflex_rl.backends.verl.selection_rounds): the run's current weights as a Hugging Face causal
LM, rollouts from a sampler with the training rollout's settings, rewards from the training reward function.

- Rollouts: the corpus rows' prompts rendered as verl's dataset renders them (the chat template with the generation
  prompt; verl: utils/dataset/rl_dataset.py:259-261), `samples` responses each from the sampler (vLLM on a GPU:
  probe_rollouts.VllmSampler, one engine per group of the job's GPUs: round_engines), seeded by (run seed, stream) as
  on the embedded backend, and saved as each stream finishes (round_rollouts); each response decoded without
  special tokens and rewarded by `reward.compute_score`, as verl's reward manager does (verl:
  experimental/reward_loop/reward_manager/naive.py:55). A validation stream (`noisy` False) gets the verifier's
  reward whatever the row's noise mark.
- Gradients: probe_gradients on the model, on each of `devices` (the train job's GPUs: probe_shards deals the groups
  to one replica per device) for the backward passes after the sampler has released the GPUs, and back on the CPU
  afterwards.
- Adam's second moment: none. The optimiser state lives in the FSDP shards of verl's checkpoint; `precondition: adam`
  is refused at dry run and by the round runner on this backend (selection_rounds.check_selection_options).
"""
from __future__ import annotations

import sys
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol, Sequence

import torch
from torch import Tensor

from dataflex_rl.backends.verl import probe_shards, round_rollouts
from dataflex_rl.backends.verl.probe_gradients import GroupTokens
from dataflex_rl.backends.verl.reward import scores
from dataflex_rl.prompt_selection.gradients import ParameterLayout
from dataflex_rl.prompt_selection.round import ProbeRollouts, stream_seed
from dataflex_rl.prompt_selection.scores import Alignment


class Sampler(Protocol):
    def sample(self, prompts: Sequence[Sequence[int]], *, samples: int, temperature: float,
               seed: int) -> list[list[list[int]]]:
        """`samples` sampled responses (token ids) per prompt, drawn from `seed`, with the training rollout's
        settings (response length, nucleus, stop tokens)."""

    def release(self) -> None:
        """Free the GPU memory the sampler holds until its next `sample`."""


def render_prompt_ids(tokenizer, messages: Sequence[Any]) -> list[int]:
    """A verl row's prompt (chat messages) as the rollout sees it."""
    from verl.utils.tokenizer import normalize_token_ids

    return normalize_token_ids(tokenizer.apply_chat_template([dict(m) for m in messages], add_generation_prompt=True,
                                                             tokenize=True))


@dataclass
class RoundBoundary:
    """The run at a round boundary: the current weights as an HF causal LM (`model`, on the CPU between gradient
    passes), its tokenizer, the rollout sampler, the corpus rows in verl's parquet schema (dataset.py: `prompt`,
    `data_source`, `reward_model`, `extra_info`), the run's seed (its rollout streams and reward noise), the devices
    of the backward passes (one replica of the model each: probe_shards), the responses per backward
    (`micro_batch`), where the round's streams are saved as they finish (`rollouts_dir`: round_rollouts; None: not
    saved) and the processes that score their rewards (`reward_workers`)."""

    model: torch.nn.Module
    tokenizer: Any
    sampler: Sampler
    rows: Sequence[dict]
    seed: int
    devices: tuple[str, ...] = ("cpu",)
    micro_batch: int = 1
    rollouts_dir: Path | None = None
    reward_workers: int = 1
    prompt_ids: dict[int, list[int]] = field(default_factory=dict)

    def prompt(self, row: int) -> list[int]:
        if row not in self.prompt_ids:
            self.prompt_ids[row] = render_prompt_ids(self.tokenizer, self.rows[row]["prompt"])
        return self.prompt_ids[row]

    def rewards(self, rows: Sequence[int], responses: Sequence[Sequence[Sequence[int]]], noisy: bool) -> Tensor:
        """[N, K] the training reward of each row's responses (reward.scores: in `reward_workers` processes for a
        round's thousands)."""
        calls = []
        for row, group in zip(rows, responses, strict=True):
            item = self.rows[row]
            extra_info = dict(item["extra_info"]) if noisy else {**item["extra_info"], "noise_p": None}
            calls += [(item["data_source"], self.tokenizer.decode(response, skip_special_tokens=True),
                       item["reward_model"]["ground_truth"], extra_info) for response in group]
        rewards = scores(calls, seed=self.seed, workers=self.reward_workers)
        return torch.tensor(rewards, dtype=torch.float32).reshape(len(rows), -1)


class VerlProbe:
    def __init__(self, boundary: RoundBoundary, temperature: float):
        self.boundary, self.temperature = boundary, temperature
        self.layout = ParameterLayout.of(boundary.model)

    def rollouts(self, rows: Sequence[int], samples: int, stream: str, noisy: bool) -> ProbeRollouts:
        b = self.boundary
        prompts = [b.prompt(row) for row in rows]
        path = round_rollouts.stream_file(b.rollouts_dir, stream) if b.rollouts_dir else None
        saved = round_rollouts.load(path, rows, samples) if path else None
        if saved:
            print(f"selection round: {stream} rollouts reused from {path}", file=sys.stderr, flush=True)
            responses, rewards = saved
        else:
            responses = b.sampler.sample(prompts, samples=samples, temperature=self.temperature,
                                         seed=stream_seed(b.seed, stream))
            rewards = b.rewards(rows, responses, noisy)
            if path:
                round_rollouts.save(path, rows, responses, rewards)
        tokens = [GroupTokens(tuple(prompt), tuple(tuple(r) for r in group))
                  for prompt, group in zip(prompts, responses)]
        return ProbeRollouts(rewards.reshape(len(rows), samples), tokens)

    @contextmanager
    def _on_devices(self):
        b = self.boundary
        b.sampler.release()
        with probe_shards.replicas(b.model, b.devices) as models:
            yield models

    def _options(self) -> dict[str, Any]:
        return {"micro_batch": self.boundary.micro_batch, "pad_id": self.boundary.tokenizer.pad_token_id or 0}

    def group_gradients(self, rollouts: ProbeRollouts, aggregation: str) -> Tensor:
        with self._on_devices() as models:
            return probe_shards.group_gradients(models, rollouts.tokens, rollouts.rewards, aggregation=aggregation,
                                                **self._options())

    def summed_gradient(self, rollouts: ProbeRollouts, aggregation: str) -> Tensor:
        with self._on_devices() as models:
            return probe_shards.summed_gradient(models, rollouts.tokens, rollouts.rewards, aggregation=aggregation,
                                                **self._options())

    def group_alignment(self, rollouts: ProbeRollouts, aggregation: str, direction: Tensor,
                        normalise: bool) -> Alignment:
        with self._on_devices() as models:
            return probe_shards.group_alignment(models, rollouts.tokens, rollouts.rewards, direction,
                                                normalise_candidates=normalise, aggregation=aggregation,
                                                **self._options())

    def module_slices(self) -> ParameterLayout:
        return self.layout

    def adam_second_moment(self) -> None:
        return None
