"""The order in which training prompts are drawn, shared by every method of a seed.

Matched seeds mean the same prompt order: a run without a mixture walks one seeded permutation of the whole corpus;
a run with a mixture first draws a domain from p_t(d) and then takes the next prompt of that domain's own seeded
permutation. Both permutations depend only on the seed, so two methods of one seed see the same prompts in the same
order wherever their domain draws agree. The state (positions, epoch, RNG) goes into checkpoints.
"""
from __future__ import annotations

import random
from typing import Mapping, Sequence


class PromptStream:
    def __init__(self, row_domains: Sequence[str], seed: int, held_out: frozenset[int] = frozenset()):
        """`held_out`: rows never drawn (the study's validation prompts: prompt_selection.candidates.held_out_rows)."""
        self._seed = seed
        self._rows_by_domain: dict[str, list[int]] = {}
        self._all_rows = [row for row in range(len(row_domains)) if row not in held_out]
        for row in self._all_rows:
            self._rows_by_domain.setdefault(row_domains[row], []).append(row)
        self._domain_rng = random.Random(f"domains:{seed}")
        self._queues: dict[str, dict] = {}
        self._orders: dict[tuple[str, int], list[int]] = {}  # cache of the current permutation per key and epoch

    @property
    def domains(self) -> list[str]:
        return sorted(self._rows_by_domain)

    def corpus_shares(self) -> dict[str, float]:
        """p(d) under uniform sampling from the corpus: each domain's share of its rows."""
        total = len(self._all_rows)
        return {d: len(rows) / total for d, rows in sorted(self._rows_by_domain.items())}

    def _next(self, key: str, rows: list[int]) -> int:
        """The next row of `key`'s permutation; a new permutation (seeded by key, seed and epoch) after each pass."""
        queue = self._queues.setdefault(key, {"epoch": 0, "position": 0})
        if queue["position"] == len(rows):
            queue["epoch"] += 1
            queue["position"] = 0
        cache_key = (key, queue["epoch"])
        if cache_key not in self._orders:
            order = list(rows)
            random.Random(f"order:{key}:{self._seed}:{queue['epoch']}").shuffle(order)
            self._orders = {k: v for k, v in self._orders.items() if k[0] != key}
            self._orders[cache_key] = order
        row = self._orders[cache_key][queue["position"]]
        queue["position"] += 1
        return row

    def draw(self, n: int, probabilities: Mapping[str, float] | None = None) -> list[int]:
        """`n` corpus rows: uniform over the corpus, or domain-first from `probabilities`."""
        if probabilities is None:
            return [self._next("*", self._all_rows) for _ in range(n)]
        unknown = set(probabilities) - set(self._rows_by_domain)
        if unknown:
            raise ValueError(f"mixture domains {sorted(unknown)} are not in the corpus (it has {self.domains})")
        names = sorted(probabilities)
        picks = self._domain_rng.choices(names, weights=[probabilities[d] for d in names], k=n)
        return [self._next(domain, self._rows_by_domain[domain]) for domain in picks]

    def state_dict(self) -> dict:
        return {"queues": {k: dict(v) for k, v in self._queues.items()}, "domain_rng": self._domain_rng.getstate()}

    def load_state_dict(self, state: dict) -> None:
        self._queues = {k: dict(v) for k, v in state["queues"].items()}
        self._domain_rng.setstate(state["domain_rng"])
