"""The backend-neutral batch every data policy reads, and the signals the policies are built from.

Both backends fill a `GroupBatch` from their own rollouts; the signals are defined once here so that, e.g., "solve rate"
means the same thing to every policy and on every backend.
"""
from __future__ import annotations

from dataclasses import dataclass

import torch
from torch import Tensor

# A response counts as solved when its reward exceeds this; partial credit of exactly 0.5 is not a solve.
SOLVED_THRESHOLD = 0.5


@dataclass(frozen=True)
class GroupBatch:
    """G prompt groups of K responses each, padded to L tokens.

    rewards, lengths: [G, K]; token_mask, advantages, old_logprobs: [G, K, L]; domains, prompt_ids: one per group.
    `lengths` must equal `token_mask.sum(-1)`: a mismatch means the backend padded or truncated inconsistently.
    """

    rewards: Tensor
    lengths: Tensor
    token_mask: Tensor
    advantages: Tensor
    old_logprobs: Tensor
    domains: tuple[str, ...]
    prompt_ids: tuple[str, ...]

    def __post_init__(self) -> None:
        object.__setattr__(self, "domains", tuple(self.domains))
        object.__setattr__(self, "prompt_ids", tuple(self.prompt_ids))
        if self.rewards.dim() != 2:
            raise ValueError(f"rewards must be [G, K], got shape {tuple(self.rewards.shape)}")
        groups, rollouts = self.rewards.shape
        if self.lengths.shape != self.rewards.shape:
            raise ValueError(f"lengths must be [G, K] = {(groups, rollouts)}, got {tuple(self.lengths.shape)}")
        mask_shape = tuple(self.token_mask.shape)
        if len(mask_shape) != 3 or mask_shape[:2] != (groups, rollouts) or mask_shape[2] < 1:
            raise ValueError(f"token_mask must be [G, K, L>=1] with G, K = {(groups, rollouts)}, "
                             f"got {mask_shape}")
        for name in ("advantages", "old_logprobs"):
            if getattr(self, name).shape != self.token_mask.shape:
                raise ValueError(f"{name} must match token_mask {tuple(self.token_mask.shape)}, "
                                 f"got {tuple(getattr(self, name).shape)}")
        for name in ("domains", "prompt_ids"):
            if len(getattr(self, name)) != groups:
                raise ValueError(f"{name} must have one entry per group ({groups}), got {len(getattr(self, name))}")
        if not torch.equal(self.lengths.to(self.token_mask.dtype), self.token_mask.sum(dim=-1)):
            raise ValueError("lengths must equal token_mask.sum(-1) for every response")

    def solve_rate(self) -> Tensor:
        """q_g: fraction of the group's responses with reward > 0.5, `[G]`."""
        return (self.rewards > SOLVED_THRESHOLD).to(self.token_mask.dtype).mean(dim=1)

    def mean_abs_advantage(self) -> Tensor:
        """a_gk: mean |A| over the response's own tokens, `[G, K]` (0 for an empty response)."""
        total = (self.advantages.abs() * self.token_mask).sum(dim=-1)
        return total / self.lengths.to(total.dtype).clamp_min(1.0)

    def token_prob(self) -> Tensor:
        """π_gkl: the sampling policy's probability of each generated token, `[G, K, L]` (0 on padding)."""
        return self.old_logprobs.exp() * self.token_mask

    def efficiency(self) -> Tensor:
        """r/L: reward per generated token, `[G, K]`; an empty response divides by 1 rather than 0."""
        return self.rewards / self.lengths.to(self.rewards.dtype).clamp_min(1.0)
