"""The Hydra overrides a verl train job passes to `python -m verl.trainer.main_ppo`, composed with verl 0.9.1's own
`ppo_trainer` config and checked by its own `validate_config` (no Ray, no GPU), for every method of the paper and the
default study; and the dry run's batch-over-GPUs check against the refusal verl itself makes."""
import os
from dataclasses import replace
from pathlib import Path

import pytest
import yaml

from dataflex_rl.backends.model_spec import ModelSpec
from dataflex_rl.backends.registry import get_backend
from dataflex_rl.backends.verl.job import VerlRunJob
from dataflex_rl.backends.verl.overrides import RunFiles, run_overrides, verl_command
from dataflex_rl.training.recipe import GRPOSettings
from dataflex_rl.study.resolved import Study

REPO = Path(__file__).resolve().parents[1]
verl = pytest.importorskip("verl")
hydra = pytest.importorskip("hydra")
from verl.trainer.ppo.utils import need_critic, need_reference_policy  # noqa: E402
from verl.utils.config import validate_config  # noqa: E402

CONFIG_DIR = os.path.join(os.path.dirname(verl.__file__), "trainer", "config")


def _compose(overrides: list[str]):
    with hydra.initialize_config_dir(config_dir=CONFIG_DIR, version_base=None):
        return hydra.compose(config_name="ppo_trainer", overrides=overrides)


def _validate(cfg) -> None:
    validate_config(cfg, use_reference_policy=need_reference_policy(cfg), use_critic=need_critic(cfg))


def _files(root: Path) -> RunFiles:
    return RunFiles(train_file=root / "train.parquet", job_file=root / "job.json", checkpoint_dir=root / "checkpoints")


def _study_runs(config_file: str):
    """(study, method name, method) for every method a verl model of the study can train."""
    study = Study.from_config(yaml.safe_load((REPO / config_file).read_text()))
    return [(config_file, study, name, method) for name, method in study.methods.items()
            if not method.family.needs_probe]


RUNS = _study_runs("config/paper.yaml") + _study_runs("config/config.yaml")


def test_every_method_of_both_studies_is_covered():
    assert [name for file, _, name, _ in RUNS if file == "config/paper.yaml"] == [
        "baseline", "difffilter", "maxvar", "gfpo", "topk", "ar", "per", "softmax", "diffband", "static",
        "reward_gap", "dump_ucb", "tscl"]
    assert [name for file, _, name, _ in RUNS if file == "config/config.yaml"] == [
        "baseline", "difffilter", "softmax", "static"]


@pytest.mark.parametrize("config_file, study, name, method", RUNS, ids=[f"{f}:{n}" for f, _, n, _ in RUNS])
def test_overrides_compose_with_verls_ppo_trainer_and_pass_its_validation(tmp_path, config_file, study, name,
                                                                            method):
    seed = study.seeds[-1]
    files = _files(tmp_path)
    VerlRunJob(method, seed, str(files.train_file), study.training.rollouts).write(files.job_file)
    responses = study.training.prompts_per_step * study.training.rollouts  # paper 64 × 5; default 12 × 5
    gpus = max(n for n in (8, 4, 2, 1) if responses % n == 0)
    overrides = run_overrides("Qwen/Qwen2.5-7B", study.training, seed, gpus=gpus, cpus=48, files=files,
                              attention="sdpa", experiment=f"{name}-seed{seed}")
    cfg = _compose(overrides)
    _validate(cfg)
    training, actor, rollout = study.training, cfg.actor_rollout_ref.actor, cfg.actor_rollout_ref.rollout
    # the recipe, as the study states it
    assert cfg.algorithm.adv_estimator == "grpo" and rollout.n == training.rollouts
    assert actor.use_kl_loss and actor.kl_loss_coef == training.kl_coef and actor.kl_loss_type == "low_var_kl"
    assert actor.entropy_coeff == 0 and actor.optim.lr == training.learning_rate
    # the key verl's FSDP engine clips with, not actor.grad_clip (declared in dp_actor.yaml, read nowhere)
    assert actor.optim.clip_grad == training.grad_clip
    assert not [o for o in overrides if o.split("=")[0].endswith("actor.grad_clip")]
    assert rollout.tensor_model_parallel_size == 1 and rollout.gpu_memory_utilization == 0.85  # as released
    assert (actor.clip_ratio_low, actor.clip_ratio_high) == (training.clip_low, training.clip_high)
    assert rollout.temperature == training.temperature
    # Eq. 1: 1/(GK) over one update per batch
    assert actor.loss_agg_mode == training.loss_aggregation == "seq-mean-token-mean" and actor.ppo_epochs == 1
    assert actor.clip_ratio_c == 3.0  # the dual clip dataflex_rl.training.grpo applies
    assert actor.ppo_mini_batch_size == cfg.data.train_batch_size == training.prompts_per_step
    assert cfg.data.max_response_length == rollout.response_length == training.max_new_tokens
    # per-run seeds for the data order and the rollouts (verl's default 42 would repeat rollouts across seeds)
    assert cfg.data.seed == rollout.seed == seed
    assert cfg.reward.custom_reward_function.reward_kwargs.seed == seed
    # the schedule: steps end the run, epochs never do; checkpoints in the state folder, resumed automatically
    assert cfg.trainer.total_training_steps == training.steps and cfg.trainer.total_epochs >= training.steps
    assert cfg.trainer.save_freq == training.checkpoint_every and cfg.trainer.resume_mode == "auto"
    assert cfg.trainer.default_local_dir == str(files.checkpoint_dir) and cfg.trainer.max_actor_ckpt_to_keep == 1
    assert cfg.trainer.n_gpus_per_node == gpus and cfg.trainer.nnodes == 1 and cfg.ray_kwargs.ray_init.num_cpus == 48
    assert list(cfg.trainer.logger) == ["console", "file"]
    # the plugin's trainer, its job file, the reward module by package (a file path would load a second copy)
    assert cfg.trainer.v1.trainer_mode == "dataflex_rl"
    assert VerlRunJob.read(cfg.dataflex_rl.job_file).method == method
    assert cfg.reward.custom_reward_function.path == "pkg://dataflex_rl.backends.verl.reward"
    assert cfg.data.train_files == str(files.train_file)


