"""The data-policy side of one GRPO step, backend-neutral: what the embedded trainer calls, and what a verl trainer
subclass calls from its `_next_train_batch` and `_compute_advantage`.

A method's family gives the role (`Family.role`): a mixture chooses the domains of the next prompts (and the responses
are kept as sampled); a prompt selection chooses the prompts by a selection round every few steps (and its
`response_policy` weighs the responses); a response policy keeps the uniform prompt stream and weighs the responses.
Per step:
  rows = driver.draw(prompts_per_step, step, probe)        mixture probabilities → prompt stream rows, or the
                                                           selection round's kept rows (the probe: the backend's)
  loss = driver.weigh(rewards, token_mask, advantages, …)  GroupBatch → LossWeights → the loss inputs
  driver.observe(loss.batch)                               after the update: the mixture's feedback
  driver.metrics(loss)                                     the per-step columns the training-curves figure reads
`state_dict`/`load_state_dict` hold the prompt stream, the mixture and the selection round, for checkpoints.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Sequence

import torch

from dataflex_rl.policies import GroupBatch, build_mixture, build_prompt_selection, build_response_policy
from dataflex_rl.policies.catalogue import Role
from dataflex_rl.prompt_selection.candidates import held_out_rows
from dataflex_rl.prompt_selection.selector import PromptSelector, RowLabels
from dataflex_rl.training.prompt_stream import PromptStream
from dataflex_rl.policies.methods import MethodSpec


@dataclass(frozen=True)
class LossInputs:
    """What the loss of a step takes from the data policy: token advantages (the policy's override where it
    recomputes them), PG and KL weights [G, K, L]; and the batch and weights they came from."""

    advantages: torch.Tensor
    pg: torch.Tensor
    kl: torch.Tensor
    batch: GroupBatch
    weights: Any  # policies.LossWeights


class PolicyDriver:
    """One run's data policy, in the role its family gives it; what a trainer calls each step (see above)."""

    def __init__(self, method: MethodSpec, row_domains: Sequence[str], seed: int, labels: RowLabels | None = None,
                 validation_draws: Sequence[tuple[int, int]] = ()):
        """`row_domains`: the corpus rows' domains. `labels`: what a prompt selection's round metrics count per row,
        and which rows may be validation prompts (default: the domains, nothing noised); rows past the corpus's are a
        validation file's (prompt_selection.validation_file), the prompt selection's validation prompts.
        `validation_draws`: the study's validation draws on this corpus (Study.validation_draws); their rows are held
        out of this run's prompts, whatever its method."""
        no_flags = [False] * len(row_domains)
        labels = labels or RowLabels(row_domains, no_flags, no_flags)
        corpus_rows = len(row_domains)
        eligible = [row for row in labels.eligible_for_validation() if row < corpus_rows]
        held_out = held_out_rows(eligible, validation_draws)
        self.stream = PromptStream(row_domains, seed, held_out)
        self.needs_probe = method.family.needs_probe  # `draw` then takes the backend's probe
        self.mixture = self.selector = None
        if method.family.role is Role.MIXTURE:
            self.response_policy = build_response_policy("baseline", {})
            self.mixture = build_mixture(method.policy, self.stream.domains, method.params)
        elif method.family.role is Role.PROMPT_SELECTION:
            policy = build_prompt_selection(method.policy, method.params)
            self.response_policy = policy.response_policy()
            self.selector = PromptSelector(policy, labels, seed, held_out, corpus_rows)
        else:
            self.response_policy = build_response_policy(method.policy, method.params)
        self._probabilities: dict[str, float] | None = None

    def score_temperature(self, training_temperature: float) -> float:
        """The sampling temperature of a selection round's scoring rollouts: the method's `score_temperature`, or
        the training temperature where it leaves it unset."""
        return self.selector.policy.options["score_temperature"] or training_temperature

    def draw(self, prompts: int, step: int = 0, probe=None) -> list[int]:
        """The corpus rows of the next step's prompts: the selection round's kept rows (a prompt selection, which
        needs the step and the backend's probe: dataflex_rl.prompt_selection.round.Probe), or rows drawn by the
        mixture's domain probabilities or by the corpus shares."""
        if self.selector:
            return self.selector.draw(prompts, step, probe)
        self._probabilities = self.mixture.probabilities() if self.mixture else None
        return self.stream.draw(prompts, self._probabilities)

    def weigh(self, rewards: torch.Tensor, token_mask: torch.Tensor, advantages: torch.Tensor,
              old_logprobs: torch.Tensor, domains: Sequence[str], prompt_ids: Sequence[str]) -> LossInputs:
        """The policy's weights for a batch of G groups × K responses ([G, K] rewards, [G, K, L] the rest)."""
        batch = GroupBatch(rewards=rewards, lengths=token_mask.sum(-1), token_mask=token_mask, advantages=advantages,
                           old_logprobs=old_logprobs, domains=tuple(domains), prompt_ids=tuple(prompt_ids))
        weights = self.response_policy.weigh(batch)
        used = weights.advantages if weights.advantages is not None else advantages
        return LossInputs(advantages=used, pg=weights.pg, kl=weights.kl, batch=batch, weights=weights)

    def observe(self, batch: GroupBatch) -> None:
        """The mixture's feedback from a step whose update was applied."""
        if self.mixture:
            self.mixture.observe(batch)

    def metrics(self, loss: LossInputs) -> dict[str, Any]:
        """The data-policy columns of a step's metrics: mean reward, degenerate groups, kept fraction, whether the
        policy dropped everything, p:<domain>, the sampling probability of each domain at this step, and on the first
        step of a selection round the round's columns (round_*)."""
        rewards = loss.batch.rewards
        degenerate = (rewards.max(dim=1).values == rewards.min(dim=1).values).float().mean()
        record = {"mean_reward": float(rewards.mean()), "degenerate_group_fraction": float(degenerate),
                  "kept_fraction": loss.weights.kept_fraction,
                  "all_dropped": bool(loss.weights.info.get("all_dropped", False))}
        for domain, p in (self._probabilities or self.stream.corpus_shares()).items():
            record[f"p:{domain}"] = p
        if self.selector:
            record.update(self.selector.metrics(training_rollouts=int(rewards.shape[1])))
        return record

    def state_dict(self) -> dict:
        state = {"stream": self.stream.state_dict(), "mixture": self.mixture.state_dict() if self.mixture else None}
        if self.selector:
            state["selection"] = self.selector.state_dict()
        return state

    def load_state_dict(self, state: dict) -> None:
        self.stream.load_state_dict(state["stream"])
        if self.mixture:
            self.mixture.load_state_dict(state["mixture"])
        if self.selector:
            self.selector.load_state_dict(state["selection"])
