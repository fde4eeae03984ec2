"""verl 0.9.1's own config, checked on CPU for every shipped study with a verl model: the full override list of a
train job composed with verl's `ppo_trainer` (Hydra's compose API), validated by verl's `validate_config`, built into
the dataclasses verl's workers build (dataflex_rl.backends.verl.verl_config) — and every key we override is one
verl 0.9.1 reads, found in its installed source, so a declared-but-unread key (0.9.1's `actor.grad_clip`) fails."""
import re
import shutil
import subprocess
import sys
from collections import Counter
from dataclasses import replace
from pathlib import Path

import pytest
import yaml
from snakemake.utils import update_config

from dataflex_rl.backends.verl.overrides import RunFiles, run_overrides
from dataflex_rl.backends.verl.rollout import RolloutSettings
from dataflex_rl.training.recipe import GRPOSettings
from dataflex_rl.config.sections import filled
from dataflex_rl.study.resolved import Study
from hf_model_dir import save_hf_model_dir

verl = pytest.importorskip("verl")
from dataflex_rl.backends.verl import verl_config, verl_reads  # noqa: E402

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
        cfg, refusal = verl_config.checked(overrides)
        assert refusal is None, model
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


def test_a_prompt_selections_validation_rows_reach_verls_train_files_after_the_corpus(tmp_path):
    files = RunFiles.in_state(tmp_path)
    overrides = run_overrides("m", GRPOSettings(), 1, gpus=1, cpus=2, files=files, attention="sdpa", validation=True)
    cfg, refusal = verl_config.checked(overrides)
    assert refusal is None
    assert list(cfg.data.train_files) == [str(files.train_file), str(files.validation_file)]
    plain = verl_config.compose(run_overrides("m", GRPOSettings(), 1, gpus=1, cpus=2, files=files, attention="sdpa"))
    assert plain.data.train_files == str(files.train_file)


def test_verl_refuses_an_unknown_key_naming_it(tmp_path):
    overrides = run_overrides("m", GRPOSettings(), 1, gpus=1, cpus=2, files=RunFiles.in_state(tmp_path),
                              attention="sdpa")
    cfg, refusal = verl_config.checked([*overrides, "actor_rollout_ref.actor.optim.clip_gradient=1.0"])
    assert cfg is None and "clip_gradient" in refusal


# --- every overridden key is read by verl 0.9.1 ----------------------------------------------------------------------

# Our own block, read by the plugin's trainer (not by verl)
OURS = {"dataflex_rl.job_file": REPO / "dataflex_rl/backends/verl/trainer.py"}


def _unread_keys(overrides: list[str]) -> list[str]:
    return verl_reads.unread_keys(verl_config.compose(overrides), overrides)


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


@pytest.mark.parametrize("key, where", sorted(verl_reads.INDIRECT.items()))
def test_each_key_read_indirectly_is_read_on_the_line_cited(key, where):
    file, line, text = where
    assert text in (VERL / file).read_text().splitlines()[line - 1]


def test_our_own_block_is_read_by_the_plugins_trainer():
    for key, module in OURS.items():
        leaf = key.rsplit(".", 1)[-1]
        assert any(file == module.name for file, _, _ in verl_reads.source_reads(module.parent, leaf))


def test_the_reads_of_a_name_are_those_a_parse_of_every_file_finds(tmp_path):
    """source_reads parses only the files whose text contains the name: for every name the shipped studies' overrides
    ask about, and the one verl never reads, it finds what every file of verl, parsed whole, reads of it."""
    names = {override.split("=", 1)[0].rsplit(".", 1)[-1] for config in STUDIES.values()
             for _, overrides in _model_overrides(config, tmp_path) for override in overrides} | {"grad_clip"}
    every: dict[str, Counter] = {}
    for path in VERL.rglob("*.py"):
        for name, reads in verl_reads.file_reads(VERL, str(path.relative_to(VERL))).items():
            every.setdefault(name, Counter()).update(reads)
    assert {"n", "path", "clip_grad", "grad_clip"} <= names and all(every.get(name) for name in ("n", "clip_grad"))
    for name in names:
        assert Counter(verl_reads.source_reads(VERL, name)) == every.get(name, Counter()), name


def test_verls_own_check_refuses_a_key_it_declares_but_never_reads(tmp_path):
    overrides = run_overrides("m", GRPOSettings(), 1, gpus=1, cpus=2, files=RunFiles.in_state(tmp_path),
                              attention="sdpa")
    assert verl_config.checked(overrides)[1] is None
    assert verl_config.checked([*overrides, "actor_rollout_ref.actor.grad_clip=0.5"]) == (None, (
        "no code of verl reads actor_rollout_ref.actor.grad_clip: verl's config declares it, so the setting would "
        "silently change nothing"))


# What a dry run reads of the repository: Snakemake puts the Snakefile's folder first on sys.path, so a copy of these
# runs the package beside it
WORKFLOW = ("Snakefile", "rules", "config", "profiles", "envs", "workflow_scripts", "report", "dataflex_rl")


def _dry_run(code: Path) -> str:
    """The real `snakemake -n` of the smoke study on a local verl model, with the workflow and package in `code`."""
    result = subprocess.run([sys.executable, "-m", "snakemake", "-n", "--cores", "1", "--snakefile",
                             str(code / "Snakefile"), "--directory", str(code / "study"), "--configfile",
                             str(code / "study/config.yaml"), "--set-resources", "train:gpu=1"],
                            capture_output=True, text=True, timeout=600)
    return f"rc {result.returncode}\n{result.stdout}{result.stderr}"


def test_the_dry_run_refuses_an_override_verl_never_reads_before_planning(tmp_path):
    """A planted fault: a copy of the workflow whose train command sets actor.grad_clip again, as the backend once
    did. The real dry run refuses it, naming the key, before any job is planned; the workflow as shipped passes."""
    shipped, planted = tmp_path / "shipped", tmp_path / "planted"
    config = yaml.safe_load((REPO / "config/smoke.yaml").read_text())
    config["models"] = {"qwen": {"backend": "verl", "path": "./tiny-verl"}}
    for copy in (shipped, planted):
        copy.mkdir()
        shutil.copy(REPO / "Snakefile", copy)
        for folder in WORKFLOW[1:]:
            shutil.copytree(REPO / folder, copy / folder, ignore=shutil.ignore_patterns("__pycache__"))
        save_hf_model_dir(copy / "study/tiny-verl")
        (copy / "study/config.yaml").write_text(yaml.safe_dump(config))
    module = planted / "dataflex_rl/backends/verl/overrides.py"
    text = module.read_text()
    assert text.count('f"{actor}.optim.clip_grad=') == 1
    module.write_text(text.replace('f"{actor}.optim.clip_grad=', 'f"{actor}.grad_clip='))
    refused = _dry_run(planted)
    assert refused.startswith("rc 1") and "Building DAG of jobs" not in refused, refused[-3000:]
    assert ("models.qwen: verl 0.9.1 refuses the train command's overrides (dataflex_rl/backends/verl/overrides.py) — "
            "no code of verl reads actor_rollout_ref.actor.grad_clip") in refused, refused[-3000:]
    passed = _dry_run(shipped)
    assert passed.startswith("rc 0") and "Building DAG of jobs" in passed, passed[-3000:]
