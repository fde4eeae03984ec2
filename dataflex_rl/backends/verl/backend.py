"""The verl backend (GPU cluster: verl 0.9.1 + vLLM): what the dry run checks, and an explicit refusal to run.

Training and scoring on verl are not part of this version; a job on this backend stops with a message that says so,
rather than running a stand-in. The rules, resources and job matrix are ready for it (docs: README, DESIGN).
"""
from __future__ import annotations

from pathlib import Path
from typing import Any, Mapping

from dataflex_rl.recipe import GRPOSettings

_NOT_AVAILABLE = ("the 'verl' backend is not available in this version of DataFlex-RL (only 'embedded' runs); the "
                  "rules, resources and job matrix are ready for it")


# What a verl job asks of its machine (rules/common.smk gives these to the rules; a profile's set-resources or
# --set-resources overrides them, the site's partition and account live in profiles/slurm). Sized for the paper's
# 7B model: the train job's 5 GPUs take the recipe's 50 prompts × 5 rollouts = 250 responses per step evenly (verl
# requires it, and the dry run checks it); its 48 hours hold 300 steps at the released pace. Merging gathers the
# FSDP shards in CPU memory; scoring runs one vLLM engine on one GPU (7B in bfloat16 fits; TP = gpu).
JOB_RESOURCES = {
    "train": {"gpu": 5, "cpus_per_task": 40, "mem_mb": 320000, "runtime": 2880},
    "merge": {"cpus_per_task": 8, "mem_mb": 128000, "runtime": 60},
    "score": {"gpu": 1, "cpus_per_task": 8, "mem_mb": 64000, "runtime": 120},
}


def _arguments(values: Mapping[str, Any]) -> str:
    return ", ".join(f"{key}={value}" for key, value in values.items())


def _looks_local(path: str) -> bool:
    return path.startswith(("/", "."))


class VerlBackend:
    name = "verl"
    conda_env = "../envs/gpu.yaml"
    builds_base_model = False
    merges_checkpoint = True

    def model_settings(self, entry: Mapping[str, Any]) -> dict[str, Any]:
        return {"backend": self.name, "path": entry.get("path")}

    def config_errors(self, key: str, entry: Mapping[str, Any], workdir: Path, records_only: bool) -> list[str]:
        errors = []
        if "path" not in entry:
            errors.append(f"{key}.path: missing; the verl backend needs the base model's local path or hub name "
                          f"(e.g. Qwen/Qwen2.5-7B)")
        elif _looks_local(entry["path"]) and not records_only and not (workdir / entry["path"]).exists():
            errors.append(f"{key}.path: local path {entry['path']!r} does not exist (relative to the working "
                          f"directory {str(workdir)!r}); fix it, or give a hub name such as Qwen/Qwen2.5-7B")
        return errors + [f"{key}.{section}: only the embedded backend builds its model from `{section}`; the verl "
                         f"backend loads `path` — remove it" for section in ("shape", "warmup") if section in entry]

    def train_resource_errors(self, key: str, entry: Mapping[str, Any], training: GRPOSettings,
                              resources: Mapping[str, Any], prompt_cap: Mapping[str, Any] | None,
                              selection=None) -> list[str]:
        """verl asserts that train_batch_size × rollout.n (prompts_per_step × rollouts; the recipe sets
        ppo_mini_batch_size = train_batch_size) divides evenly over the train job's GPUs. Its memory (FSDP shards,
        vLLM's KV cache on the GPU) is not estimated here: no GPU run calibrates it."""
        if not resources.get("gpu"):
            return []
        gpus = int(resources["gpu"])
        prompts, rollouts = training.prompts_per_step, training.rollouts
        if not (prompts * rollouts) % gpus:
            return []
        divisors = [n for n in range(1, prompts * rollouts + 1) if (prompts * rollouts) % n == 0 and n <= 64]
        near = sorted({p for p in range(max(1, prompts - gpus), prompts + gpus + 1) if (p * rollouts) % gpus == 0},
                      key=lambda p: (abs(p - prompts), p))[:2]
        return [f"training.prompts_per_step: {prompts} × training.rollouts {rollouts} = {prompts * rollouts} "
                f"responses per step do not divide over the train job's {gpus} GPUs (resource gpu={gpus}): verl "
                f"requires train_batch_size × rollout.n to be a multiple of its GPU count — use prompts_per_step "
                f"{' or '.join(map(str, near))}, or a GPU count among {divisors}"]

    def score_resource_errors(self, key: str, entry: Mapping[str, Any], batch_size: int, max_new_tokens: int,
                              resources: Mapping[str, Any]) -> list[str]:
        """vLLM scores on GPUs only: one engine over the score job's `gpu` GPUs (tensor parallel)."""
        if int(resources.get("gpu") or 0) >= 1:
            return []
        return [f"resources of rule score: gpu={resources.get('gpu', 0)}, but {key} (backend verl) is scored with "
                f"vLLM on GPUs; give the score rule gpu ≥ 1 (its default is {JOB_RESOURCES['score']['gpu']}: remove "
                f"the override from the profile's set-resources or --set-resources)"]

    def job_commands(self, evaluation: Mapping[str, Any]) -> list[str]:
        from dataflex_rl.backends.verl.merge import merge_command
        from dataflex_rl.backends.verl.scoring import BATCH_INVARIANT, engine_arguments, sampling_arguments

        tokens, seed = evaluation["max_new_tokens"], evaluation.get("seed", 0)
        engine = engine_arguments("<run>/merged or models.<m>.path", max_new_tokens=tokens, gpus="<gpu>", seed=seed)
        sampling = sampling_arguments(max_new_tokens=tokens, temperature=evaluation["temperature"], seed=seed)
        return [f"merge: python {' '.join(merge_command('<run>/model[/actor]', '<run>/merged')[1:])}",
                f"score: {BATCH_INVARIANT}=1, vllm.LLM({_arguments(engine)}), "
                f"vllm.SamplingParams({_arguments(sampling)})"]

    def job_resources(self, rule: str) -> dict[str, Any]:
        return dict(JOB_RESOURCES.get(rule, {}))

    def build_base_model(self, model, **_) -> None:
        raise NotImplementedError(f"base model: {_NOT_AVAILABLE}")

    def train(self, model, **_) -> None:
        raise NotImplementedError(f"training: {_NOT_AVAILABLE}")

    def open_generator(self, model: Mapping[str, Any], *, model_dir, threads: int, gpus: int = 0):
        """A merged checkpoint (the merge job's Hugging Face directory), or the untrained `path` when None."""
        from dataflex_rl.backends.verl.scoring import VllmGenerator

        return VllmGenerator.open(str(model_dir or model["path"]), gpus)
