"""Domain mixtures (Eq. 3 of DataFlex-RL): the probability p_t(d) of drawing the next prompts from each domain.

A mixture sees every trained batch through `observe` and keeps its state in plain JSON-able types, so the trainer can
store it in its checkpoint and a resumed run draws exactly as an uninterrupted one would. Each mixture's signal,
parameters, defaults and ranges are declared by its entry in `catalogue.py`; the registry passes them checked and
resolved.
"""
from __future__ import annotations

import math
from abc import ABC, abstractmethod
from collections import deque
from typing import Any

from .batch import GroupBatch
from .catalogue import RELEASED
from .registry import policy


class DomainMixture(ABC):
    """Base class: a fixed list of domains, probabilities over them, feedback and checkpoint state."""

    def __init__(self, domains: list[str]) -> None:
        if not domains or len(set(domains)) != len(domains):
            raise ValueError(f"a mixture needs a non-empty list of distinct domains, got {domains}")
        self.domains = tuple(domains)

    @abstractmethod
    def probabilities(self) -> dict[str, float]:
        """p_t(d) for every domain; sums to 1."""

    def observe(self, batch: GroupBatch) -> None:
        """Feedback after each optimiser step; a mixture that does not learn ignores it."""

    def state_dict(self) -> dict[str, Any]:
        return {"domains": list(self.domains)}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        if list(state.get("domains", [])) != list(self.domains):
            raise ValueError(f"checkpoint mixture domains {state.get('domains')} differ from {list(self.domains)}")


@policy("static")
class StaticMixture(DomainMixture):
    """Fixed p(d): uniform by default, or the given non-negative `weights` (one per domain) normalised to sum 1."""

    def __init__(self, domains: list[str], weights: dict[str, float] | None) -> None:
        super().__init__(domains)
        weights = weights if weights is not None else {d: 1.0 for d in self.domains}
        total = sum(weights.values())
        self._probabilities = {d: weights[d] / total for d in self.domains}

    def probabilities(self) -> dict[str, float]:
        return dict(self._probabilities)


@policy("reward_gap")
class RewardGapMixture(DomainMixture):
    """Favour domains whose mean reward lags.

    Per observed group g of domain d: ema_d ← decay·ema_d + (1 − decay)·mean_k r_gk (groups in batch order; an
    unobserved domain starts at 0.5). Then p(d) = min_prob + (1 − D·min_prob)·softmax_d((1 − ema_d) / temperature), so
    every domain keeps at least `min_prob` and the policy can notice when a neglected domain starts lagging.
    """

    def __init__(self, domains: list[str], decay: float, temperature: float, min_prob: float) -> None:
        super().__init__(domains)
        self.decay, self.temperature, self.min_prob = decay, temperature, min_prob
        self.ema = {d: 0.5 for d in self.domains}

    def observe(self, batch: GroupBatch) -> None:
        group_means = batch.rewards.mean(dim=1).tolist()
        for domain, mean_reward in zip(batch.domains, group_means):
            if domain not in self.ema:
                raise ValueError(f"batch domain {domain!r} is not one of the mixture's {list(self.domains)}")
            self.ema[domain] = self.decay * self.ema[domain] + (1.0 - self.decay) * mean_reward

    def probabilities(self) -> dict[str, float]:
        logits = [(1.0 - self.ema[d]) / self.temperature for d in self.domains]
        top = max(logits)  # subtract the max so exp cannot overflow at small temperatures
        exps = [math.exp(z - top) for z in logits]
        spread = 1.0 - self.min_prob * len(self.domains)
        return {d: self.min_prob + spread * e / sum(exps) for d, e in zip(self.domains, exps)}

    def state_dict(self) -> dict[str, Any]:
        return {**super().state_dict(), "ema": dict(self.ema)}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        super().load_state_dict(state)
        self.ema = {d: float(state["ema"][d]) for d in self.domains}


# --- shared pieces of the bandit mixers ---------------------------------------------------------------------------

def _softmax(scores: list[float], temperature: float) -> list[float]:
    top = max(scores)  # subtract the max so exp cannot overflow at small temperatures
    exps = [math.exp((z - top) / temperature) for z in scores]
    total = sum(exps)
    return [e / total for e in exps]


def _apply_floor(probabilities: list[float], floor: float) -> list[float]:
    """The released code's floor: p ← max(p, floor), renormalised (so a floored domain ends slightly below floor)."""
    if floor <= 0:
        return probabilities
    raised = [max(p, floor) for p in probabilities]
    total = sum(raised)
    return [p / total for p in raised]


def _mean(values) -> float:
    return sum(values) / len(values) if values else 0.0


def _check_domain(domain: str, known) -> None:
    if domain not in known:
        raise ValueError(f"batch domain {domain!r} is not one of the mixture's {list(known)}")


