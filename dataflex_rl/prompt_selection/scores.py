"""GradAlign's scoring and selection maths as pure functions of tensors: no model, no backend.

Reference: StigLidu/GradAlign at 7e252180 (`select/parallel/grpo_loss.py`, `grpo_grad_analyze_parallel.py`,
`select_data.py`); the line-by-line reading is in the project's research notes on GradAlign. A backend supplies the
per-group gradient vectors (dataflex_rl.prompt_selection.gradients for the embedded model); everything from there to
the kept set happens here, so a second backend only has to supply those vectors.
"""
from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

import torch
from torch import Tensor

from dataflex_rl.prompt_selection.candidates import GRADIENT_BLOCK

AGGREGATIONS = ("token_mean", "seq_mean")
# Symmetric pass rates a and 1 − a must tie in AccGreedy whatever float type carried them (0.4 and 0.6 differ from
# 0.5 by different amounts in float32); pass rates are k/K with K ≪ 1e6, so distinct rates never merge at 6 decimals.
_PASS_RATE_DECIMALS = 6


def _centred(rewards: Tensor) -> Tensor:
    """A = r − mean_k(r): the released scorer's advantage (`norm_adv_by_std=False`)."""
    if rewards.dim() != 2:
        raise ValueError(f"rewards must be [N, K], got shape {tuple(rewards.shape)}")
    return rewards - rewards.mean(dim=1, keepdim=True)


def probe_loss(logp: Tensor, rewards: Tensor, token_mask: Tensor, aggregation: str = "token_mean") -> Tensor:
    """Per-group probe loss [N]: the PG term −A·ρ at ρ = exp(logp − logp.detach()) = 1, without KL or clipping.

    Its gradient is REINFORCE with mean-centred advantages (the paper's Theorem 4.1 setting). `token_mean` divides the
    group's token sum by its valid token count, as the released `grpo_loss.py` L117 does; `seq_mean` averages the K
    responses' own token means (an empty response adds 0 and still counts in K). The two differ only when response
    lengths differ.
    """
    if logp.dim() != 3 or token_mask.shape != logp.shape or rewards.shape != logp.shape[:2]:
        raise ValueError(f"probe_loss needs logp and token_mask [N, K, L] and rewards [N, K]; got "
                         f"{tuple(logp.shape)}, {tuple(token_mask.shape)} and {tuple(rewards.shape)}")
    if aggregation not in AGGREGATIONS:
        raise ValueError(f"unknown aggregation {aggregation!r}; known: {', '.join(AGGREGATIONS)}")
    valid = token_mask > 0
    # Padding is selected away, not multiplied by 0, so garbage (even NaN) in padded log-probs cannot reach a gradient.
    logp = torch.where(valid, logp, torch.zeros_like(logp))
    ratio = torch.exp(logp - logp.detach())
    per_token = torch.where(valid, -_centred(rewards)[..., None] * ratio, torch.zeros_like(ratio))
    if aggregation == "token_mean":
        return per_token.sum(dim=(1, 2)) / valid.sum(dim=(1, 2)).clamp_min(1)
    per_response = per_token.sum(dim=2) / valid.sum(dim=2).clamp_min(1)
    return per_response.mean(dim=1)


def zero_advantage(rewards: Tensor, tol: float = 1e-6) -> Tensor:
    """[N] bool: every |A| of the group below `tol` (the released scorer skips these groups' backward)."""
    return (_centred(rewards).abs() < tol).all(dim=1)


def unit_vector(vectors: Tensor, eps: float = 1e-5) -> Tensor:
    """v / (‖v‖ + eps) along the last axis: the released normalisation (`sqrt(Σg²) + 1e-5`), not v / max(‖v‖, eps)."""
    return vectors / (vectors.norm(dim=-1, keepdim=True) + eps)


def probe_coefficients(rewards: Tensor, token_mask: Tensor, aggregation: str = "token_mean") -> Tensor:
    """[N, K, L] c with probe_loss = −Σ_{k,t} c·ρ per group: A_k over the group's valid token count (`token_mean`), or
    A_k / (K · the response's valid token count) (`seq_mean`); 0 on padding. A backend that back-propagates a group's
    responses in several micro-batches weights each token by these, so that the micro-batches add up to the group's
    probe loss (dataflex_rl.backends.verl.probe_gradients)."""
    if token_mask.dim() != 3 or rewards.shape != token_mask.shape[:2]:
        raise ValueError(f"probe_coefficients needs rewards [N, K] and token_mask [N, K, L]; got "
                         f"{tuple(rewards.shape)} and {tuple(token_mask.shape)}")
    if aggregation not in AGGREGATIONS:
        raise ValueError(f"unknown aggregation {aggregation!r}; known: {', '.join(AGGREGATIONS)}")
    valid = (token_mask > 0).float()
    advantages = _centred(rewards.float())[..., None]
    if aggregation == "token_mean":
        return advantages * valid / valid.sum(dim=(1, 2), keepdim=True).clamp_min(1)
    return advantages * valid / (valid.sum(dim=2, keepdim=True).clamp_min(1) * rewards.shape[1])


