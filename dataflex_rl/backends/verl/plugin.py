"""verl's entry point into this package (pyproject: `[project.entry-points."verl.plugins"] dataflex_rl = ...plugin`).

verl imports every admitted plugin on `import verl`, in the driver and in each Ray actor, and a plugin that fails to
load is skipped with a debug-level log line nobody sees. Importing this module registers `DataflexTrainer` under
TRAINER_NAME (the value of `trainer.v1.trainer_mode`); `check_registered`, which the trainer calls at start-up, fails
loudly where verl would not load the plugin in its processes.
"""
from __future__ import annotations

import logging
import os
from importlib.metadata import entry_points

from verl.trainer.ppo.v1.trainer_base import TRAINER_REGISTRY, register_trainer

from dataflex_rl.backends.verl.trainer import DataflexTrainer

TRAINER_NAME = "dataflex_rl"
ENTRY_POINT_GROUP = "verl.plugins"
ENTRY_POINT_NAME = "dataflex_rl"
PLUGINS_VARIABLE = "VERL_USE_EXTERNAL_PLUGINS"  # verl's switch: auto (default) | none | name1,name2

logger = logging.getLogger(__name__)
logger.setLevel(logging.INFO)  # verl configures the root logger at WARNING; the start-up line must reach the logs

if TRAINER_REGISTRY.get(TRAINER_NAME) is not DataflexTrainer:  # a re-import registers nothing twice
    register_trainer(TRAINER_NAME)(DataflexTrainer)


def _installed() -> bool:
    return any(point.name == ENTRY_POINT_NAME and point.value == __name__
               for point in entry_points(group=ENTRY_POINT_GROUP))


def _admitted_by_verl() -> bool:
    """Whether `import verl` loads this module: the entry point is installed and VERL_USE_EXTERNAL_PLUGINS admits it
    (verl/__init__.py of 0.9.1 reads the variable the same way)."""
    policy = os.getenv(PLUGINS_VARIABLE, "auto").strip().lower()
    if policy == "none" or not _installed():
        return False
    return policy == "auto" or ENTRY_POINT_NAME in {name.strip() for name in policy.split(",")}


def check_registered() -> None:
    """Refuse to start unless verl's trainer registry maps TRAINER_NAME to DataflexTrainer and verl loads this plugin
    by its entry point (so every verl process, not only this one, has it)."""
    registered = TRAINER_REGISTRY.get(TRAINER_NAME)
    if registered is not DataflexTrainer or not _admitted_by_verl():
        found = "nothing" if registered is None else registered.__name__
        installed = "installed" if _installed() else "not installed"
        raise RuntimeError(
            f"verl did not load the DataFlex-RL plugin: its trainer registry maps {TRAINER_NAME!r} to {found}, and "
            f"{PLUGINS_VARIABLE}={os.getenv(PLUGINS_VARIABLE, 'auto')!r} with the entry point "
            f"[{ENTRY_POINT_GROUP}] {ENTRY_POINT_NAME} = {__name__} {installed}. "
            f"Expected the entry point installed (pip install the dataflex_rl package into verl's environment) and "
            f"{PLUGINS_VARIABLE} unset, 'auto', or a list naming {ENTRY_POINT_NAME!r}")
    logger.info("dataflex_rl plugin registered in %d", os.getpid())