class _RewardWindowMixture(DomainMixture):
    """State shared by the released variants of dump_ucb and tscl: the last `window` response rewards per domain.

    The released DataFlex-RL trainer fed both mixers the same statistic — each domain's mean reward over a window
    of its last 50 responses (`DomainStatsTracker.mean`, 0 before any) — and no visit counts.
    """

    def _init_reward_windows(self, window: int) -> None:
        self.reward_windows = {d: deque(maxlen=window) for d in self.domains}

    def _observe_rewards(self, batch: GroupBatch) -> None:
        for domain, rewards in zip(batch.domains, batch.rewards.tolist()):
            _check_domain(domain, self.reward_windows)
            self.reward_windows[domain].extend(float(r) for r in rewards)

    def _released_probabilities(self, progress: list[float]) -> dict[str, float]:
        p = _apply_floor(_softmax(progress, self.temperature), self.floor)
        return dict(zip(self.domains, p))


def _load_window(values, window: int) -> deque:
    return deque((float(v) for v in values), maxlen=window)


@policy("dump_ucb")
class DumpUCBMixture(_RewardWindowMixture):
    """DUMP (arXiv:2504.09710): a UCB bandit over domains whose value is the expected |advantage| (learnability).

    Paper semantics: μ_d = mean a_gk (mean |A| over the response's tokens) over the last `window` (300) responses of
    domain d (0 before any), n_d the responses of d seen so far, N = Σ n_d;
    UCB_d = μ_d + c·sqrt(2·ln(N + 1) / (n_d + 1)), p = softmax(UCB / T) with c = 1, T = 0.1 (DUMP's constants),
    then an optional floor (0 by default). Before any feedback every UCB is 0: uniform.

    `semantics: dataflex_released`: what the released code ran — μ_d = mean *reward* over the last 50 responses,
    no counts (so the bonus is c·sqrt(2·ln 1 / 1) = 0), T = 1, floor 0.05: softmax(mean reward) with a floor,
    the same policy as released tscl.
    """

    def __init__(self, domains: list[str], window: int, c: float, temperature: float, floor: float,
                 semantics: str) -> None:
        super().__init__(domains)
        self.semantics = semantics
        self.window, self.c, self.temperature, self.floor = int(window), float(c), float(temperature), float(floor)
        if semantics == RELEASED:
            self._init_reward_windows(self.window)
        else:
            self.advantage_windows = {d: deque(maxlen=self.window) for d in self.domains}
            self.counts = {d: 0 for d in self.domains}

    def observe(self, batch: GroupBatch) -> None:
        if self.semantics == RELEASED:
            self._observe_rewards(batch)
            return
        for domain, values in zip(batch.domains, batch.mean_abs_advantage().tolist()):
            _check_domain(domain, self.counts)
            self.advantage_windows[domain].extend(float(v) for v in values)
            self.counts[domain] += len(values)

    def scores(self) -> dict[str, float]:
        """UCB_d (paper) or the released statistic (windowed mean reward plus a zero bonus)."""
        if self.semantics == RELEASED:
            counts = {d: 0 for d in self.domains}  # the released trainer passed no counts
            values = {d: _mean(self.reward_windows[d]) for d in self.domains}
        else:
            counts = self.counts
            values = {d: _mean(self.advantage_windows[d]) for d in self.domains}
        seen = sum(counts.values())
        return {d: values[d] + self.c * math.sqrt(2.0 * math.log(seen + 1.0) / (counts[d] + 1.0))
                for d in self.domains}

    def probabilities(self) -> dict[str, float]:
        scores = self.scores()
        if self.semantics == RELEASED:
            return self._released_probabilities([scores[d] for d in self.domains])
        p = _apply_floor(_softmax([scores[d] for d in self.domains], self.temperature), self.floor)
        return dict(zip(self.domains, p))

    def state_dict(self) -> dict[str, Any]:
        state = {**super().state_dict(), "semantics": self.semantics, "window": self.window}
        if self.semantics == RELEASED:
            state["reward_windows"] = {d: list(w) for d, w in self.reward_windows.items()}
        else:
            state["advantage_windows"] = {d: list(w) for d, w in self.advantage_windows.items()}
            state["counts"] = dict(self.counts)
        return state

    def load_state_dict(self, state: dict[str, Any]) -> None:
        super().load_state_dict(state)
        if state.get("semantics") != self.semantics:
            raise ValueError(f"checkpoint dump_ucb semantics {state.get('semantics')!r} differ from {self.semantics!r}")
        if self.semantics == RELEASED:
            self.reward_windows = {d: _load_window(state["reward_windows"][d], self.window) for d in self.domains}
        else:
            self.advantage_windows = {d: _load_window(state["advantage_windows"][d], self.window)
                                      for d in self.domains}
            self.counts = {d: int(state["counts"][d]) for d in self.domains}


