"""verl 0.9.1's own config, checked on CPU for every shipped study with a verl model: the full override list of a
train job composed with verl's `ppo_trainer` (Hydra's compose API), validated by verl's `validate_config`, built into
the dataclasses verl's workers build (dataflex_rl.backends.verl.verl_config) — and every key we override is one
verl 0.9.1 reads, found in its installed source, so a declared-but-unread key (0.9.1's `actor.grad_clip`) fails."""
import ast
import functools
import re
from dataclasses import replace
from pathlib import Path

import pytest
import yaml
from snakemake.utils import update_config

from dataflex_rl.backends.verl.overrides import RunFiles, run_overrides
from dataflex_rl.backends.verl.rollout import RolloutSettings
from dataflex_rl.recipe import GRPOSettings
from dataflex_rl.sections import filled
from dataflex_rl.study import Study

verl = pytest.importorskip("verl")
from dataflex_rl.backends.verl import verl_config  # noqa: E402

REPO = Path(__file__).resolve().parents[1]
VERL = Path(verl.__file__).parent
COMMAND = re.compile(r"^#.*--configfile\s+((?:config/\S+\.yaml\s*)+)", re.M)


def _study_files(path: Path) -> tuple[str, ...]:
    """The config files a shipped config runs with: an overlay's header names its command (`--configfile base
    overlay`); any other config runs alone."""
    name = str(path.relative_to(REPO))
    for match in COMMAND.finditer(path.read_text()):
        files = tuple(match.group(1).split())
        if files[-1] == name:
            return files
    return (name,)


def _merged(files: tuple[str, ...]) -> dict:
    config: dict = {}
    for file in files:
        update_config(config, yaml.safe_load((REPO / file).read_text()))
    return config


def _shipped_verl_studies() -> dict[str, dict]:
    """Every shipped study (config/*.yaml, config/campaigns/*.yaml) with a verl model, by its config files."""
    paths = sorted((REPO / "config").glob("*.yaml")) + sorted((REPO / "config/campaigns").glob("*.yaml"))
    studies = {}
    for path in paths:
        if path.name == "schema.yaml":
            continue
        files = _study_files(path)
        config = _merged(files)
        if any(entry.get("backend") == "verl" for entry in (config.get("models") or {}).values()):
            studies[" + ".join(files)] = config
    return studies


STUDIES = _shipped_verl_studies()


def test_discovery_finds_the_shipped_verl_studies_and_their_bases():
    assert {"config/paper.yaml", "config/released.yaml",
            "config/paper.yaml + config/campaigns/released.yaml"} <= set(STUDIES)
    assert not any("embedded.yaml" in name or "gradalign.yaml" in name for name in STUDIES)  # embedded-only


def _model_overrides(config: dict, tmp_path: Path) -> list[tuple[str, list[str]]]:
    """(model, its train job's overrides) for every verl model of a study, on the train job's default GPUs where
    they take the step's responses evenly (verl's own check), else the largest count that does."""
    study = Study.from_config(config)
    training = study.training
    responses = training.prompts_per_step * training.rollouts
    runs = []
    for name, spec in study.models.items():
        if spec.backend != "verl":
            continue
        rollout = filled(RolloutSettings, spec.settings["rollout"])
        gpus = max(n for n in (8, 4, 2, 1) if responses % n == 0 and n % rollout.tensor_parallel_size == 0)
        runs.append((name, run_overrides(spec.path, training, study.seeds[0], gpus=gpus, cpus=16,
                                         files=RunFiles.in_state(tmp_path), attention="sdpa",
                                         rollout_engine=rollout)))
    return runs


