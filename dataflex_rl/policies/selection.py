"""Selection policies: a 0/1 mask over responses (Eq. 1 of DataFlex-RL).

A dropped response loses its PG and KL terms but stays in the 1/(G·K) denominator. Whether the kept responses'
advantages are recomputed over the kept subset (GFPO, PODS), whether a dropped response keeps its KL term (the
released code) and the matched-random control are options of the registry (see `registry.py`), not of each policy.
Each policy's signal, parameters, defaults and ranges are declared by its entry in `catalogue.py`; the registry passes
them checked and resolved.

Ties are broken deterministically by position within the group (a stable sort), so a policy is a pure function of
the batch.
"""
from __future__ import annotations

import torch
from torch import Tensor

from .batch import GroupBatch
from .catalogue import RELEASED, rounded_count
from .registry import policy


def _count(fraction: float, total: int, semantics: str) -> int:
    """How many of `total` a fraction keeps (at least 1), rounded as `catalogue.rounded_count` says: the released code
    uses Python's round() (halves to even: 0.5·5 → 2); the paper semantics rounds halves up (0.5·5 → 3), so "the top
    50%" of an odd count keeps the larger half."""
    return max(1, min(total, rounded_count(fraction, total, semantics)))


def _top_mask(scores: Tensor, keep: Tensor | int) -> Tensor:
    """Mask of the `keep` highest scores in each row (ties: earlier position first); keep is an int or `[rows, 1]`."""
    order = torch.sort(scores, dim=1, descending=True, stable=True).indices
    rank = torch.empty_like(order)
    rank.scatter_(1, order, torch.arange(scores.shape[1]).expand_as(order).contiguous())
    return (rank < keep).to(scores.dtype)


@policy("difffilter")
def difficulty_band(batch: GroupBatch, low: float, high: float) -> Tensor:
    """Keep a group only if its solve rate lies strictly inside (low, high) — DAPO-style dynamic sampling filter.

    Groups that are all solved or all failed have zero advantage; the band also drops near-saturated groups.
    """
    q = batch.solve_rate()  # [G]
    keep = (q > low) & (q < high)
    return keep[:, None].expand_as(batch.rewards).to(batch.rewards.dtype)  # mask [G, K]


_VARIANCE_TIE = 1e-12


def max_variance_subset(rewards: Tensor, keep: int) -> Tensor:
    """Mask `[G, K]` of the `keep`-subset of each group whose rewards have the largest variance (PODS, Alg. max-var).

    PODS (arXiv:2504.13818) shows the optimum is the a lowest plus the (keep − a) highest rewards for some a: sort
    each group once, then scan a = 0..keep with prefix sums of r and r² (population variance; for a fixed subset
    size the unbiased one has the same argmax). Ties (within 1e-12): the smallest a wins; among equal rewards the
    stable sort takes the earlier positions as "lowest" and the later ones as "highest", as the released code does.
    """
    groups, rollouts = rewards.shape
    if keep < 1:
        raise ValueError(f"maxvar must keep at least 1 response per group, got keep={keep}")
    if keep >= rollouts:
        return torch.ones_like(rewards)
    values, order = torch.sort(rewards.to(torch.float64), dim=1, stable=True)
    zero = torch.zeros(groups, 1, dtype=torch.float64)
    prefix = torch.cat([zero, values.cumsum(dim=1)], dim=1)            # [G, K+1]
    prefix_sq = torch.cat([zero, values.square().cumsum(dim=1)], dim=1)
    variances = []
    for low in range(keep + 1):
        high = keep - low
        total = prefix[:, low] + prefix[:, rollouts] - prefix[:, rollouts - high]
        total_sq = prefix_sq[:, low] + prefix_sq[:, rollouts] - prefix_sq[:, rollouts - high]
        variances.append(total_sq / keep - (total / keep).square())
    variances = torch.stack(variances, dim=1)
    # Equal variances reached through different prefix sums may differ in the last bit: treat them as ties.
    near_best = variances >= variances.max(dim=1, keepdim=True).values - _VARIANCE_TIE
    best_low = near_best.to(torch.int8).argmax(dim=1, keepdim=True)  # the first (smallest a) of the tied best
    position = torch.arange(rollouts).expand(groups, rollouts)           # position in sorted order
    chosen_sorted = (position < best_low) | (position >= rollouts - (keep - best_low))
    mask = torch.zeros_like(rewards)
    mask.scatter_(1, order, chosen_sorted.to(rewards.dtype))
    return mask


@policy("maxvar")
def max_variance(batch: GroupBatch, keep: int | None, semantics: str) -> Tensor:
    """PODS max-variance down-sampling: keep the `keep` responses of each group with the largest reward variance.

    keep defaults to 3 of K = 5 (the paper's Table 1). The released scripts set keep_fraction = 0.5, which their
    Python round() turns into 2 of 5; under `semantics: dataflex_released` keep therefore defaults to
    round(0.5·K). PODS trains on the down-sampled group, so advantages are recomputed over it (registry option
    `advantages`; the released code keeps the full-group advantages).
    """
    rollouts = batch.rewards.shape[1]
    if keep is None:
        keep = round(0.5 * rollouts) if semantics == RELEASED else min(3, rollouts)
    return max_variance_subset(batch.rewards, int(keep))


@policy("gfpo")
def group_filtered(batch: GroupBatch, keep: int, metric: str) -> Tensor:
    """GFPO (arXiv:2508.09726): keep the top `keep` responses of each group by a filter metric.

    metric "efficiency": reward per token r/L (the paper's Table 1 rule, top 3 of 5); "length": the shortest.
    GFPO trains on the filtered group, so advantages are recomputed over it (registry option `advantages`).
    A group of at most `keep` responses is kept whole.
    """
    scores = batch.efficiency() if metric == "efficiency" else -batch.lengths.to(batch.rewards.dtype)
    return _top_mask(scores.to(batch.rewards.dtype), int(keep))


@policy("topk")
def top_advantage(batch: GroupBatch, fraction: float, scope: str, semantics: str) -> Tensor:
    """Keep the top `fraction` of responses by mean |A| (a_gk).

    scope "per_group": the top fraction of every group (the paper's rule, default under `semantics: paper`);
    "global": the top fraction of the whole batch, as the released code ran (default under dataflex_released).
    Counts: see `_count` (halves round up under paper, to even under released). With all-zero advantages every
    response ties and the earliest positions are kept.
    """
    a = batch.mean_abs_advantage()
    groups, rollouts = a.shape
    if scope == "per_group":
        return _top_mask(a, _count(fraction, rollouts, semantics))
    return _top_mask(a.reshape(1, -1), _count(fraction, groups * rollouts, semantics)).view(groups, rollouts)
