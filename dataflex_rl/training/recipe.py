"""The one GRPO recipe every method shares (the paper: K=5, KL 1e-3 low_var_kl, one update per batch).

`loss_aggregation` is verl's `loss_agg_mode`: "seq-mean-token-mean" over G·K responses is the paper's Eq. 1 (the
default); "token-mean" is what the authors' released runs used (verl's default, which they never overrode).
"""
from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class GRPOSettings:
    steps: int = 100
    prompts_per_step: int = 16
    rollouts: int = 5
    max_new_tokens: int = 8
    learning_rate: float = 1e-4
    kl_coef: float = 1e-3
    kl_kind: str = "low_var_kl"
    clip_low: float = 0.2
    clip_high: float = 0.2
    temperature: float = 1.0
    grad_clip: float = 1.0
    checkpoint_every: int = 25
    loss_aggregation: str = "seq-mean-token-mean"