@pytest.mark.parametrize("name", sorted(STUDIES))
def test_every_verl_model_of_a_shipped_study_composes_validates_and_builds_verls_worker_configs(tmp_path, name):
    runs = _model_overrides(STUDIES[name], tmp_path)
    assert runs
    for model, overrides in runs:
        assert verl_config.refusal(overrides) is None, model
        cfg = verl_config.compose(overrides)
        built = verl_config.worker_configs(cfg)
        assert type(built["actor"]).__name__ == "FSDPActorConfig" and type(built["rollout"]).__name__ == "RolloutConfig"
        assert built["rollout"].tensor_model_parallel_size == 1  # the released runs' TP, not verl's default 2
        assert built["ref"].ppo_micro_batch_size_per_gpu == 1  # reshaped from ref.log_prob_micro_batch_size_per_gpu
        assert built["algorithm"].adv_estimator == "grpo"
        assert built["checkpoint_engine"] is not None and built["checkpoint"] is not None


def test_a_grad_clip_reaches_what_verls_fsdp_engine_clips_with(tmp_path):
    """verl's FSDP engine clips with its optimizer config's clip_grad (verl: workers/engine/fsdp/transformer_impl.py
    optimizer_step), which the actor worker builds from actor.optim."""
    training = replace(GRPOSettings(), grad_clip=0.5)
    cfg = verl_config.compose(run_overrides("m", training, 1, gpus=1, cpus=2, files=RunFiles.in_state(tmp_path),
                                            attention="sdpa"))
    built = verl_config.worker_configs(cfg)
    assert built["optimizer"].clip_grad == 0.5 and built["actor"].optim.clip_grad == 0.5
    source = (VERL / "workers/engine/fsdp/transformer_impl.py").read_text()
    assert "self.module.clip_grad_norm_(self.optimizer_config.clip_grad)" in source  # the field the engine reads


def test_the_rollout_block_reaches_verls_rollout_config(tmp_path):
    engine = RolloutSettings(tensor_parallel_size=2, gpu_memory_utilization=0.3, enforce_eager=True)
    cfg = verl_config.compose(run_overrides("m", GRPOSettings(), 1, gpus=2, cpus=2, files=RunFiles.in_state(tmp_path),
                                            attention="sdpa", rollout_engine=engine))
    rollout = verl_config.worker_configs(cfg)["rollout"]
    assert (rollout.tensor_model_parallel_size, rollout.gpu_memory_utilization, rollout.enforce_eager) == (2, 0.3, True)


def test_verl_refuses_an_unknown_key_naming_it(tmp_path):
    overrides = run_overrides("m", GRPOSettings(), 1, gpus=1, cpus=2, files=RunFiles.in_state(tmp_path),
                              attention="sdpa")
    refusal = verl_config.refusal([*overrides, "actor_rollout_ref.actor.optim.clip_gradient=1.0"])
    assert "clip_gradient" in refusal


# --- every overridden key is read by verl 0.9.1 ----------------------------------------------------------------------

@functools.lru_cache(maxsize=None)
def _reads(root: Path) -> dict[str, list[tuple[str, int, str | None]]]:
    """Every read of a name in the Python source under `root`, by name: `x.name` (an attribute load),
    `x["name"]`, `x.get("name")`/`x.pop("name")`, `getattr(x, "name")`, as (file, line, enclosing class where it
    is `self.name`). Declarations are not reads: YAML files are not scanned, and a dataclass field (`name: int = 1`)
    is an annotation, not an attribute load. Scanned once per session."""
    reads: dict[str, list] = {}

    class Reads(ast.NodeVisitor):
        def __init__(self, file):
            self.file, self.classes = file, []

        def _add(self, name, node, owner=None):
            reads.setdefault(name, []).append((self.file, node.lineno, owner))

        def visit_ClassDef(self, node):
            self.classes.append(node.name)
            self.generic_visit(node)
            self.classes.pop()

        def visit_Attribute(self, node):
            if isinstance(node.ctx, ast.Load):
                is_self = isinstance(node.value, ast.Name) and node.value.id == "self"
                self._add(node.attr, node, (self.classes[-1] if self.classes else None) if is_self else None)
            self.generic_visit(node)

        def visit_Subscript(self, node):
            if isinstance(node.slice, ast.Constant) and isinstance(node.slice.value, str):
                self._add(node.slice.value, node)
            self.generic_visit(node)

        def visit_Call(self, node):
            function, args = node.func, node.args
            method = isinstance(function, ast.Attribute) and function.attr in ("get", "pop") and args
            builtin = isinstance(function, ast.Name) and function.id == "getattr" and len(args) > 1
            name = args[0] if method else args[1] if builtin else None
            if isinstance(name, ast.Constant) and isinstance(name.value, str):
                self._add(name.value, node)
            self.generic_visit(node)

    for path in sorted(root.rglob("*.py")):
        Reads(str(path.relative_to(root))).visit(ast.parse(path.read_text(), str(path)))
    return reads


