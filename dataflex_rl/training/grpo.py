"""Backend-agnostic GRPO maths: group advantages, KL estimators, PPO-clip, and verl's loss aggregations.

The embedded trainer and the verl plugin both compute the loss here, so every data policy is compared under the same
arithmetic. The formulas follow verl 0.9.1 (`compute_grpo_outcome_advantage`, `kl_penalty`, the vanilla policy loss
with its dual clip, `agg_loss`) so a run on either backend optimises the same objective; tests/test_verl_equivalence.py
checks each against verl itself. All per-token tensors are `[G, K, L]`: G prompt groups, K rollouts per group, L padded
response tokens.
"""
from __future__ import annotations

import torch
from torch import Tensor

# verl clamps the log-ratio before exponentiating so that one wild token cannot overflow the step.
_LOG_RATIO_CLAMP = 20.0
# verl's `loss_agg_mode` values (`aggregate_token_loss`).
LOSS_AGGREGATIONS = ("token-mean", "token-sum", "seq-mean-token-mean", "seq-mean-token-sum",
                     "seq-mean-token-sum-norm")


def _require_finite(name: str, value: Tensor) -> None:
    bad = ~torch.isfinite(value)
    if bad.any():
        count = f"{int(bad.sum())} of {value.numel()} values NaN or inf"
        detail = f"{float(value.detach()):g}" if value.numel() == 1 else count
        raise FloatingPointError(f"GRPO {name} is not finite ({detail}); refusing to take the step")


def group_advantages(rewards: Tensor, eps: float = 1e-6, normalize_by_std: bool = True) -> Tensor:
    """GRPO outcome advantage (r − group mean) / (group std + eps) for rewards `[G, K]`.

    The std is torch's unbiased one, as in verl. A group of one response has no spread to compare against, so verl
    treats it as mean 0, std 1; we do the same. A group whose rewards are all equal gets zeros: it carries no signal.
    """
    if rewards.dim() != 2:
        raise ValueError(f"rewards must be [G, K], got shape {tuple(rewards.shape)}")
    if rewards.shape[1] == 1:
        mean, std = torch.zeros_like(rewards), torch.ones_like(rewards)
    else:
        mean, std = rewards.mean(dim=1, keepdim=True), rewards.std(dim=1, keepdim=True)
    advantages = rewards - mean
    if normalize_by_std:
        advantages = advantages / (std + eps)
    _require_finite("advantages", advantages)
    return advantages


def kl_penalty(logp: Tensor, ref_logp: Tensor, kind: str = "low_var_kl") -> Tensor:
    """Per-token KL estimate between the policy and the reference, with verl's names and clamps."""
    if kind in ("kl", "k1"):
        return logp - ref_logp
    if kind == "abs":
        return (logp - ref_logp).abs()
    if kind in ("mse", "k2"):
        return 0.5 * (logp - ref_logp).square()
    if kind in ("low_var_kl", "k3"):
        # Schulman's k3 estimator; verl clamps both the log-ratio and the result to keep it bounded.
        kl = (ref_logp - logp).clamp(-20.0, 20.0)
        return (kl.exp() - kl - 1.0).clamp(-10.0, 10.0)
    raise ValueError(f"unknown KL kind {kind!r}; known: kl, k1, abs, mse, k2, low_var_kl, k3")


def ppo_clip_token_loss(
    logp: Tensor, old_logp: Tensor, advantages: Tensor, clip_low: float = 0.2, clip_high: float = 0.2,
    clip_ratio_c: float = 3.0,
) -> tuple[Tensor, Tensor]:
    """Per-token PPO-clip loss max(−A·ρ, −A·clip(ρ, 1−clip_low, 1+clip_high)) and where the clipped branch is active.

    Where A < 0 the loss is also capped at −A·clip_ratio_c: the dual clip (Ye et al. 2020) that verl's vanilla policy
    loss always applies (its `clip_ratio_c`, default 3), so a response far off-policy cannot push its ratio up without
    bound. On-policy (ρ = 1, one update per batch) it never binds.
    Returns `(loss, clipped)`; `clipped` is a bool tensor (the clipped branch strictly larger), for the clip fraction.
    """
    ratio = (logp - old_logp).clamp(-_LOG_RATIO_CLAMP, _LOG_RATIO_CLAMP).exp()
    unclipped = -advantages * ratio
    clipped_loss = -advantages * ratio.clamp(1.0 - clip_low, 1.0 + clip_high)
    loss = torch.maximum(unclipped, clipped_loss)
    dual_clipped = torch.minimum(loss, -advantages * clip_ratio_c)
    return torch.where(advantages < 0, dual_clipped, loss), clipped_loss > unclipped


