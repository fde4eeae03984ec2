"""One selection round: what a prompt-selection policy reads, measured lazily from the backend's probe.

A policy (dataflex_rl.policies.prompt_selection) asks the round for the signals it needs — the candidates' pass rates,
their per-group gradients, the validation gradient — and the round has the backend's `Probe` measure each once:
candidate rollouts (k_r per candidate, with the regime's reward noise, as the released scorer saw it), validation
rollouts (k_v per validation prompt, always the verifier's reward), and the gradients of the probe loss
(prompt_selection.scores.probe_loss). The selection itself (scores → kept rows) is the policy's pure function of these.

Every rollout stream is seeded by (run seed, stream name), the stream name by the round: a round recomputed after a
resume draws the same rollouts, and two methods of one seed draw with the same random numbers.
"""
from __future__ import annotations

import hashlib
import random
import time
from dataclasses import dataclass, field
from typing import Any, Protocol, Sequence

from torch import Tensor

from dataflex_rl.prompt_selection.scores import (Alignment, adam_precondition, alignment_of, unit_group_sum,
                                                  zero_advantage)


def stream_seed(seed: int, stream: str) -> int:
    """A generator seed for one rollout stream of a run: the same for every method of the seed."""
    return int.from_bytes(hashlib.blake2b(f"{seed}:{stream}".encode(), digest_size=8).digest(), "big") >> 1


@dataclass(frozen=True)
class ProbeRollouts:
    """Rollouts of N prompts, k each: rewards [N, k], and the backend's own token batch for the gradients."""

    rewards: Tensor
    tokens: Any


class Probe(Protocol):
    """What a backend provides to a selection round (Backend.open_probe; the embedded one:
    backends/embedded/probe.py)."""

    def rollouts(self, rows: Sequence[int], samples: int, stream: str, noisy: bool) -> ProbeRollouts:
        """`samples` sampled responses per corpus row at the scoring temperature, drawn from the seed and `stream`;
        rewards from the verifier, or the regime's reward noise where `noisy` and the row is marked."""

    def group_gradients(self, rollouts: ProbeRollouts, aggregation: str) -> Tensor:
        """[N, P] fp32 gradients of each group's probe loss over every trainable parameter (zero-advantage groups:
        zeros)."""

    def summed_gradient(self, rollouts: ProbeRollouts, aggregation: str) -> Tensor:
        """[P]: the gradient of the sum of the groups' probe losses."""

    # Optional: a probe whose [N, P] gradients would not fit in memory also offers
    #   group_alignment(rollouts, aggregation, direction, normalise) -> scores.Alignment
    # computed one group at a time (the round uses it for an unprojected cosine or dot score).

    def module_slices(self) -> Any:
        """The parameter layout (prompt_selection.gradients.ParameterLayout) the gradients are flattened in."""

    def adam_second_moment(self) -> tuple[Tensor, int] | None:
        """The optimiser's exp_avg_sq flattened like the gradients, and its step; None before the first step."""


@dataclass(frozen=True)
class RoundPlan:
    """The sizes of a round and the rows it draws from."""

    index: int
    chunk: tuple[int, ...]
    keep: int
    rollouts_candidate: int
    rollouts_validation: int
    validation: tuple[int, ...]
    pool: tuple[int, ...]
    seed: int


@dataclass
class Ranked:
    """A policy's answer: the kept rows in rank order and, where it scored the chunk, each candidate's score."""

    rows: list[int]
    scores: Tensor | None = None
    contributions: dict[str, float] | None = None


