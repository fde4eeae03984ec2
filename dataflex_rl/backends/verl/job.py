"""What a verl train job hands its trainer subclass: one JSON file, named in the Hydra config as
`+dataflex_rl.job_file=<path>`.

verl builds the trainer inside a Ray actor from the composed Hydra config alone, so the data policy's settings cannot
be passed as Python objects. Nested method parameters do not survive Hydra's override grammar either (quotes, lists,
floats written as strings), so the job travels as a file beside the run's state, written by the train job and read
once by `DataflexTrainer.__init__`. Torch-free.
"""
from __future__ import annotations

import json
from dataclasses import asdict, dataclass
from pathlib import Path

from dataflex_rl.artefacts.atomic import atomic_path
from dataflex_rl.policies.methods import MethodSpec

# the top-level Hydra block the trainer reads (`+dataflex_rl.job_file=...`)
CONFIG_BLOCK = "dataflex_rl"


@dataclass(frozen=True)
class VerlRunJob:
    """One run's data-policy side: the method, the run's seed (prompt order and the policy's own draws), the
    training corpus in verl's parquet schema (dataflex_rl.backends.verl.dataset; its row order is the corpus's,
    which the policy driver's row indices refer to), the rollouts per prompt (verl's `rollout.n`), the domain a
    prompt selection validates on (None: any), where a prompt selection's round files are (selection_rounds.py;
    None for other methods), the study's validation draws on this corpus (Study.validation_draws), held out of
    this run's prompts whatever its method, and a prompt selection's own validation rows in verl's schema (its
    `validation` file's or benchmark's; None: drawn from the corpus), numbered after the corpus rows."""

    method: MethodSpec
    seed: int
    train_file: str
    rollouts: int
    target_domain: str | None = None
    rounds_dir: str | None = None
    validation_draws: tuple[tuple[int, int], ...] = ()
    validation_file: str | None = None

    def write(self, path: str | Path) -> Path:
        with atomic_path(path) as tmp:
            Path(tmp).write_text(json.dumps(asdict(self), indent=1, sort_keys=True))
        return Path(path)

    @classmethod
    def read(cls, path: str | Path) -> "VerlRunJob":
        try:
            raw = json.loads(Path(path).read_text())
        except (OSError, ValueError) as error:
            raise ValueError(f"{path}: cannot read the verl run job ({error}); the train job writes it before "
                             f"launching verl — rerun the train job") from None
        return cls(**{**raw, "method": MethodSpec.from_job(raw["method"]),
                      "validation_draws": tuple(tuple(draw) for draw in raw.get("validation_draws", ()))})
