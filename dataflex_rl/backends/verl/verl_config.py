"""verl 0.9.1's own view of a train job's overrides, without Ray or a GPU: its `ppo_trainer` config composed with
Hydra's compose API (as `python -m verl.trainer.main_ppo` does: verl trainer/main_ppo.py:166), its `validate_config`
(verl utils/config.py:88), the dataclasses its workers build from the result (`worker_configs`), and whether verl reads
every key at all (dataflex_rl.backends.verl.verl_reads). The dry run runs
this once per verl model (VerlBackend.train_resource_errors), so an override verl refuses stops the study before any
job is planned; tests/test_verl_config.py runs it on every shipped config.

Importing verl costs seconds, so a dry run remembers the override lists that passed (keyed by verl's version) and
checks an unchanged list again only when verl changes.
"""
from __future__ import annotations

import contextlib
import hashlib
import io
import os
import warnings
from importlib import metadata
from pathlib import Path
from typing import Any, Sequence

CACHE_DIR = Path(".snakemake") / "dataflex_rl" / "verl_config_passed"  # in the workflow's working directory


def verl_version() -> str | None:
    try:
        return metadata.version("verl")
    except metadata.PackageNotFoundError:
        return None


@contextlib.contextmanager
def _quiet():
    """verl prints its checks' progress, and warns and logs about engines and accelerators a CPU machine lacks: none
    of it is the study's."""
    with contextlib.redirect_stdout(io.StringIO()), contextlib.redirect_stderr(io.StringIO()), \
            warnings.catch_warnings():
        warnings.simplefilter("ignore")
        yield


def compose(overrides: Sequence[str]):
    """verl's `ppo_trainer` config with `overrides`, as its entry point composes it."""
    import hydra
    import verl

    config_dir = os.path.join(os.path.dirname(verl.__file__), "trainer", "config")
    with hydra.initialize_config_dir(config_dir=config_dir, version_base=None):
        return hydra.compose(config_name="ppo_trainer", overrides=list(overrides))


def validate(cfg) -> None:
    """verl's own checks of a composed config, with the reference policy and critic its trainer derives."""
    from verl.trainer.ppo.utils import need_critic, need_reference_policy
    from verl.utils.config import validate_config

    validate_config(cfg, use_reference_policy=need_reference_policy(cfg), use_critic=need_critic(cfg))


def worker_configs(cfg) -> dict[str, Any]:
    """The dataclasses verl's workers and trainer build from the composed config: the actor and its optimizer and
    checkpoint settings, the reference policy reshaped into an actor config as the worker does it (verl:
    workers/engine_workers.py:545-553), the rollout (engine_workers.py:642), its checkpoint engine
    (trainer/ppo/v1/trainer_base.py:381) and the algorithm. The model's (HFModelConfig) needs the weights: not
    built."""
    from omegaconf import open_dict
    from verl.utils.config import omega_conf_to_dataclass

    section = cfg.actor_rollout_ref
    ref = section.ref.copy()
    with open_dict(ref):
        ref.ppo_mini_batch_size = section.actor.ppo_mini_batch_size
        ref.ppo_micro_batch_size = ref.pop("log_prob_micro_batch_size", None)
        ref.ppo_micro_batch_size_per_gpu = ref.pop("log_prob_micro_batch_size_per_gpu", None)
        ref.use_dynamic_bsz = ref.pop("log_prob_use_dynamic_bsz", False)
        ref.ppo_max_token_len_per_gpu = ref.pop("log_prob_max_token_len_per_gpu", None)
    actor = omega_conf_to_dataclass(section.actor)
    return {"actor": actor, "optimizer": actor.optim, "checkpoint": actor.checkpoint,
            "ref": omega_conf_to_dataclass(ref), "rollout": omega_conf_to_dataclass(section.rollout),
            "checkpoint_engine": omega_conf_to_dataclass(section.rollout.checkpoint_engine),
            "algorithm": omega_conf_to_dataclass(cfg.algorithm)}


def checked(overrides: Sequence[str]) -> tuple[Any, str | None]:
    """verl's config with `overrides` (`compose`) and None where verl accepts them, else None and what it says against
    them (composition, validation or a worker's dataclass) or the keys among them that it declares but never reads
    (dataflex_rl.backends.verl.verl_reads). The dry run's later checks take the config from here rather than compose
    it again. verl must be importable (`unavailable`)."""
    from hydra.errors import HydraException
    from omegaconf.errors import OmegaConfBaseException

    from dataflex_rl.backends.verl.verl_reads import unread_keys

    with _quiet():
        try:
            validate(cfg := compose(overrides))
            worker_configs(cfg)
        except (HydraException, OmegaConfBaseException, AssertionError, ValueError, TypeError) as error:
            return None, f"{type(error).__name__}: {' '.join(str(error).split())}"
        unread = unread_keys(cfg, overrides)
    if unread:
        return None, (f"no code of verl reads {', '.join(unread)}: verl's config declares "
                      f"{'it' if len(unread) == 1 else 'them'}, so the setting would silently change nothing")
    return cfg, None


def unavailable() -> str | None:
    """Why verl's config cannot be checked in this environment (e.g. a login node with only Snakemake), None where it
    can."""
    try:
        with _quiet():
            import hydra  # noqa: F401
            import verl.utils.config  # noqa: F401
    except Exception as error:  # any failure to import verl (missing, or its torch broken) means: not checked
        return f"{type(error).__name__}: {error}"
    return None


def _cache_key(overrides: Sequence[str]) -> str:
    return hashlib.sha256("\n".join([f"verl=={verl_version()}", *overrides]).encode()).hexdigest()


def passed_before(overrides: Sequence[str], cache_dir: Path = CACHE_DIR) -> bool:
    return verl_version() is not None and (cache_dir / _cache_key(overrides)).exists()


def remember_passed(overrides: Sequence[str], cache_dir: Path = CACHE_DIR) -> None:
    cache_dir.mkdir(parents=True, exist_ok=True)
    (cache_dir / _cache_key(overrides)).touch()
