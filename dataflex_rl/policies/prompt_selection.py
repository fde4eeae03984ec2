"""Prompt-selection policies: which candidates of a round are trained on (docs/prompt_selection.md).

Each is a function of a `SelectionRound` (dataflex_rl.prompt_selection.round), which measures the signals the policy
asks for, and returns the kept rows. The scores are pure functions of those signals
(dataflex_rl.prompt_selection.scores), so a backend only has to supply rollouts and per-group gradients.
"""
from __future__ import annotations

from dataflex_rl.prompt_selection.round import Ranked, SelectionRound
from dataflex_rl.prompt_selection.scores import (accgreedy_order, aligned_scores, alignment_scores,
                                                 module_contributions, simacc_scores, unit_vector)

from .registry import policy


def _aligned(round_: SelectionRound, validation, aggregation: str, projection_dim: int, normalise: bool) -> Ranked:
    """Rank the chunk by g_v·g_i (cosine when `normalise`), with each module's part of the chunk's mean score
    (without a projection: a projected gradient has no modules)."""
    zero = round_.zero_advantage()
    if projection_dim:
        candidates = round_.candidate_gradients(aggregation, projection_dim)
        scores = alignment_scores(candidates, validation, zero, normalise_candidates=normalise)
        return Ranked(round_.top_rows(scores), scores)
    direction = unit_vector(validation.float())
    alignment = round_.candidate_alignment(aggregation, direction, normalise)
    scores = aligned_scores(alignment, zero, normalise_candidates=normalise)
    contributions = module_contributions(direction, alignment.mean, round_.probe.module_slices())
    return Ranked(round_.top_rows(scores), scores, contributions)


@policy("gradalign")
def gradalign(round_: SelectionRound, aggregation, projection_dim, similarity, precondition,
              normalise_validation_groups) -> Ranked:
    """GradAlign: the top ⌊M/q⌋ candidates by the cosine of their gradient with the validation gradient (`dot`: the
    candidate's gradient unnormalised, so ‖g_i‖·cos)."""
    validation = round_.validation_gradient(aggregation, projection_dim, normalise_validation_groups, precondition)
    return _aligned(round_, validation, aggregation, projection_dim, normalise=similarity == "cosine")


@policy("simacc")
def simacc(round_: SelectionRound, aggregation, projection_dim, precondition, normalise_validation_groups) -> Ranked:
    """The released `simacc` mode (not in the paper's results): cosine · 4a(1 − a), a the candidate's pass rate."""
    validation = round_.validation_gradient(aggregation, projection_dim, normalise_validation_groups, precondition)
    ranked = _aligned(round_, validation, aggregation, projection_dim, normalise=True)
    ranked.scores = simacc_scores(ranked.scores, round_.pass_rates())
    ranked.rows = round_.top_rows(ranked.scores)
    return ranked


@policy("align")
def align(round_: SelectionRound, aggregation, projection_dim) -> Ranked:
    """The released LearnAlign proxy: GradAlign with this round's candidates and their k_r rollouts as the validation
    set (each candidate counts in its own target). LearnAlign's learnability (success-rate) term is not implemented."""
    validation = round_.candidate_gradient_sum(aggregation, projection_dim)
    return _aligned(round_, validation, aggregation, projection_dim, normalise=True)


@policy("accgreedy")
def accgreedy(round_: SelectionRound) -> Ranked:
    """AccGreedy: the candidates whose pass rate over the round's k_r rollouts is nearest 0.5 (ties: stream order)."""
    return Ranked([round_.plan.chunk[i] for i in accgreedy_order(round_.pass_rates(), round_.plan.keep)])


@policy("random_prompts")
def random_prompts(round_: SelectionRound, draw_from) -> Ranked:
    """⌊M/q⌋ prompts uniformly from the chunk (the matched comparison), or from the whole pool (as released). The
    candidates' rollouts are still drawn: they give the chunk's composition and pass rates, as the released loop did."""
    round_.candidate_rollouts()
    return Ranked(round_.random_rows(draw_from))


@policy("validation_set")
def validation_set(round_: SelectionRound) -> Ranked:
    """The ablation "train on the validation set": ⌊M/q⌋ validation prompts per round instead of candidates."""
    round_.candidate_rollouts()
    return Ranked(round_.validation_cycle())