@pytest.mark.parametrize("attention, remove_padding", [("sdpa", False), ("flash_attention_2", True)])
def test_the_attention_implementation_and_padding_go_together(tmp_path, attention, remove_padding):
    cfg = _compose(run_overrides("m", GRPOSettings(), 1, gpus=1, cpus=2, files=_files(tmp_path), attention=attention))
    _validate(cfg)
    assert cfg.actor_rollout_ref.model.use_remove_padding is remove_padding
    assert cfg.actor_rollout_ref.model.override_config.get("attn_implementation", "flash_attention_2") == attention


def test_the_released_aggregation_reaches_verl(tmp_path):
    training = replace(GRPOSettings(), loss_aggregation="token-mean")
    cfg = _compose(run_overrides("m", training, 1, gpus=1, cpus=2, files=_files(tmp_path), attention="sdpa"))
    _validate(cfg)
    assert cfg.actor_rollout_ref.actor.loss_agg_mode == "token-mean"


def test_the_command_runs_verls_entry_point_with_the_overrides(tmp_path):
    overrides = run_overrides("m", GRPOSettings(), 1, gpus=1, cpus=2, files=_files(tmp_path), attention="sdpa")
    command = verl_command(overrides)
    assert command[1:3] == ["-m", "verl.trainer.main_ppo"] and command[3:] == overrides
    assert len({o.split("=")[0] for o in overrides}) == len(overrides)  # no key given twice


# (prompts per step, rollouts, GPUs): a step's responses divide over the GPUs, or do not (verl asserts
# train_batch_size × rollout.n % n_gpus == 0)
BATCHES = [(64, 5, 8), (64, 5, 5), (50, 5, 8), (64, 5, 6), (4, 4, 5), (3, 2, 6), (7, 3, 7), (9, 5, 2)]


@pytest.mark.parametrize("prompts, rollouts, gpus", BATCHES)
def test_the_dry_runs_batch_check_predicts_verls_refusal(tmp_path, prompts, rollouts, gpus):
    training = replace(GRPOSettings(), prompts_per_step=prompts, rollouts=rollouts)
    model = ModelSpec.from_entry("qwen", {"backend": "verl", "path": "m"})
    predicted = get_backend("verl").train_resource_errors("models.qwen", model, training, {"gpu": gpus}, None)
    cfg = _compose(run_overrides("m", training, 1, gpus=gpus, cpus=2, files=_files(tmp_path), attention="sdpa"))
    if predicted:
        with pytest.raises(AssertionError, match=str(gpus)):
            _validate(cfg)
    else:
        _validate(cfg)
    assert bool(predicted) == bool((prompts * rollouts) % gpus)  # the hand count: responses modulo GPUs


def test_verl_loads_our_reward_by_package_with_the_runs_seed(tmp_path):
    """verl's own loader (trainer/ppo/reward.py) resolves the composed reward settings to our compute_score, the
    same module object (pkg://, not a second copy from a file), called with the run's seed."""
    from verl.trainer.ppo.reward import get_custom_reward_fn

    import dataflex_rl.backends.verl.reward as reward

    cfg = _compose(run_overrides("m", GRPOSettings(), 11, gpus=1, cpus=2, files=_files(tmp_path), attention="sdpa"))
    score = get_custom_reward_fn(cfg)
    assert score.args[0] is reward.compute_score  # verl wraps the function it loaded with its reward_kwargs
    info = {"id": "q-1", "domain": "math", "question": "1+1", "answer_format": "math", "metadata": "{}",
            "noise_p": 0.5}
    responses = [f"response {i}" for i in range(64)]
    draws = [score(data_source="s", solution_str=r, ground_truth="2", extra_info=info) for r in responses]
    assert draws == [reward.compute_score("s", r, "2", info, seed=11) for r in responses]
    assert draws != [reward.compute_score("s", r, "2", info, seed=12) for r in responses]
    verified = {**info, "noise_p": None}
    assert score(data_source="s", solution_str="\\boxed{2}", ground_truth="2", extra_info=verified) == 1