@dataclass(frozen=True)
class Alignment:
    """The candidates' gradients as GradAlign's scorer reads them against a unit direction u (the normalised
    validation gradient): g_i·u and ‖g_i‖ per candidate [N], and the chunk's mean scored candidate Σ_i w_i·g_i [P]
    (`mean_weights`), whose dot with u over a module's slices is that module's part of the mean score. A backend whose
    [N, P] gradients do not fit in memory accumulates it one group at a time (backends/verl/probe_gradients.py)."""

    dots: Tensor
    norms: Tensor
    mean: Tensor


def mean_weights(norms: Tensor, zero_adv: Tensor, *, normalise_candidates: bool, eps: float = 1e-5) -> Tensor:
    """[N] w_i of the chunk's mean scored candidate: 1/N for a candidate with an advantage (divided by ‖g_i‖ + eps
    when candidates are normalised), 0 for a zero-advantage one (it scores 0)."""
    weights = (~zero_adv.bool()).float() / len(norms)
    return weights / (norms + eps) if normalise_candidates else weights


def alignment_of(candidate_grads: Tensor, direction: Tensor, zero_adv: Tensor, *, normalise_candidates: bool,
                 eps: float = 1e-5) -> Alignment:
    """The Alignment of [N, P] candidate gradients with the unit `direction` [P]."""
    grads = candidate_grads.float()
    norms = grads.norm(dim=1)
    return Alignment(grads @ direction, norms,
                     mean_weights(norms, zero_adv, normalise_candidates=normalise_candidates, eps=eps) @ grads)


def aligned_scores(alignment: Alignment, zero_adv: Tensor, *, normalise_candidates: bool = True,
                   eps: float = 1e-5) -> Tensor:
    """GradAlign's score [N] from an Alignment: g_i·u / (‖g_i‖ + eps) (cosine), or g_i·u (`dot`); 0.0 for a
    zero-advantage candidate (alignment_scores)."""
    return _scores(alignment.dots, alignment.norms, zero_adv, normalise_candidates, eps)


def _scores(dots: Tensor, norms: Tensor, zero_adv: Tensor, normalise_candidates: bool, eps: float) -> Tensor:
    """g_i·u, divided by ‖g_i‖ + eps (cosine) or not (dot), and 0.0 for a zero-advantage candidate."""
    scores = dots / (norms + eps) if normalise_candidates else dots
    return torch.where(zero_adv.bool(), torch.zeros_like(scores), scores)


def alignment_scores(candidate_grads: Tensor, validation_grad: Tensor, zero_adv: Tensor, *,
                     normalise_candidates: bool = True, eps: float = 1e-5) -> Tensor:
    """GradAlign's score [N]: g_v/(‖g_v‖+eps) · g_i/(‖g_i‖+eps), the cosine of candidate i with the validation gradient.

    `normalise_candidates=False` is the released `dot` mode: g_v is still normalised, g_i is not, so it ranks by
    ‖g_i‖·cos. Zero-advantage candidates score exactly 0.0 whatever their rows hold (the released scorer never
    back-propagates them), so they rank above every negatively aligned candidate.
    """
    if candidate_grads.dim() != 2 or validation_grad.shape != candidate_grads.shape[1:]:
        raise ValueError(f"candidate_grads must be [N, P] and validation_grad [P]; got "
                         f"{tuple(candidate_grads.shape)} and {tuple(validation_grad.shape)}")
    if zero_adv.shape != candidate_grads.shape[:1]:
        raise ValueError(f"zero_adv must be [N] = {candidate_grads.shape[0]}, got {tuple(zero_adv.shape)}")
    # g_i·u / (‖g_i‖ + eps) rather than (g_i / (‖g_i‖ + eps))·u: the same score without a normalised copy of [N, P]
    grads = candidate_grads.float()
    return _scores(grads @ unit_vector(validation_grad.float(), eps), grads.norm(dim=1), zero_adv,
                   normalise_candidates, eps)


