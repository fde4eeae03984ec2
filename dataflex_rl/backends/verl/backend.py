"""The verl backend (GPU cluster: verl 0.9.1 + vLLM): what the dry run checks, and a train job as one
`python -m verl.trainer.main_ppo` run with the study's overrides (dataflex_rl.backends.verl.launch). verl, torch and
pandas are imported only when a job runs, so the registry stays light for the dry run.
"""
from __future__ import annotations

from pathlib import Path
from typing import Any, Mapping

from dataflex_rl.methods import MethodSpec
from dataflex_rl.policies.catalogue import CATALOGUE
from dataflex_rl.recipe import GRPOSettings

_NOT_AVAILABLE = ("the 'verl' backend is not available in this version of DataFlex-RL (only 'embedded' runs); the "
                  "rules, resources and job matrix are ready for it")
# Policy families the verl trainer does not run: a prompt selection's rounds decode and differentiate candidate
# prompts outside the training step, which the plugin's trainer has no seam for in this version.
UNSUPPORTED_FAMILIES = ("prompt_selection",)


def _looks_local(path: str) -> bool:
    return path.startswith(("/", "."))


class VerlBackend:
    name = "verl"
    conda_env = "../envs/gpu.yaml"
    builds_base_model = False

    def model_settings(self, entry: Mapping[str, Any]) -> dict[str, Any]:
        return {"backend": self.name, "path": entry.get("path")}

    def config_errors(self, key: str, entry: Mapping[str, Any], workdir: Path, records_only: bool,
                      methods: Mapping[str, Mapping[str, Any]]) -> list[str]:
        errors = [f"methods.{name}.policy: {method['policy']!r} is a {CATALOGUE[method['policy']].family} method, "
                  f"which the verl backend ({key}) does not run in this version: its selection rounds score candidate "
                  f"prompts with extra rollouts and gradients outside verl's training step — remove the method, or "
                  f"run it on an embedded model"
                  for name, method in methods.items()
                  if method.get("policy") in CATALOGUE and CATALOGUE[method["policy"]].family in UNSUPPORTED_FAMILIES]
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
        return []

    def build_base_model(self, model, **_) -> None:
        raise NotImplementedError(f"base model: the verl backend builds no base model; it loads `path` "
                                  f"({model.get('path')!r}) and scores it untrained like any run")

    def train(self, model: Mapping[str, Any], *, base, corpus, method: MethodSpec, seed: int, training: GRPOSettings,
              template: str, out_model, out_metrics, state_dir, threads: int, prompt_cap=None,
              target_domain: str | None = None, gpus: int = 0) -> None:
        """One run, resumed from the checkpoints in `state_dir`; `base` is None (verl loads `path`), `gpus` the train
        job's `gpu` resource and `threads` its CPUs."""
        from dataflex_rl.backends.verl.launch import train_verl_run

        if gpus < 1:
            raise ValueError(f"the verl train job of {method.name} seed {seed} has gpus={gpus}: verl trains on GPUs "
                             f"— give the train rule a `gpu` resource (the slurm profile's set-resources train:gpu)")
        train_verl_run(model["path"], corpus=corpus, method=method, seed=seed, training=training, template=template,
                       out_model=out_model, out_metrics=out_metrics, state_dir=Path(state_dir), gpus=gpus,
                       cpus=threads, prompt_cap=prompt_cap, target_domain=target_domain)

    def open_generator(self, model, **_):
        raise NotImplementedError(f"scoring: {_NOT_AVAILABLE}")
