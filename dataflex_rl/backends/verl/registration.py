"""Whether verl runs this package's trainer in every one of its processes: the check the trainer makes at start-up.

Apart from the plugin module (dataflex_rl.backends.verl.plugin), which imports the trainer to register it: the
trainer imports this check, and neither imports the other back. verl imports every admitted plugin on `import verl`,
in the driver and in each Ray actor, and a plugin that fails to load is skipped with a debug-level log line nobody
sees; `check_registered` fails loudly instead.
"""
from __future__ import annotations

import logging
import os
from importlib.metadata import entry_points

from verl.trainer.ppo.v1.trainer_base import TRAINER_REGISTRY

TRAINER_NAME = "dataflex_rl"
PLUGIN_MODULE = "dataflex_rl.backends.verl.plugin"
ENTRY_POINT_GROUP = "verl.plugins"
ENTRY_POINT_NAME = "dataflex_rl"
PLUGINS_VARIABLE = "VERL_USE_EXTERNAL_PLUGINS"  # verl's switch: auto (default) | none | name1,name2

logger = logging.getLogger(__name__)
logger.setLevel(logging.INFO)  # verl configures the root logger at WARNING; the start-up line must reach the logs


def _installed() -> bool:
    return any(point.name == ENTRY_POINT_NAME and point.value == PLUGIN_MODULE
               for point in entry_points(group=ENTRY_POINT_GROUP))


def _admitted_by_verl() -> bool:
    """Whether `import verl` loads the plugin module: the entry point is installed and VERL_USE_EXTERNAL_PLUGINS admits
    it (verl/__init__.py of 0.9.1 reads the variable the same way)."""
    policy = os.getenv(PLUGINS_VARIABLE, "auto").strip().lower()
    if policy == "none" or not _installed():
        return False
    return policy == "auto" or ENTRY_POINT_NAME in {name.strip() for name in policy.split(",")}


def check_registered(trainer: type) -> None:
    """Refuse to start unless verl's trainer registry maps TRAINER_NAME to `trainer` (the DataflexTrainer class) and
    verl loads the plugin by its entry point (so every verl process, not only this one, has it)."""
    registered = TRAINER_REGISTRY.get(TRAINER_NAME)
    if registered is not trainer or not _admitted_by_verl():
        found = "nothing" if registered is None else registered.__name__
        installed = "installed" if _installed() else "not installed"
        raise RuntimeError(
            f"verl did not load the DataFlex-RL plugin: its trainer registry maps {TRAINER_NAME!r} to {found}, and "
            f"{PLUGINS_VARIABLE}={os.getenv(PLUGINS_VARIABLE, 'auto')!r} with the entry point "
            f"[{ENTRY_POINT_GROUP}] {ENTRY_POINT_NAME} = {PLUGIN_MODULE} {installed}. "
            f"Expected the entry point installed (pip install the dataflex_rl package into verl's environment) and "
            f"{PLUGINS_VARIABLE} unset, 'auto', or a list naming {ENTRY_POINT_NAME!r}")
    logger.info("dataflex_rl plugin registered in %d", os.getpid())
