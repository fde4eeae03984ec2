"""Backend-agnostic GRPO maths: group advantages, KL estimators, PPO-clip, and the paper's Eq. 1 aggregation.

The embedded trainer and the verl plugin both compute the loss here, so every data policy is compared under the same
arithmetic. The formulas follow verl 0.9.1 (`compute_grpo_outcome_advantage`, `kl_penalty`, vanilla policy loss) so a
run on either backend optimises the same objective. All per-token tensors are `[G, K, L]`: G prompt groups, K rollouts
per group, L padded response tokens.
"""
from __future__ import annotations

import torch
from torch import Tensor

# verl clamps the log-ratio before exponentiating so that one wild token cannot overflow the step.
_LOG_RATIO_CLAMP = 20.0


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
    logp: Tensor, old_logp: Tensor, advantages: Tensor, clip_low: float = 0.2, clip_high: float = 0.2
) -> tuple[Tensor, Tensor]:
    """Per-token PPO-clip loss max(−A·ρ, −A·clip(ρ, 1−clip_low, 1+clip_high)) and where the clipped branch is active.

    Returns `(loss, clipped)`; `clipped` is a bool tensor (the clipped branch strictly larger), for the clip fraction.
    """
    ratio = (logp - old_logp).clamp(-_LOG_RATIO_CLAMP, _LOG_RATIO_CLAMP).exp()
    unclipped = -advantages * ratio
    clipped_loss = -advantages * ratio.clamp(1.0 - clip_low, 1.0 + clip_high)
    return torch.maximum(unclipped, clipped_loss), clipped_loss > unclipped


def seq_mean_token_mean(per_token_loss: Tensor, token_mask: Tensor) -> Tensor:
    """Eq. 1 of the paper: L = 1/(G·K) Σ_g Σ_k (1/L_gk) Σ_l ℓ_gkl, with L_gk the response's true token count.

    Data-policy weights must already be inside `per_token_loss`: the denominators never see them, so a dropped
    response still counts in 1/(G·K) (the step shrinks rather than renormalising). An empty response adds 0.
    Padding is selected away rather than multiplied by 0, so a NaN there cannot leak in (verl PR #6349).
    """
    lengths = token_mask.sum(dim=-1)
    masked = torch.where(token_mask > 0, per_token_loss * token_mask, torch.zeros_like(per_token_loss))
    per_response = masked.sum(dim=-1) / lengths.clamp_min(1.0)
    return per_response.sum() / (per_response.shape[0] * per_response.shape[1])


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
) -> tuple[Tensor, dict[str, float]]:
    """GRPO loss with data-policy weights: ℓ = pg_weights·pg + kl_coef·kl_weights·kl, aggregated by Eq. 1.

    A selection mask m arrives as pg_weights = kl_weights = m (a drop removes both terms); a reweighting arrives as
    pg_weights = w, kl_weights = 1. Stats: `pg_loss` (the weighted PG part of the loss), `kl` and `clip_fraction`
    (unweighted means over valid tokens, for monitoring the policy itself).
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

    pg, clipped = ppo_clip_token_loss(logp, old_logp, advantages, clip_low, clip_high)
    kl = kl_penalty(logp, ref_logp, kl_kind)
    weighted_pg = pg_weights * pg
    loss = seq_mean_token_mean(weighted_pg + kl_coef * kl_weights * kl, token_mask)
    _require_finite("loss", loss)

    stats = {
        "pg_loss": float(seq_mean_token_mean(weighted_pg.detach(), token_mask)),
        "kl": _masked_mean(kl.detach(), token_mask),
        "clip_fraction": _masked_mean(clipped.to(token_mask.dtype), token_mask),
    }
    return loss, stats