def _floats(values: Sequence[float] | Tensor, name: str) -> list[float]:
    out = [float(v) for v in (values.tolist() if isinstance(values, Tensor) else values)]
    if any(math.isnan(v) for v in out):
        raise ValueError(f"{name} holds NaN; a NaN has no rank, so nothing can be selected")
    return out


def _check_keep(keep: int, count: int) -> None:
    if not 0 <= keep <= count:
        raise ValueError(f"keep must lie in [0, {count}] (the number of candidates), got {keep}")


def select_top(scores: Sequence[float] | Tensor, keep: int) -> list[int]:
    """Indices of the `keep` highest scores in rank order; a stable descending sort, so ties go to the lower index
    (stream order), as `select_data.py` L32 sorts."""
    values = _floats(scores, "scores")
    _check_keep(keep, len(values))
    return sorted(range(len(values)), key=lambda i: -values[i])[:keep]


def accgreedy_order(pass_rates: Sequence[float] | Tensor, keep: int) -> list[int]:
    """AccGreedy (Sun et al. 2025c as released): the `keep` candidates whose pass rate a is nearest 0.5, by a stable
    ascending sort of |a − 0.5| (ties to the lower index). The rates are the round's exact ones over k_r rollouts."""
    rates = _floats(pass_rates, "pass_rates")
    _check_keep(keep, len(rates))
    distance = [round(abs(a - 0.5), _PASS_RATE_DECIMALS) for a in rates]
    return sorted(range(len(rates)), key=lambda i: distance[i])[:keep]


def simacc_scores(cosines: Tensor, pass_rates: Tensor) -> Tensor:
    """The released `simacc` mode (not in the paper's results): cos · 4a(1 − a), which peaks at a = 0.5."""
    return cosines * 4.0 * pass_rates * (1.0 - pass_rates)


def adam_precondition(validation_grad: Tensor, exp_avg_sq: Tensor, step: int, beta2: float = 0.999,
                      eps: float = 1e-8) -> Tensor:
    """g / (sqrt(v / (1 − beta2^step)) + eps): the released `--use_optimizer` option, applied to the validation side
    only — to g_v [P], or to each validation group's gradient [N, P] before its normalisation
    (`unit_group_sum`).

    The reference also divides by a global constant c = max(1, 50/max) (L70–142); a positive scale of g_v cannot
    change any cosine or ranking, nor the direction of a group normalised afterwards, so it is omitted. The released
    loop never enables this option.
    """
    if step < 1:
        raise ValueError(f"step must be ≥ 1 (Adam's bias correction divides by 1 − beta2^step), got {step}")
    if exp_avg_sq.shape != validation_grad.shape[-1:]:
        raise ValueError(f"exp_avg_sq {tuple(exp_avg_sq.shape)} must match the last axis of validation_grad "
                         f"{tuple(validation_grad.shape)}")
    return validation_grad / ((exp_avg_sq / (1.0 - beta2**step)).sqrt() + eps)


def unit_group_sum(groups: Tensor, eps: float = 1e-5) -> Tensor:
    """Σ_g g_g / (‖g_g‖ + eps) over the rows of [N, P]: the released `--norm_before_accumlation` g_v before its own
    normalisation. Under `precondition: adam` the rows are preconditioned first, as the released scorer divides each
    group's gradient by the Adam denominator inside the backward that normalises it (L405–531, L668–698)."""
    return unit_vector(groups, eps).sum(dim=0)


def module_contributions(validation_unit: Tensor, candidate_unit: Tensor, layout) -> dict[str, float]:
    """Each module's share of the score g_v·g_i: the dot product over the module's slices of the flat vectors.

    `layout` is a `gradients.ParameterLayout`; the shares sum to the full dot product. The released scorer logs the
    top five by |dot| (L540–591); tied embeddings may dominate. Computed in fp64 a slice at a time, and a slice of
    more than GRADIENT_BLOCK elements a block at a time, never the whole vectors in fp64 (for an 8B model 3 × 61
    GiB): a slice within one block gives the sum of the whole vectors' products there, bit for bit.
    """
    def dot(where: slice) -> Tensor:
        return sum((validation_unit[start:min(start + GRADIENT_BLOCK, where.stop)].double()
                    * candidate_unit[start:min(start + GRADIENT_BLOCK, where.stop)].double()).sum()
                   for start in range(where.start, where.stop, GRADIENT_BLOCK))

    return {module: float(sum(dot(layout.slices[name]) for name in names))
            for module, names in layout.modules().items()}
