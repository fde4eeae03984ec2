"""The rewards of a batch of rollouts: the verifier's verdict, or a noisy_rewards regime's draw for a marked prompt."""
from __future__ import annotations

import torch

from dataflex_rl.regimes.noisy_rewards import noisy_reward
from dataflex_rl.verify.verifiers import reward


def rollout_rewards(responses: list[str], items: list[dict], noise_p: list[float | None], rollouts: int, seed: int,
                    step: int | str) -> torch.Tensor:
    """[G, K] binary rewards: response r belongs to prompt r // K. A prompt the noisy_rewards regime marked (its
    `noise_p` is not None) gets Bernoulli(p) rewards unrelated to the response, drawn per (seed, prompt, step,
    rollout), so a resumed run draws the same ones; every other prompt gets its verifier's verdict."""
    values = []
    for index, response in enumerate(responses):
        item, p = items[index // rollouts], noise_p[index // rollouts]
        values.append(reward(response, item) if p is None
                      else noisy_reward(seed, item["id"], step, index % rollouts, p))
    return torch.tensor(values, dtype=torch.float32).view(-1, rollouts)