def aggregate_token_loss(
    per_token_loss: Tensor,
    token_mask: Tensor,
    mode: str,
    *,
    global_batch_size: int | None = None,
    batch_num_tokens: int | Tensor | None = None,
    dp_size: int = 1,
    loss_scale_factor: float | None = None,
) -> Tensor:
    """A per-token loss `[..., L]` reduced to a scalar the way verl's `agg_loss` does, for each of its modes:

    - token-mean: Σ ℓ / batch_num_tokens (default: the valid tokens here), verl's default and the authors' runs;
    - token-sum: Σ ℓ;
    - seq-mean-token-mean: Σ_responses (1/L_i) Σ_l ℓ / global_batch_size: the paper's Eq. 1 when global_batch_size is
      G·K, so that a response whose mask is zeroed still counts in the denominator;
    - seq-mean-token-sum: Σ_responses Σ_l ℓ / global_batch_size;
    - seq-mean-token-sum-norm: that, divided by loss_scale_factor (default: the padded length L).

    global_batch_size defaults to the number of non-empty responses here. Every mode is multiplied by dp_size: each of
    dp_size data-parallel ranks aggregates its share against the global counts, and their gradients are averaged.
    Padding is selected away rather than multiplied by 0, so a NaN there cannot leak in (verl PR #6349); an empty
    response adds 0.
    """
    if mode not in LOSS_AGGREGATIONS:
        raise ValueError(f"unknown loss aggregation {mode!r}; known: {', '.join(LOSS_AGGREGATIONS)}")
    if dp_size > 1 and (
            (mode == "token-mean" and batch_num_tokens is None)
            or (mode.startswith("seq-mean") and global_batch_size is None)):
        raise ValueError(f"loss aggregation {mode!r} over {dp_size} data-parallel ranks needs the global "
                         f"{'batch_num_tokens' if mode == 'token-mean' else 'global_batch_size'}")
    lengths = token_mask.sum(dim=-1)
    masked = torch.where(token_mask > 0, per_token_loss * token_mask, torch.zeros_like(per_token_loss))
    if mode == "token-sum":
        return masked.sum() * dp_size
    if mode == "token-mean":
        tokens = lengths.sum().clamp_min(1.0) if batch_num_tokens is None else batch_num_tokens
        return masked.sum() / tokens * dp_size
    per_response = masked.sum(dim=-1)  # seq-mean-token-sum(-norm)
    if mode == "seq-mean-token-mean":
        per_response = per_response / lengths.clamp_min(1.0)
    responses = (lengths > 0).sum().clamp_min(1) if global_batch_size is None else global_batch_size
    loss = per_response.sum() / responses * dp_size
    if mode == "seq-mean-token-sum-norm":
        loss = loss / (token_mask.shape[-1] if loss_scale_factor is None else loss_scale_factor)
    return loss


def seq_mean_token_mean(per_token_loss: Tensor, token_mask: Tensor) -> Tensor:
    """Eq. 1 of the paper: L = 1/(G·K) Σ_g Σ_k (1/L_gk) Σ_l ℓ_gkl, with L_gk the response's true token count.

    Data-policy weights must already be inside `per_token_loss`: the denominators never see them, so a dropped
    response still counts in 1/(G·K) (the step shrinks rather than renormalising). An empty response adds 0.
    """
    groups, rollouts = per_token_loss.shape[:2]
    return aggregate_token_loss(per_token_loss, token_mask, "seq-mean-token-mean", global_batch_size=groups * rollouts)


def _masked_mean(values: Tensor, mask: Tensor) -> float:
    return float(torch.where(mask > 0, values * mask, torch.zeros_like(values)).sum() / mask.sum().clamp_min(1.0))


def grpo_loss(
    logp: Tensor,
    old_logp: Tensor,
    ref_logp: Tensor,
    advantages: Tensor,
    token_mask: Tensor,
    pg_weights: Tensor,
    kl_weights: Tensor,
    kl_coef: float = 1e-3,
    clip_low: float = 0.2,
    clip_high: float = 0.2,
    kl_kind: str = "low_var_kl",
    loss_aggregation: str = "seq-mean-token-mean",
) -> tuple[Tensor, dict[str, float]]:
    """GRPO loss with data-policy weights: ℓ = pg_weights·pg + kl_coef·kl_weights·kl, aggregated by `loss_aggregation`
    (`aggregate_token_loss`) over the whole step: global_batch_size = G·K, one update per batch.

    A selection mask m arrives as pg_weights = kl_weights = m (a drop removes both terms); a reweighting arrives as
    pg_weights = w, kl_weights = 1. A response whose KL weights are all 0 leaves the loss's token mask too, as the verl
    trainer's zeroed `response_mask` does: under the default seq-mean-token-mean (Eq. 1) that changes nothing, since it
    still counts in 1/(G·K); under token-mean its tokens leave the denominator. Stats: `pg_loss` (the weighted PG part
    of the loss), `kl` and `clip_fraction` (unweighted means over valid tokens, for monitoring the policy itself).
    """
    shape = logp.shape
    named = {"old_logp": old_logp, "ref_logp": ref_logp, "advantages": advantages, "token_mask": token_mask,
             "pg_weights": pg_weights, "kl_weights": kl_weights}
    if logp.dim() != 3:
        raise ValueError(f"logp must be [G, K, L], got shape {tuple(shape)}")
    for name, tensor in named.items():
        # Exact shapes only: a [G, K] tensor would silently broadcast against [G, K, L] along the wrong axis.
        if tensor.shape != shape:
            raise ValueError(f"{name} must have the shape of logp {tuple(shape)}, got {tuple(tensor.shape)}")
    _require_finite("advantages", advantages)
    # Backends may leave garbage (even NaN) in padded log-probs; zero it first so no NaN reaches the gradient.
    valid = token_mask > 0
    logp, old_logp, ref_logp = (torch.where(valid, t, torch.zeros_like(t)) for t in (logp, old_logp, ref_logp))
    in_loss = torch.where((kl_weights > 0).any(dim=-1, keepdim=True), token_mask, torch.zeros_like(token_mask))

    def aggregate(per_token: Tensor) -> Tensor:
        return aggregate_token_loss(per_token, in_loss, loss_aggregation, global_batch_size=shape[0] * shape[1])

    pg, clipped = ppo_clip_token_loss(logp, old_logp, advantages, clip_low, clip_high)
    kl = kl_penalty(logp, ref_logp, kl_kind)
    weighted_pg = pg_weights * pg
    loss = aggregate(weighted_pg + kl_coef * kl_weights * kl)
    _require_finite("loss", loss)

    stats = {
        "pg_loss": float(aggregate(weighted_pg.detach())),
        "kl": _masked_mean(kl.detach(), token_mask),
        "clip_fraction": _masked_mean(clipped.to(token_mask.dtype), token_mask),
    }
    return loss, stats
