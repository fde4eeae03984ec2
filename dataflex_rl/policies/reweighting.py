"""Reweighting policies: non-negative weights on responses or tokens (Eq. 2 of DataFlex-RL).

The registry zeroes padding, rescales per the `normalize` option (batch mean 1 over valid tokens by default; under
`semantics: dataflex_released` per-response weights are rescaled to mean 1 over responses, token weights over
tokens, as the released code did) and leaves the KL term unweighted. Each policy's signal, parameters, defaults and
ranges are declared by its entry in `catalogue.py`; the registry passes them checked and resolved.
"""
from __future__ import annotations

import torch
from torch import Tensor

from .batch import GroupBatch
from .catalogue import RELEASED
from .registry import policy


@policy("softmax")
def advantage_softmax(batch: GroupBatch, temperature: float) -> Tensor:
    """w_gk ∝ exp(a_gk / T): responses with larger mean |A| count more.

    The softmax runs over all G·K responses of the batch, not within each group, so a group of confident responses can
    outweigh another group; the registry's `normalize` option then rescales (batch mean 1 by default).
    """
    a = batch.mean_abs_advantage()  # [G, K]
    return torch.softmax(a.flatten() / temperature, dim=0).view_as(a)  # weights [G, K]


@policy("ar")
def advantage_reweighting(batch: GroupBatch, alpha: float) -> Tensor:
    """Advantage Reweighting (AR-Lopti, arXiv:2505.12929): w_gkl = α·π_gkl + (1 − α), per token.

    π is the sampling policy's token probability, so low-probability tokens — whose gradients otherwise dominate —
    are damped towards 1 − α. α = 0.5 is the DataFlex-RL Table 1 value; AR-Lopti's own is α = 0.2 (where it
    multiplies A directly, i.e. `normalize: none`).
    """
    return alpha * batch.token_prob() + (1.0 - alpha)  # weights [G, K, L]; padding is zeroed by the registry


@policy("per")
def prioritized_advantage(batch: GroupBatch, exponent: float, eps: float) -> Tensor:
    """Prioritised-experience-replay weighting (arXiv:1511.05952) on mean |A|: w_gk ∝ (a_gk + ε)^exponent.

    exponent 0 is uniform; larger exponents focus on high-|A| responses. ε = 1e-8 as the released code; with
    all-zero advantages every weight is ε^exponent, i.e. uniform after normalisation.
    """
    return (batch.mean_abs_advantage() + eps).pow(exponent)  # weights [G, K]


@policy("diffband")
def difficulty_band_weights(batch: GroupBatch, low_q: float, high_q: float, focus_weight: float,
                            semantics: str) -> Tensor:
    """focus_weight× (2×) for responses whose reward lies between the batch's reward quantiles low_q and high_q.

    Quantiles over all G·K rewards, linearly interpolated (torch.quantile). Paper: strictly between, q1 < r < q2.
    Released code: the closed band q1 ≤ r ≤ q2. With binary rewards the quartiles collapse to {0, 1}: the strict
    band is then always empty (every weight 1, i.e. the baseline), and the closed band holds every response when
    q1 = 0 and q2 = 1 (again uniform) or only the majority outcome when both quartiles are equal (e.g. ≥ 75% failures
    → q1 = q2 = 0 → the failures get 2×). A batch of one response gets weight 1.
    """
    rewards = batch.rewards
    if rewards.numel() <= 1:
        return torch.ones_like(rewards)
    flat = rewards.flatten().to(torch.float64)
    q1, q2 = torch.quantile(flat, torch.tensor([low_q, high_q], dtype=torch.float64)).tolist()
    r = rewards.to(torch.float64)
    band = (r >= q1) & (r <= q2) if semantics == RELEASED else (r > q1) & (r < q2)
    return torch.where(band, focus_weight, 1.0).to(rewards.dtype)  # weights [G, K]
