"""A step's loss inputs (PolicyDriver.weigh) → the fields verl 0.9.1's actor loss reads, as plain tensor maths.

verl's loss (verl/workers/utils/losses.py::ppo_loss) is the clipped PG term times `rollout_is_weights`, aggregated over
`response_mask`, plus kl_coef times the KL term aggregated over the same `response_mask`; the embedded loss
(dataflex_rl.training.grpo.grpo_loss) is pg·PG + kl_coef·kl·KL over the token mask. So:
- a token whose KL weight is 0 leaves `response_mask` (Eq. 1: a dropped response loses its PG and KL terms; with
  verl's `seq-mean-token-mean` and a global batch size of G·K it stays in the 1/(G·K) denominator, as in Eq. 1);
- the PG weight of a token that keeps its KL (pg/kl, where kl is 1) becomes `rollout_is_weights`: 0/1 for the released
  selection (KL kept), per-token for a reweighting, 1 for a policy that keeps everything;
- advantages a policy recomputed over its kept responses (GFPO, PODS) replace verl's.
verl can only switch a token's KL term on or off, and cannot keep a PG term whose token has left `response_mask`:
other weights are refused rather than approximated.
"""
from __future__ import annotations

from dataclasses import dataclass

import torch
from torch import Tensor

from dataflex_rl.policies.driver import LossInputs


@dataclass(frozen=True)
class VerlLossFields:
    """`[G, K, L]` tensors for verl's loss; `advantages` is None where verl's own GRPO advantages stand."""

    response_mask: Tensor
    rollout_is_weights: Tensor
    advantages: Tensor | None


def verl_loss_fields(loss: LossInputs) -> VerlLossFields:
    token_mask = loss.batch.token_mask
    valid = token_mask > 0
    kl_kept = (loss.kl > 0) & valid
    if not torch.all(~valid | (loss.kl == 0) | (loss.kl == 1)):
        raise ValueError("a KL weight other than 0 or 1 on a response token: verl's KL term is switched per token "
                         "by response_mask and cannot be weighted; the policy must give KL weights of 0 or 1")
    if torch.any(valid & ~kl_kept & (loss.pg != 0)):
        raise ValueError("a PG weight on a token whose KL weight is 0: verl drops both terms with response_mask; "
                         "the policy must give such tokens a PG weight of 0")
    recomputed = loss.weights.advantages is not None
    return VerlLossFields(response_mask=token_mask * kl_kept,
                          rollout_is_weights=torch.where(kl_kept, loss.pg, torch.zeros_like(loss.pg)),
                          advantages=loss.advantages if recomputed else None)
