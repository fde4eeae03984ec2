"""A prompt-selection run's side of the policy driver: a selection round every `steps_per_round` steps, the kept rows
in between, and each round's metrics.

At step s the run is in round r = s // I. The first draw of a round runs it (dataflex_rl.prompt_selection.round): the
chunk r of the seed's pool permutation is scored by the policy and its top ⌊M/q⌋ kept; each step of the round then
trains on the next B of the kept rows (candidates.training_rows). The state — the round and its kept rows, and the
round's metrics until a step has reported them — goes into checkpoints, so a run resumed inside a round trains on the
same rows, and one resumed at a round's start recomputes it from the same seeds.
"""
from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any, Sequence

import torch

from dataflex_rl.prompt_selection.candidates import CandidateStream, training_rows, validation_rows
from dataflex_rl.prompt_selection.round import Probe, Ranked, RoundPlan, SelectionRound

TOP_MODULES = 5


@dataclass(frozen=True)
class RowLabels:
    """What the round metrics count per corpus row: its domain, whether a regime noised its rewards, whether it is
    one of the low-utility regime's easy prompts; and the unbalanced regime's target domain (None without one)."""

    domains: Sequence[str]
    corrupted: Sequence[bool]
    easy: Sequence[bool]
    target_domain: str | None = None

    def eligible_for_validation(self) -> list[int]:
        return [row for row, (domain, corrupted) in enumerate(zip(self.domains, self.corrupted))
                if not corrupted and (self.target_domain is None or domain == self.target_domain)]

    def fractions(self, rows: Sequence[int]) -> dict[str, float]:
        """The corrupted, target-domain and easy shares of `rows`; NaN for a label the corpus does not have."""
        def share(flags: Sequence[bool], present: bool) -> float:
            return sum(flags[r] for r in rows) / len(rows) if present and rows else float("nan")

        target = [domain == self.target_domain for domain in self.domains]
        return {"corrupted": share(self.corrupted, any(self.corrupted)),
                "target": share(target, self.target_domain is not None),
                "easy": share(self.easy, any(self.easy))}