@dataclass
class SelectionRound:
    plan: RoundPlan
    probe: Probe
    seconds: dict[str, float] = field(default_factory=lambda: {"candidate_rollouts": 0.0, "candidate_backward": 0.0,
                                                               "validation": 0.0})
    _cache: dict = field(default_factory=dict)

    def _timed(self, phase: str, key, compute):
        if key not in self._cache:
            started = time.perf_counter()
            self._cache[key] = compute()
            self.seconds[phase] += time.perf_counter() - started
        return self._cache[key]

    # --- the signals -------------------------------------------------------------------------------------------
    def candidate_rollouts(self) -> ProbeRollouts:
        return self._timed("candidate_rollouts", "candidates", lambda: self.probe.rollouts(
            self.plan.chunk, self.plan.rollouts_candidate, f"candidates:{self.plan.index}", noisy=True))

    def pass_rates(self) -> Tensor:
        return self.candidate_rollouts().rewards.mean(dim=1)

    def zero_advantage(self) -> Tensor:
        return zero_advantage(self.candidate_rollouts().rewards)

    def candidate_gradients(self, aggregation: str, projection_dim: int) -> Tensor:
        """[M, P'] raw per-group gradients of the candidates (projected when projection_dim > 0)."""
        rollouts = self.candidate_rollouts()
        return self._timed("candidate_backward", ("candidate_gradients", aggregation, projection_dim),
                           lambda: self._project(self.probe.group_gradients(rollouts, aggregation), projection_dim))

    def candidate_alignment(self, aggregation: str, direction: Tensor, normalise: bool) -> Alignment:
        """The candidates' raw gradients against the unit `direction` (scores.Alignment): from the probe's
        `group_alignment` where it has one, one group at a time, else from candidate_gradients."""
        rollouts = self.candidate_rollouts()
        streamed = getattr(self.probe, "group_alignment", None)
        if streamed is None:
            return alignment_of(self.candidate_gradients(aggregation, 0), direction, self.zero_advantage(),
                                normalise_candidates=normalise)
        started = time.perf_counter()
        alignment = streamed(rollouts, aggregation, direction, normalise)
        self.seconds["candidate_backward"] += time.perf_counter() - started
        return alignment

    def candidate_gradient_sum(self, aggregation: str, projection_dim: int) -> Tensor:
        """Σ_i g_i over the candidates (`align`'s validation gradient): the probe's summed gradient of the candidates'
        losses where it streams its scores (no [M, P] rows), else the sum of candidate_gradients."""
        if projection_dim or getattr(self.probe, "group_alignment", None) is None:
            return self.candidate_gradients(aggregation, projection_dim).sum(dim=0)
        rollouts = self.candidate_rollouts()
        return self._timed("candidate_backward", ("candidate_gradient_sum", aggregation),
                           lambda: self.probe.summed_gradient(rollouts, aggregation))

    def validation_rollouts(self) -> ProbeRollouts:
        return self._timed("validation", "validation", lambda: self.probe.rollouts(
            self.plan.validation, self.plan.rollouts_validation, f"validation:{self.plan.index}", noisy=False))

    def validation_pass_rate(self) -> float | None:
        rollouts = self._cache.get("validation")
        return None if rollouts is None else float(rollouts.rewards.mean())

    def validation_gradient(self, aggregation: str, projection_dim: int, normalise_groups: bool,
                            precondition: str) -> Tensor:
        """g_v before normalisation, as the released scorer builds it (before any projection): under
        `precondition: adam` every gradient is divided by Adam's sqrt(v̂) + 1e-8 first; then the groups' gradients
        are summed, each normalised before the sum when `normalise_groups` — g_v = Σ_g unit(g_g / D)."""
        rollouts = self.validation_rollouts()

        def compute() -> Tensor:
            # before the first step Adam has no second moment: the gradients as they are
            moment = self.probe.adam_second_moment() if precondition == "adam" else None

            def preconditioned(gradients: Tensor) -> Tensor:
                return gradients if moment is None else adam_precondition(gradients, *moment)

            if normalise_groups:
                total = unit_group_sum(preconditioned(self.probe.group_gradients(rollouts, aggregation)))
            else:
                total = preconditioned(self.probe.summed_gradient(rollouts, aggregation))
            return self._project(total, projection_dim)

        return self._timed("validation", ("validation_gradient", aggregation, projection_dim, normalise_groups,
                                          precondition), compute)

    def _project(self, gradients: Tensor, dim: int) -> Tensor:
        if dim == 0:
            return gradients
        from dataflex_rl.prompt_selection.gradients import random_projection

        return random_projection(gradients, dim, seed=self.plan.seed)

    # --- row draws -----------------------------------------------------------------------------------------------
    def random_rows(self, source: str) -> list[int]:
        """⌊M/q⌋ rows drawn uniformly from the chunk, or from the whole pool (as released), by (seed, round)."""
        rows = self.plan.chunk if source == "chunk" else self.plan.pool
        return random.Random(f"random_prompts:{self.plan.seed}:{self.plan.index}").sample(list(rows), self.plan.keep)

    def validation_cycle(self) -> list[int]:
        """The next ⌊M/q⌋ validation prompts of a walk over them (the "train on the validation set" ablation)."""
        rows = self.plan.validation
        start = self.plan.index * self.plan.keep
        return [rows[(start + i) % len(rows)] for i in range(self.plan.keep)]

    def top_rows(self, scores: Tensor) -> list[int]:
        from dataflex_rl.prompt_selection.scores import select_top

        return [self.plan.chunk[i] for i in select_top(scores, self.plan.keep)]
