"""Procedural task sources: one named generator (reasoning-gym's or the project's science one) → corpus rows
(dataflex_rl.artefacts.items.CORPUS_COLUMNS). The procedural stand-in benchmarks are drawn from them, and so is the
training corpus, with another seed."""
from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any

from dataflex_rl.item_sources.science import generate_science


@dataclass(frozen=True)
class TaskSource:
    """A generator with its parameters. `generator` is "reasoning_gym" or "science"; `dataset` names the task."""

    name: str
    domain: str
    generator: str
    dataset: str
    params: dict[str, Any] = field(default_factory=dict)

    @property
    def answer_format(self) -> str:
        return "multiple_choice" if self.generator == "science" else "procedural"

    @classmethod
    def from_config(cls, name: str, spec: dict[str, Any]) -> "TaskSource":
        return cls(name=name, domain=spec["domain"], generator=spec["generator"], dataset=spec["dataset"],
                   params=dict(spec.get("params", {})))


def _reasoning_gym_items(source: TaskSource, n: int, seed: int) -> list[dict]:
    import reasoning_gym

    dataset = reasoning_gym.create_dataset(source.dataset, size=n, seed=seed, **source.params)
    return [{"question": e["question"], "answer": str(e["answer"]), "metadata": e["metadata"]} for e in dataset]


def generate_items(source: TaskSource, n: int, seed: int, id_prefix: str) -> list[dict]:
    """`n` items of `source` drawn with `seed`; ids are `{id_prefix}-{source.name}-{index}`."""
    if source.generator == "reasoning_gym":
        raw = _reasoning_gym_items(source, n, seed)
    elif source.generator == "science":
        raw = generate_science(source.dataset, n, seed)
    else:
        raise ValueError(f"task source {source.name!r}: unknown generator {source.generator!r} "
                         "(use 'reasoning_gym' or 'science')")
    return [
        {
            "id": f"{id_prefix}-{source.name}-{i:06d}",
            "domain": source.domain,
            "source": source.name,
            "prompt": item["question"],
            "answer": item["answer"],
            "answer_format": source.answer_format,
            "metadata": json.dumps(item["metadata"], sort_keys=True, default=str),
        }
        for i, item in enumerate(raw)
    ]
