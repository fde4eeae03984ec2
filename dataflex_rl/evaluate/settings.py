"""The `evaluation` section of a study config: how a score job decodes its answers, and the checks on them. Light: the
study and the backends' dry-run summary read it at parse time."""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True)
class EvaluationSettings:
    max_new_tokens: int = 8
    batch_size: int = 128
    temperature: float = 0.0
    seed: int = 0
    min_parse_rate: float = 0.5
    # above this share of answers cut at max_new_tokens, a (run, benchmark) is listed in the cut_flags table
    max_cut_share: float = 0.1
    job_per_benchmark: bool = False

    @property
    def sampling_seed(self) -> int:
        """The seed answers are drawn with: `seed` when they are sampled (temperature > 0), else 0 (greedy decoding
        draws nothing, so `seed` changes no score)."""
        return self.seed if self.temperature else 0

    def scoring(self) -> dict[str, Any]:
        """What a score depends on: the sampling seed only when answers are sampled (temperature > 0)."""
        picked = {"max_new_tokens": self.max_new_tokens, "batch_size": self.batch_size,
                  "temperature": self.temperature}
        if self.temperature:
            picked["seed"] = self.sampling_seed
        return picked