class PromptSelector:
    def __init__(self, policy, labels: RowLabels, seed: int, held_out: frozenset[int] = frozenset(),
                 corpus_rows: int | None = None):
        """`policy`: a built prompt-selection policy (policies.build_prompt_selection); `held_out`: the rows every
        run on this corpus leaves out (candidates.held_out_rows), besides this method's own validation prompts.
        `corpus_rows`: how many of the labelled rows are the corpus's (default: all); those after them are the
        method's validation file's, from which its validation prompts are then drawn."""
        self.policy, self.labels, self.seed = policy, labels, seed
        options = policy.options
        self.steps_per_round = options["steps_per_round"]
        self.keep = options["candidates_per_round"] // options["selection_ratio"]
        corpus_rows = len(labels.domains) if corpus_rows is None else corpus_rows
        from_file = list(range(corpus_rows, len(labels.domains)))
        eligible = from_file or labels.eligible_for_validation()
        self.validation = tuple(validation_rows(eligible, options["validation_size"], options["validation_seed"]))
        held_out = held_out | set(self.validation)
        self.pool = tuple(row for row in range(corpus_rows) if row not in held_out)
        self.stream = CandidateStream(self.pool, options["candidates_per_round"], seed)
        self._round: dict[str, Any] | None = None  # {"index", "kept", "pending": metrics not yet reported}

    def draw(self, prompts: int, step: int, probe: Probe) -> list[int]:
        index = step // self.steps_per_round
        if self._round is None or self._round["index"] != index:
            self._run_round(index, probe, prompts)
        offset = (step - index * self.steps_per_round) * prompts
        return training_rows(self._round["kept"], self.seed, index, offset, prompts)

    def _run_round(self, index: int, probe: Probe, prompts_per_step: int) -> None:
        options = self.policy.options
        plan = RoundPlan(index=index, chunk=tuple(self.stream.chunk(index)), keep=self.keep,
                         rollouts_candidate=options["rollouts_candidate"],
                         rollouts_validation=options["rollouts_validation"], validation=self.validation,
                         pool=self.pool, seed=self.seed)
        round_ = SelectionRound(plan, probe)
        ranked = self.policy.rank(round_)
        if len(ranked.rows) != self.keep:
            raise RuntimeError(f"prompt selection {self.policy.name!r} kept {len(ranked.rows)} prompts in round "
                               f"{index}, not ⌊M/q⌋ = {self.keep}")
        self._round = {"index": index, "kept": list(ranked.rows), "pending": self._metrics(round_, ranked, prompts_per_step)}

    def _metrics(self, round_: SelectionRound, ranked: Ranked, prompts_per_step: int) -> dict[str, Any]:
        """The round's columns in the run metrics (docs/prompt_selection.md lists them)."""
        plan = round_.plan
        record: dict[str, Any] = {
            "round": plan.index, "round_candidates": len(plan.chunk), "round_kept": len(ranked.rows),
            "round_rollouts_candidate": plan.rollouts_candidate,
            "round_rollouts_validation": plan.rollouts_validation, "round_validation_size": len(plan.validation),
            "round_epochs": self.steps_per_round * prompts_per_step / len(ranked.rows),
        }
        for scope, rows in (("chunk", plan.chunk), ("kept", ranked.rows)):
            record.update({f"round_{scope}_{label}": value for label, value in self.labels.fractions(rows).items()})
        rewards = round_.candidate_rollouts().rewards
        rates = rewards.mean(dim=1)
        zero = round_.zero_advantage()
        kept = set(ranked.rows)
        kept_mask = torch.tensor([row in kept for row in plan.chunk])
        corrupted = torch.tensor([bool(self.labels.corrupted[row]) for row in plan.chunk])
        record.update({
            "round_chunk_pass_rate": float(rates.mean()),
            "round_pass_rate_histogram": json.dumps(torch.bincount((rates * rewards.shape[1]).round().long(),
                                                                   minlength=rewards.shape[1] + 1).tolist()),
            "round_zero_advantage_scored": int(zero.sum()),
            "round_zero_advantage_kept": int((zero & kept_mask).sum()),
            "round_pass_rate_corrupted": _mean(rates[corrupted]), "round_pass_rate_clean": _mean(rates[~corrupted]),
            "round_validation_pass_rate": _nan_if_none(round_.validation_pass_rate()),
            "round_score_corrupted": float("nan"), "round_score_clean": float("nan"),
            "round_top_modules": json.dumps(_top_modules(ranked.contributions)),
            **{f"round_seconds_{phase}": seconds for phase, seconds in round_.seconds.items()},
        })
        if ranked.scores is not None:
            record["round_score_corrupted"] = _mean(ranked.scores[corrupted])
            record["round_score_clean"] = _mean(ranked.scores[~corrupted])
        return record

    def metrics(self, training_rollouts: int) -> dict[str, Any]:
        """The round's columns on the round's first step, once, with the training K (the FLOP model's n_t is the
        round's epochs × K); none on the other steps."""
        if self._round is None or self._round["pending"] is None:
            return {}
        pending, self._round["pending"] = self._round["pending"], None
        return {**pending, "round_training_rollouts": training_rollouts}

    def state_dict(self) -> dict:
        return {"round": None if self._round is None else {**self._round, "kept": list(self._round["kept"])}}

    def load_state_dict(self, state: dict) -> None:
        self._round = None if state["round"] is None else {**state["round"], "kept": list(state["round"]["kept"])}


def _mean(values: torch.Tensor) -> float:
    return float(values.float().mean()) if values.numel() else float("nan")


def _nan_if_none(value: float | None) -> float:
    return float("nan") if value is None else value


def _top_modules(contributions: dict[str, float] | None) -> dict[str, float]:
    if not contributions:
        return {}
    top = sorted(contributions.items(), key=lambda item: -abs(item[1]))[:TOP_MODULES]
    return {name: round(value, 6) for name, value in top}
