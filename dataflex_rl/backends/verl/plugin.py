"""verl's entry point into this package (pyproject: `[project.entry-points."verl.plugins"] dataflex_rl = ...plugin`).

Importing this module registers `DataflexTrainer` under TRAINER_NAME (the value of `trainer.v1.trainer_mode`); the
trainer checks at start-up that verl loads this module in its processes (dataflex_rl.backends.verl.registration).
"""
from __future__ import annotations

from verl.trainer.ppo.v1.trainer_base import TRAINER_REGISTRY, register_trainer

from dataflex_rl.backends.verl.registration import TRAINER_NAME
from dataflex_rl.backends.verl.trainer import DataflexTrainer

if TRAINER_REGISTRY.get(TRAINER_NAME) is not DataflexTrainer:  # a re-import registers nothing twice
    register_trainer(TRAINER_NAME)(DataflexTrainer)
