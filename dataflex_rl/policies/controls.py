"""What a selection's loss can use besides its mask: the matched-random control and advantages recomputed over the
kept responses."""
from __future__ import annotations

import hashlib
import json

import torch
from torch import Tensor

from .catalogue import CONTROL_SCOPES
from .weights import check_mask

# The GRPO recipe's own constant (grpo.group_advantages): recomputed advantages use the same normalisation.
ADVANTAGE_EPS = 1e-6


def subset_group_advantages(rewards: Tensor, mask: Tensor, eps: float = ADVANTAGE_EPS) -> Tensor:
    """GRPO advantages recomputed over the kept responses of each group: (r − mean_kept) / (std_kept + eps), `[G, K]`.

    As GFPO ("trained on the filtered group") and PODS (the down-sampled subset is the group) define it. The std is
    the unbiased one over the kept responses, as in `grpo.group_advantages`, so keeping every response reproduces the
    recipe's advantages. Dropped responses get 0. A group with one kept response has nothing to be compared with and
    gets 0 (not verl's K = 1 convention of A = r, which would turn a lone survivor's raw reward into a signal); a
    group with none kept gets 0. Never NaN.
    """
    check_mask(mask, tuple(rewards.shape))
    keep = mask.to(rewards.dtype)
    count = keep.sum(dim=1, keepdim=True)
    mean = (rewards * keep).sum(dim=1, keepdim=True) / count.clamp_min(1.0)
    centred = (rewards - mean) * keep
    std = (centred.square().sum(dim=1, keepdim=True) / (count - 1.0).clamp_min(1.0)).sqrt()
    advantages = centred / (std + eps)
    return torch.where(count >= 2, advantages, torch.zeros_like(advantages)) * keep


def _control_generator(seed: int, prompt_ids: tuple[str, ...]) -> torch.Generator:
    """A generator seeded from (seed, the batch's prompt ids): deterministic per step, no global RNG."""
    digest = hashlib.sha256(json.dumps([int(seed), list(prompt_ids)]).encode()).digest()
    return torch.Generator().manual_seed(int.from_bytes(digest[:8], "little"))


def matched_random_mask(mask: Tensor, seed: int, prompt_ids: tuple[str, ...], scope: str = "batch") -> Tensor:
    """The matched-random control of a selection: keep as many responses as `mask` does, chosen uniformly at random.

    scope="batch": the same total over the batch, any responses (the only scope that is a real control for
    difffilter, which keeps whole groups); scope="per_group": the same count within every group.
    The randomness is derived from `seed` and the batch's prompt ids only, so a control is reproducible, independent
    of the rewards, and the same across methods on the same batch (common random numbers: two controls that keep
    n ≤ n' responses keep nested sets). A batch of the same prompts in the same order draws the same mask.
    """
    if scope not in CONTROL_SCOPES:
        raise ValueError(f"unknown control_scope {scope!r}; known: {', '.join(CONTROL_SCOPES)}")
    check_mask(mask, tuple(mask.shape))
    groups, rollouts = mask.shape
    noise = torch.rand(groups, rollouts, generator=_control_generator(seed, prompt_ids), dtype=torch.float64)
    if scope == "batch":
        order = noise.flatten().argsort()
        kept = torch.zeros(groups * rollouts, dtype=mask.dtype)
        kept[order[: int(mask.sum())]] = 1
        return kept.view(groups, rollouts)
    rank = noise.argsort(dim=1).argsort(dim=1)  # rank of each response's draw within its group
    return (rank < mask.sum(dim=1, keepdim=True)).to(mask.dtype)