def least_squares_slope(points: list[tuple[float, float]]) -> float:
    """Slope of the least-squares line through (x, y) points (≥ 2 distinct x)."""
    n = len(points)
    mean_x = sum(x for x, _ in points) / n
    mean_y = sum(y for _, y in points) / n
    spread = sum((x - mean_x) ** 2 for x, _ in points)
    return sum((x - mean_x) * (y - mean_y) for x, y in points) / spread if spread > 0 else 0.0


@policy("tscl")
class TSCLMixture(_RewardWindowMixture):
    """Teacher–Student Curriculum Learning (arXiv:1707.00183), the windowed teacher, over domains.

    Paper semantics: after every optimiser step, each domain present in the batch records (t, score) with t the
    step index (observe calls so far) and score its mean reward in that batch. Learning progress of d is the slope
    of a least-squares line through its last `window` (K = 10) records — |slope| with `absolute` (TSCL: progress
    and forgetting both deserve practice); a domain with fewer than 2 records gets `initial_progress` (1, TSCL's
    optimistic start, so every domain is tried). The teacher's policy over progress:
    - "epsilon_greedy" (default, ε = 0.1): (1 − ε) on the best domain, ε spread uniformly; TSCL breaks ties at
      random, here the (1 − ε) is split equally among tied domains — the expectation of that draw, deterministic;
    - "boltzmann": softmax(progress / temperature) (temperature 0.0004, TSCL's default).
    Then an optional floor (0 by default).

    `semantics: dataflex_released`: the released trainer handed tscl the windowed mean reward (50 responses), not
    a slope: p = softmax(|mean reward| / 1) with a 0.05 floor — the same policy as released dump_ucb.
    """

    def __init__(self, domains: list[str], window: int, policy: str, epsilon: float, temperature: float,
                 absolute: bool, initial_progress: float, floor: float, semantics: str) -> None:
        super().__init__(domains)
        self.semantics = semantics
        self.window, self.policy, self.epsilon, self.absolute = int(window), policy, float(epsilon), bool(absolute)
        self.initial_progress, self.temperature, self.floor = float(initial_progress), float(temperature), float(floor)
        if semantics == RELEASED:
            self._init_reward_windows(self.window)
        else:
            self.step = 0
            self.history = {d: deque(maxlen=self.window) for d in self.domains}

    def observe(self, batch: GroupBatch) -> None:
        if self.semantics == RELEASED:
            self._observe_rewards(batch)
            return
        totals: dict[str, list[float]] = {}
        for domain, rewards in zip(batch.domains, batch.rewards.tolist()):
            _check_domain(domain, self.history)
            totals.setdefault(domain, []).extend(rewards)
        for domain, rewards in totals.items():
            self.history[domain].append((float(self.step), _mean(rewards)))
        self.step += 1

    def progress(self) -> dict[str, float]:
        """Learning progress per domain (paper) or the released statistic |windowed mean reward|."""
        if self.semantics == RELEASED:
            return {d: abs(_mean(self.reward_windows[d])) for d in self.domains}
        progress = {}
        for d in self.domains:
            records = list(self.history[d])
            slope = least_squares_slope(records) if len(records) >= 2 else self.initial_progress
            progress[d] = abs(slope) if self.absolute else slope
        return progress

    def probabilities(self) -> dict[str, float]:
        progress = self.progress()
        values = [progress[d] for d in self.domains]
        if self.semantics == RELEASED:
            return self._released_probabilities(values)
        if self.policy == "boltzmann":
            p = _softmax(values, self.temperature)
        else:
            best = max(values)
            winners = sum(v == best for v in values)
            p = [self.epsilon / len(values) + (1.0 - self.epsilon) * (v == best) / winners for v in values]
        return dict(zip(self.domains, _apply_floor(p, self.floor)))

    def state_dict(self) -> dict[str, Any]:
        state = {**super().state_dict(), "semantics": self.semantics, "window": self.window}
        if self.semantics == RELEASED:
            state["reward_windows"] = {d: list(w) for d, w in self.reward_windows.items()}
        else:
            state["step"] = self.step
            state["history"] = {d: [list(record) for record in h] for d, h in self.history.items()}
        return state

    def load_state_dict(self, state: dict[str, Any]) -> None:
        super().load_state_dict(state)
        if state.get("semantics") != self.semantics:
            raise ValueError(f"checkpoint tscl semantics {state.get('semantics')!r} differ from {self.semantics!r}")
        if self.semantics == RELEASED:
            self.reward_windows = {d: _load_window(state["reward_windows"][d], self.window) for d in self.domains}
        else:
            self.step = int(state["step"])
            self.history = {d: deque(((float(t), float(y)) for t, y in state["history"][d]), maxlen=self.window)
                            for d in self.domains}
