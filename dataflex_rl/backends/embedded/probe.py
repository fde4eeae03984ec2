"""The embedded backend's probe for prompt-selection rounds (dataflex_rl.prompt_selection.round.Probe): sampled
rollouts of corpus rows with the run's rewards, and per-group gradients of the probe loss on the training model."""
from __future__ import annotations

from typing import Sequence

import torch
from torch import Tensor

from dataflex_rl.backends.embedded.generation import decode, response_texts
from dataflex_rl.backends.embedded.rewards import rollout_rewards
from dataflex_rl.prompt_selection.gradients import ParameterLayout, group_gradients, summed_gradient
from dataflex_rl.prompt_selection.round import ProbeRollouts, stream_seed

# Prompts decoded at once: bounds the KV cache of a round's M·k_r rollouts.
DECODE_PROMPTS = 64


class EmbeddedProbe:
    def __init__(self, trainer, temperature: float):
        """`trainer`: the run's EmbeddedGRPOTrainer (its model, tokenizer, rendered prompts, items, reward noise,
        seed, settings and optimiser); `temperature`: the scoring rollouts' sampling temperature."""
        self.trainer, self.temperature = trainer, temperature
        self.layout = ParameterLayout.of(trainer.model)

    def rollouts(self, rows: Sequence[int], samples: int, stream: str, noisy: bool) -> ProbeRollouts:
        t = self.trainer
        generator = torch.Generator().manual_seed(stream_seed(t.seed, stream))
        t.model.eval()
        parts, rewards = [], []
        for start in range(0, len(rows), DECODE_PROMPTS):
            chunk = list(rows[start:start + DECODE_PROMPTS])
            generated = decode(t.model, [t.prompt_tokens[r] for r in chunk], max_new_tokens=t.settings.max_new_tokens,
                               eos_id=t.tokenizer.eos_token_id, pad_id=t.tokenizer.pad_token_id, repeats=samples,
                               generator=generator, temperature=self.temperature)
            noise = [t.noise_p[r] if noisy else None for r in chunk]
            rewards.append(rollout_rewards(response_texts(t.tokenizer, generated), [t.items[r] for r in chunk], noise,
                                           samples, t.seed, stream))
            parts.append(generated)
        return ProbeRollouts(torch.cat(rewards), parts)

    def _parts(self, rollouts: ProbeRollouts):
        start = 0
        for generated in rollouts.tokens:
            groups = generated.prompt_ids.shape[0]
            yield generated, rollouts.rewards[start:start + groups]
            start += groups

    def group_gradients(self, rollouts: ProbeRollouts, aggregation: str) -> Tensor:
        return torch.cat([group_gradients(self.trainer.model, generated, rewards, aggregation=aggregation,
                                          method="vmap")
                          for generated, rewards in self._parts(rollouts)])

    def summed_gradient(self, rollouts: ProbeRollouts, aggregation: str) -> Tensor:
        return sum(summed_gradient(self.trainer.model, generated, rewards, aggregation=aggregation)
                   for generated, rewards in self._parts(rollouts))

    def module_slices(self) -> ParameterLayout:
        return self.layout

    def adam_second_moment(self) -> tuple[Tensor, int] | None:
        optimiser = self.trainer.optimiser
        parameters = [p for p in self.trainer.model.parameters() if p.requires_grad]
        states = [optimiser.state.get(p) for p in parameters]
        if not states or any(not state for state in states):
            return None
        return torch.cat([s["exp_avg_sq"].reshape(-1).float() for s in states]), int(states[0]["step"])
