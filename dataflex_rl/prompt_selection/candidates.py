"""Which corpus rows a prompt-selection run draws, in which order — pure Python, no torch.

- The validation prompts: `validation_size` rows drawn once by `validation_seed` from the rows a regime left
  trustworthy (not reward-noised; the unbalanced pool's target domain only), the same for every seed and method. The
  union of the draws of every prompt-selection method trained on a corpus is held out of every run on it
  (`held_out_rows`), whatever its method.
- The candidates: the pool (every other row) is permuted once per seed and cut into ⌊N/M⌋ disjoint chunks; round r
  scores chunk r mod ⌊N/M⌋ (the rest of the permutation is never a candidate, as in the released loop). The chunks
  depend on the seed alone, so every method of a seed scores the same candidates.
- The training order inside a round: the kept rows, walked through one seeded permutation per pass, B per step; a
  round of I steps therefore makes I·B/|S_r| passes ("epochs") over its kept set, the last one partial when that is
  not a whole number.
"""
from __future__ import annotations

import random
from dataclasses import dataclass
from typing import Sequence

# Elements of a whole-model gradient vector that a round handles at once where it would otherwise copy the whole
# vector: the verl round's host sum adds each replica's gradient a block at a time (backends/verl/probe_gradients.HostSum)
# and scores.module_contributions multiplies in fp64 a block at a time; the verl dry run counts the blocks in flight
# (backends/verl/probe_settings.round_host_memory). Here, torch-free, so both layers read the one value.
GRADIENT_BLOCK = 1 << 22


@dataclass(frozen=True)
class SelectionSize:
    """The size of a study's largest prompt-selection round, what a memory estimate needs: M candidates, the most
    rollouts a round draws per prompt (max(k_r, k_v)), and the most per-group gradients a round holds at once
    (`gradient_rows`: M under a random projection, |P_v| with normalised validation groups; 0 where every reduction
    streams one group at a time)."""

    candidates: int
    rollouts: int
    gradient_rows: int = 0


def validation_rows(eligible: Sequence[int], size: int, seed: int) -> list[int]:
    """`size` rows drawn uniformly without replacement from `eligible`, in draw order."""
    if size > len(eligible):
        fixes = [f"lower validation_size to at most {len(eligible)}"] if eligible else []
        fixes.append("give the regime's pool more eligible rows (a larger share of an unbalanced regime, a smaller "
                     "fraction of a noisy_rewards one)")
        raise ValueError(f"prompt selection: validation_size {size} exceeds the {len(eligible)} corpus rows eligible "
                         "as validation prompts (not reward-noised, in the regime's evaluation domain); "
                         + ", or ".join(fixes))
    return random.Random(f"validation:{seed}").sample(list(eligible), size)


def held_out_rows(eligible: Sequence[int], draws: Sequence[tuple[int, int]]) -> frozenset[int]:
    """The corpus rows a study holds out of training on one corpus: the union of its prompt-selection methods'
    validation draws, (`validation_size`, `validation_seed`) each (Study.validation_draws). Every method trained on
    that corpus — the baseline and the other families too — excludes them, so that all arms draw from one pool."""
    return frozenset(row for size, seed in draws for row in validation_rows(eligible, size, seed))


class CandidateStream:
    """The chunks of one seed's pool permutation."""

    def __init__(self, pool: Sequence[int], size: int, seed: int):
        if size > len(pool):
            raise ValueError(f"prompt selection: candidates_per_round {size} exceeds the pool of {len(pool)} prompts "
                             "(the corpus without the validation prompts); lower candidates_per_round")
        self.size = size
        self.order = list(pool)
        random.Random(f"candidates:{seed}").shuffle(self.order)
        self.chunks = len(self.order) // size

    def chunk(self, round_index: int) -> list[int]:
        start = (round_index % self.chunks) * self.size
        return self.order[start:start + self.size]


def training_rows(kept: Sequence[int], seed: int, round_index: int, offset: int, count: int) -> list[int]:
    """Rows `offset` … `offset + count − 1` of the round's walk over its kept rows: pass e is the kept rows shuffled by
    (seed, round, e)."""
    rows: list[int] = []
    passes: dict[int, list[int]] = {}
    for position in range(offset, offset + count):
        epoch, index = divmod(position, len(kept))
        if epoch not in passes:
            passes[epoch] = list(kept)
            random.Random(f"kept:{seed}:{round_index}:{epoch}").shuffle(passes[epoch])
        rows.append(passes[epoch][index])
    return rows
