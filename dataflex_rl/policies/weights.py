"""A policy's output turned into the loss weights `grpo.grpo_loss` expects: Eq. 1 for a selection's 0/1 mask,
Eq. 2 for a reweighting's non-negative weights.

Every policy meets the loss through these two tested conversions, including their degenerate cases.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import torch
from torch import Tensor

from .catalogue import NORMALIZE_MODES


@dataclass(frozen=True)
class LossWeights:
    """Per-token weights for the PG and KL terms `[G, K, L]` (zero on padding), plus what the trainer should log.

    kept_fraction: share of responses whose PG term the policy kept (mask mean for a selection, share of responses
    with positive weight for a reweighting).
    advantages: None, or token advantages `[G, K, L]` (zero on padding and on dropped responses) that the trainer
    must use instead of `batch.advantages` — set by a selection that recomputes GRPO advantages over the kept
    responses of each group (GFPO, PODS).
    """

    pg: Tensor
    kl: Tensor
    kept_fraction: float
    info: dict[str, Any] = field(default_factory=dict)
    advantages: Tensor | None = None


def check_mask(mask: Tensor, groups_rollouts: tuple[int, ...]) -> None:
    """Refuse anything but a `[G, K]` mask of 0s and 1s."""
    if tuple(mask.shape) != tuple(groups_rollouts):
        raise ValueError(f"a selection mask must be [G, K] = {tuple(groups_rollouts)}, got {tuple(mask.shape)}")
    if not ((mask == 0) | (mask == 1)).all():
        raise ValueError("a selection mask must contain only 0 and 1")


def selection_weights(
    mask: Tensor, token_mask: Tensor, drop_kl: bool = True, advantages: Tensor | None = None
) -> LossWeights:
    """A 0/1 response mask → loss weights: pg = kl = m·token_mask (Eq. 1; a drop removes both terms).

    `drop_kl=False` reproduces the released DataFlex-RL code, where a dropped response keeps its KL term.
    `advantages` (`[G, K]` or `[G, K, L]`), when given, are passed on zeroed on padding and on dropped responses.
    Nothing is renormalised: a dropped response stays in the 1/(G·K) denominator, so the step shrinks.
    """
    check_mask(mask, tuple(token_mask.shape[:2]))
    pg = mask.to(token_mask.dtype)[..., None] * token_mask
    kl = pg.clone() if drop_kl else token_mask.clone()
    if advantages is not None:
        if tuple(advantages.shape) == tuple(mask.shape):
            advantages = advantages[..., None]
        if advantages.dim() != 3 or advantages.shape[:2] != mask.shape or advantages.shape[2] not in (
                1, token_mask.shape[2]):
            raise ValueError(f"advantages must be [G, K] or [G, K, L] for token_mask {tuple(token_mask.shape)}, "
                             f"got {tuple(advantages.shape)}")
        if not torch.isfinite(advantages).all():
            raise ValueError("recomputed advantages must be finite")
        advantages = advantages.to(token_mask.dtype) * pg
    kept = float(mask.to(token_mask.dtype).mean())
    return LossWeights(pg=pg, kl=kl, kept_fraction=kept, info={"all_dropped": kept == 0.0}, advantages=advantages)


def selection_diagnostics(mask: Tensor, used_advantages: Tensor, token_mask: Tensor) -> dict[str, Any]:
    """Counts the trainer logs, so that a step with no policy-gradient signal is never silent."""
    kept = mask > 0
    per_group = kept.sum(dim=1)
    signal = ((used_advantages * token_mask).abs().sum(dim=-1) > 0) & kept
    return {
        "kept_responses": int(kept.sum()),
        "kept_groups": int((per_group > 0).sum()),
        "single_kept_groups": int((per_group == 1).sum()),
        # kept responses whose advantage is zero on every token: they carry KL but no PG signal
        "zero_advantage_kept": int((kept & ~signal).sum()),
    }


def reweighting_weights(weights: Tensor, token_mask: Tensor, normalize: str = "batch_mean") -> LossWeights:
    """Non-negative weights ([G, K, L] or [G, K]) → loss weights: pg = w·token_mask, kl = token_mask (Eq. 2).

    normalize (over what the weights are rescaled; the KL term is never weighted):
    - "batch_mean": pg's mean over the batch's valid tokens is 1 (the released code's rule for token weights, AR).
    - "response_mean": the mean over responses of each response's token-mean weight is 1 — for `[G, K]` weights
      w / mean(w) over all G·K responses, the released code's rule for per-response weights. Under Eq. 1 this keeps
      the loss on the baseline's scale exactly. For `[G, K, L]` weights the mean runs over non-empty responses.
    - "none": the raw weights.
    Weights that are zero on every valid token carry no direction, so they fall back to uniform 1
    (info["degenerate_weights"]).
    """
    if normalize not in NORMALIZE_MODES:
        raise ValueError(f"unknown normalize mode {normalize!r}; known: {', '.join(NORMALIZE_MODES)}")
    per_response = weights.shape == token_mask.shape[:2]
    if per_response:
        weights = weights[..., None]
    groups_rollouts, max_len = token_mask.shape[:2], token_mask.shape[2]
    if weights.dim() != 3 or weights.shape[:2] != groups_rollouts or weights.shape[2] not in (1, max_len):
        raise ValueError(f"reweighting weights must be [G, K, L] or [G, K] for token_mask {tuple(token_mask.shape)}, "
                         f"got {tuple(weights.shape)}")
    if not torch.isfinite(weights).all() or (weights < 0).any():
        raise ValueError("reweighting weights must be finite and non-negative")
    weights = weights.to(token_mask.dtype)
    pg = weights.expand_as(token_mask) * token_mask
    degenerate = bool(pg.sum() == 0)
    if degenerate:
        weights, pg = torch.ones_like(token_mask[..., :1]), token_mask.clone()
        per_response = True
    if pg.sum() > 0:  # otherwise every response is empty: nothing to weigh, and no 0/0
        if normalize == "batch_mean":
            pg = pg * (token_mask.sum() / pg.sum())
        elif normalize == "response_mean":
            if per_response and weights.shape[2] == 1:
                pg = pg / weights.mean()
            else:
                lengths = token_mask.sum(dim=-1)
                nonempty = lengths > 0
                token_means = pg.sum(dim=-1) / lengths.clamp_min(1.0)
                pg = pg * (nonempty.sum() / token_means[nonempty].sum())
    kept = 1.0 if degenerate else float((weights.expand_as(token_mask).amax(dim=-1) > 0).to(token_mask.dtype).mean())
    return LossWeights(pg=pg, kl=token_mask.clone(), kept_fraction=kept, info={"degenerate_weights": degenerate})
