"""One run of the study as the Hydra overrides of `python -m verl.trainer.main_ppo` (verl 0.9.1's `ppo_trainer`).

Every key the shared GRPO recipe fixes is written out rather than left to verl's defaults, which differ from the
recipe in ways that change results silently: `loss_agg_mode` defaults to token-mean (not Eq. 1), `rollout.seed` to 42
for every seed (the released runs' rollouts were the same across seeds), `data.seed` to an unseeded shuffle and the
attention to flash-attn, which verl's vllm extra does not install. Torch-free; verl is not imported.
"""
from __future__ import annotations

import importlib.util
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Sequence

from dataflex_rl.backends.verl.job import CONFIG_BLOCK
from dataflex_rl.backends.verl.ray_cpus import ray_num_cpus
from dataflex_rl.backends.verl.rollout import RolloutSettings
from dataflex_rl.training.recipe import GRPOSettings

TRAINER_MODE = "dataflex_rl"  # the name the plugin registers its PPOTrainerSync subclass under
REWARD_MODULE = "pkg://dataflex_rl.backends.verl.reward"  # pkg://: a file path would load a second module copy
# The released recipe's prompt length (experiments/train_one_7b_jizhi.sh), for a study that sets no prompt cap; verl
# refuses a longer prompt (data.truncation: error) rather than cutting it.
DEFAULT_PROMPT_TOKENS = 1024
# One response per forward pass on each GPU: divides every per-GPU share of a step, so verl's divisibility checks
# reduce to train_batch_size × rollout.n over the GPUs (VerlBackend.train_resource_errors).
MICRO_BATCH_PER_GPU = 1
# vLLM's `--generation-config` folder, through the rollout's engine_kwargs (dataflex_rl.backends.verl.rollout_stops)
GENERATION_CONFIG_KEY = "actor_rollout_ref.rollout.engine_kwargs.vllm.generation_config"


@dataclass(frozen=True)
class RunFiles:
    """Where one run's inputs and state live: the training parquet (dataflex_rl.backends.verl.dataset), the run-job
    file the trainer reads, and the checkpoint folder (inside the run's state folder, so verl's resume_mode=auto
    finds it after a requeue)."""

    train_file: Path
    job_file: Path
    checkpoint_dir: Path

    @classmethod
    def in_state(cls, state_dir: Path) -> "RunFiles":
        return cls(train_file=state_dir / "train.parquet", job_file=state_dir / "job.json",
                   checkpoint_dir=state_dir / "checkpoints")

    @property
    def validation_file(self) -> Path:
        """A prompt selection's own validation prompts in verl's schema (dataset.py), numbered after the corpus rows."""
        return self.job_file.parent / "validation.parquet"

    @property
    def generation_config_dir(self) -> Path:
        """The rollouts' generation config (its stop tokens), written by the train job beside the job file."""
        return self.job_file.parent / "generation_config"


def attention_implementation() -> str:
    """flash-attn where it is importable (verl's `fsdp` extra), else PyTorch's sdpa."""
    return "flash_attention_2" if importlib.util.find_spec("flash_attn") else "sdpa"


def _attention(implementation: str) -> list[str]:
    if implementation == "flash_attention_2":
        return ["actor_rollout_ref.model.use_remove_padding=True"]
    # sdpa has no unpadded (varlen) kernel: verl's remove-padding path needs flash-attn
    return [f"+actor_rollout_ref.model.override_config.attn_implementation={implementation}",
            "actor_rollout_ref.model.use_remove_padding=False"]


def train_files(files: RunFiles, validation: bool) -> str:
    """verl's `data.train_files`: the corpus rows, then a prompt selection's own validation rows where it has them.
    verl reads the files in order into one dataset (verl: utils/dataset/rl_dataset.py:169-180), so row i of it is
    the driver's row i, validation rows included: the validation_set policy trains on them."""
    if not validation:
        return str(files.train_file)
    return "[" + ",".join(f"'{path}'" for path in (files.train_file, files.validation_file)) + "]"