# Keys verl reads other than by their own name, each with the line that reads it and the text on that line.
INDIRECT = {
    # interpolated into rollout.response_length, which the rollout reads by name
    "data.max_response_length": ("trainer/config/rollout/rollout.yaml", 39, "${oc.select:data.max_response_length"),
    # the whole ray_init block is ray.init's keyword arguments
    "ray_kwargs.ray_init.num_cpus": ("trainer/main_ppo.py", 74, "ray.init(**OmegaConf.to_container(ray_init_kwargs))"),
    # the whole reward_kwargs block is passed to the reward function as keywords
    "reward.custom_reward_function.reward_kwargs.seed": ("trainer/ppo/reward.py", 82,
                                                         'reward_fn_config.get("reward_kwargs", {})'),
}
# Our own block, read by the plugin's trainer (not by verl)
OURS = {"dataflex_rl.job_file": REPO / "dataflex_rl/backends/verl/trainer.py"}


def _section_classes(cfg, key: str) -> set[str]:
    """The class names (with their bases) of the dataclass verl builds the section holding `key` into (its
    `_target_`), whose own `self.<leaf>` reads belong to that section."""
    from hydra.utils import get_class

    node = cfg
    for part in key.split(".")[:-1]:
        node = node.get(part) if node is not None else None
    target = node.get("_target_") if node is not None and hasattr(node, "get") else None
    return {cls.__name__ for cls in get_class(target).__mro__} if target else set()


def _unread_keys(overrides: list[str]) -> list[str]:
    cfg = verl_config.compose(overrides)
    reads = _reads(VERL)
    unread = []
    for override in overrides:
        key = override.split("=", 1)[0].lstrip("+")
        leaf = key.rsplit(".", 1)[-1]
        if key in INDIRECT or key in OURS:
            continue
        owners = _section_classes(cfg, key)
        if not any(owner is None or owner in owners for _, _, owner in reads.get(leaf, [])):
            unread.append(key)
    return unread


def test_every_overridden_key_of_every_shipped_study_is_one_verl_reads(tmp_path):
    for name, config in STUDIES.items():
        for model, overrides in _model_overrides(config, tmp_path):
            assert _unread_keys(overrides) == [], (name, model)


def test_the_reads_check_fails_on_the_key_verl_declares_but_never_reads(tmp_path):
    """0.9.1's actor config declares grad_clip and its optimizer config reads its own (deprecated) grad_clip: neither
    is a read of actor.grad_clip, so the check catches the key the backend used to emit."""
    overrides = run_overrides("m", GRPOSettings(), 1, gpus=1, cpus=2, files=RunFiles.in_state(tmp_path),
                              attention="sdpa")
    assert _unread_keys([*overrides, "actor_rollout_ref.actor.grad_clip=0.5"]) == ["actor_rollout_ref.actor.grad_clip"]
    assert _unread_keys([*overrides, "+actor_rollout_ref.actor.optim.grad_clip=0.5"]) == []  # optimizer.py reads it


@pytest.mark.parametrize("key, where", sorted(INDIRECT.items()))
def test_each_key_read_indirectly_is_read_on_the_line_cited(key, where):
    file, line, text = where
    assert text in (VERL / file).read_text().splitlines()[line - 1]


def test_our_own_block_is_read_by_the_plugins_trainer():
    for key, module in OURS.items():
        leaf = key.rsplit(".", 1)[-1]
        assert leaf in _reads(module.parent) and any(file == module.name for file, _, _ in _reads(module.parent)[leaf])