def run_overrides(model_path: str, training: GRPOSettings, seed: int, *, gpus: int, cpus: int, files: RunFiles,
                  attention: str, rollout_engine: RolloutSettings = RolloutSettings(),
                  prompt_tokens: int = DEFAULT_PROMPT_TOKENS, experiment: str = "run",
                  validation: bool = False) -> list[str]:
    """The override list for one (model, method, seed) run on one node of `gpus` GPUs and `cpus` CPUs, its vLLM
    engine set by the model's `rollout_engine` settings. `validation`: the train job wrote the prompt selection's own
    validation rows (RunFiles.validation_file), which verl's dataset then holds after the corpus rows."""
    actor = "actor_rollout_ref.actor"
    rollout = "actor_rollout_ref.rollout"
    return [
        f"actor_rollout_ref.model.path={model_path}",
        *_attention(attention),
        # the GRPO recipe (dataflex_rl.training.recipe): one update per batch, KL as a loss term, no entropy bonus
        "algorithm.adv_estimator=grpo",
        "algorithm.use_kl_in_reward=False",
        f"{rollout}.name=vllm",
        f"{rollout}.n={training.rollouts}",
        f"{rollout}.temperature={training.temperature}",
        f"{rollout}.seed={seed}",
        # the vLLM engine (models.<m>.rollout): verl's defaults are TP 2 at 0.5 of the GPU memory
        f"{rollout}.tensor_model_parallel_size={rollout_engine.tensor_parallel_size}",
        f"{rollout}.gpu_memory_utilization={rollout_engine.gpu_memory_utilization}",
        f"{rollout}.enforce_eager={rollout_engine.enforce_eager}",
        f"{actor}.use_kl_loss=True",
        f"{actor}.kl_loss_coef={training.kl_coef}",
        f"{actor}.kl_loss_type={training.kl_kind}",
        f"{actor}.entropy_coeff=0",
        f"{actor}.clip_ratio_low={training.clip_low}",
        f"{actor}.clip_ratio_high={training.clip_high}",
        f"{actor}.clip_ratio_c=3.0",  # the dual clip, as dataflex_rl.training.grpo.ppo_clip_token_loss applies it
        # the FSDP engine clips with optim.clip_grad (verl: workers/engine/fsdp/transformer_impl.py:795-808);
        # actor.grad_clip is declared in verl 0.9.1's actor config but read nowhere
        f"{actor}.optim.clip_grad={training.grad_clip}",
        f"{actor}.optim.lr={training.learning_rate}",
        # Eq. 1 (seq-mean-token-mean: with ppo_mini_batch_size == train_batch_size verl's global_batch_size is G·K,
        # so a dropped response stays in 1/(GK)), or the released runs' token-mean (training.loss_aggregation)
        f"{actor}.loss_agg_mode={training.loss_aggregation}",
        f"{actor}.ppo_epochs=1",
        f"{actor}.ppo_mini_batch_size={training.prompts_per_step}",
        f"{actor}.ppo_micro_batch_size_per_gpu={MICRO_BATCH_PER_GPU}",
        f"{rollout}.log_prob_micro_batch_size_per_gpu={MICRO_BATCH_PER_GPU}",
        f"actor_rollout_ref.ref.log_prob_micro_batch_size_per_gpu={MICRO_BATCH_PER_GPU}",
        # data: the trainer draws each step's prompts through the policy driver; verl's loader only holds the rows
        f"data.train_files={train_files(files, validation)}",
        f"data.val_files={files.train_file}",
        f"data.train_batch_size={training.prompts_per_step}",
        f"data.max_prompt_length={prompt_tokens}",
        f"data.max_response_length={training.max_new_tokens}",
        f"data.seed={seed}",
        # the trainer takes rows by their corpus index: a filtered row would shift every later one
        "data.filter_overlong_prompts=False",
        # the reward: the embedded path's verifiers (dataflex_rl.backends.verl.reward)
        f"reward.custom_reward_function.path={REWARD_MODULE}",
        "reward.custom_reward_function.name=compute_score",
        f"+reward.custom_reward_function.reward_kwargs.seed={seed}",  # keys a noisy_rewards prompt's draws
        # the schedule: steps, never epochs, end the run (an epoch holds at least one step, as the corpus holds at
        # least one step's prompts); checkpoints in the state folder, resumed from automatically after a requeue
        f"trainer.total_training_steps={training.steps}",
        f"trainer.total_epochs={training.steps}",
        f"trainer.save_freq={training.checkpoint_every}",
        "trainer.resume_mode=auto",
        f"trainer.default_local_dir={files.checkpoint_dir}",
        # keep the latest checkpoint only: a 7B actor with its optimiser state is ~100 GB, and verl keeps every one
        # by default; the final one is hard-linked out as the run's model (dataflex_rl.backends.verl.launch)
        "trainer.max_actor_ckpt_to_keep=1",
        "trainer.val_before_train=False",
        "trainer.test_freq=-1",
        # the per-step metrics: `file` writes one JSON line per step (the path comes from VERL_FILE_LOGGER_PATH)
        "trainer.logger=[console,file]",
        "trainer.project_name=dataflex_rl",
        f"trainer.experiment_name={experiment}",
        # one node: the train job's GPUs and CPUs, so Ray does not claim the whole machine
        "trainer.nnodes=1",
        f"trainer.n_gpus_per_node={gpus}",
        # Ray's logical CPUs are scheduling tokens, not cores (they pin and cap nothing): too few leave a transfer-queue
        # storage unit or the workers' placement group pending for ever. So the count is what verl's actors need (3 per
        # GPU + 11 in verl 0.9.1), or the job's threads where those are more (dataflex_rl.backends.verl.ray_cpus)
        f"ray_kwargs.ray_init.num_cpus={ray_num_cpus(cpus, gpus)}",
        # the data policies: the plugin's trainer and the run-job file it reads
        f"trainer.v1.trainer_mode={TRAINER_MODE}",
        f"+{CONFIG_BLOCK}.job_file={files.job_file}",
        # stop tokens: rollouts end at the chat template's turn end as well as at EOS (a base model's EOS is not its
        # template's turn end); verl forwards engine_kwargs.vllm to vLLM's server (verl:
        # workers/rollout/vllm_rollout/vllm_async_server.py:287, 349), and vLLM stops at the generation config's
        # eos_token_id (dataflex_rl.backends.verl.rollout_stops writes the folder)
        f"+{GENERATION_CONFIG_KEY}={files.generation_config_dir}",
    ]


def verl_command(overrides: Sequence[str]) -> list[str]:
    return [sys.executable, "-m", "verl.trainer.main_ppo", *overrides]
