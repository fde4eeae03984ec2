"""The verl backend (GPU cluster: verl 0.9.1 + vLLM): what the dry run checks, and a train job as one
`python -m verl.trainer.main_ppo` run with the study's overrides (dataflex_rl.backends.verl.launch). verl, torch and
pandas are imported only when a job runs, so the registry stays light for the dry run.
"""
from __future__ import annotations

import sys
import textwrap
from dataclasses import asdict
from pathlib import Path
from typing import TYPE_CHECKING, Any, Mapping

from dataflex_rl.backends.base import TrainJob
from dataflex_rl.backends.verl.model_source import model_path_errors, model_path_notes
from dataflex_rl.backends.verl.model_context import context_refusal, declared_context_errors, engine_context
from dataflex_rl.backends.verl.model_heads import (architecture_source, declared_architecture_errors, model_config,
                                                   model_heads, model_parameters, tensor_parallel_problem)
from dataflex_rl.backends.verl.train_memory import rollout_memory_errors
from dataflex_rl.backends.verl.gpu_types import decode_throughput, gpu_model_errors, gpu_type
from dataflex_rl.backends.verl.probe_settings import ProbeSettings, check_selection_options, probe_memory_errors
from dataflex_rl.backends.verl.rollout import RESULT_SETTINGS, RolloutSettings
from dataflex_rl.backends.verl.scoring import PROMPT_TOKENS
from dataflex_rl.training.recipe import GRPOSettings
from dataflex_rl.config.sections import filled
from dataflex_rl.corpus.token_caps import TokenCap, TokenCaps

if TYPE_CHECKING:
    from dataflex_rl.prompt_selection.candidates import SelectionSize
    from dataflex_rl.backends.model_spec import ModelSpec
    from dataflex_rl.evaluate.settings import EvaluationSettings
    from dataflex_rl.policies.methods import MethodSpec

# What a verl job asks of its machine (rules/common.smk gives these to the rules, after a model's own
# `models.<m>.resources`; a profile's set-resources or --set-resources overrides them; the site's default partition
# and account live in profiles/slurm). The GPU jobs name their Slurm partition here, with the GPUs they ask for, so
# that a command-line --set-resources, which replaces the profile's whole set-resources block, cannot send them to
# the CPU partition; a site whose GPU partition has another name sets it per model (models.<m>.resources.<rule>.
# slurm_partition) or with --set-resources. Sized for the paper's
# 7B model on the released recipe's 8 GPUs, which take its 64 prompts × 5 rollouts = 320 responses per step evenly
# (verl requires it, and the dry run checks it); its 48 hours hold 300 steps at the released pace. Merging gathers the
# FSDP shards in CPU memory; scoring runs one vLLM engine on one GPU (7B in bfloat16 fits; TP = gpu).
GPU_PARTITION = "gpu"
JOB_RESOURCES = {
    "train": {"gpu": 8, "cpus_per_task": 40, "mem_mb": 320000, "runtime": 2880, "slurm_partition": GPU_PARTITION},
    "merge": {"cpus_per_task": 8, "mem_mb": 128000, "runtime": 60},
    "score": {"gpu": 1, "cpus_per_task": 8, "mem_mb": 64000, "runtime": 120, "slurm_partition": GPU_PARTITION},
    # the low_utility regime's solve rates: the untrained base samples K answers per corpus prompt in vLLM
    "solve_rates": {"gpu": 1, "cpus_per_task": 8, "mem_mb": 64000, "runtime": 240,
                    "slurm_partition": GPU_PARTITION},
}


# The stop tokens as the dry run names them: the score job reads them from the checkpoint's tokenizer
# (dataflex_rl.corpus.turn_end.stop_token_ids).
STOP_PLACEHOLDER = ["<eos>", "<chat template's turn end>"]
# the model's rollout settings in the summary's train command: they vary per model
ROLLOUT_PLACEHOLDERS = RolloutSettings(**{name: f"<models.<m>.rollout.{name}>" for name in asdict(RolloutSettings())})


def _rollout(settings: Mapping[str, Any]) -> RolloutSettings:
    """A verl model's rollout engine settings (its `settings`, defaults filled in: model_settings)."""
    return RolloutSettings(**settings["rollout"])


def _probe(settings: Mapping[str, Any]) -> ProbeSettings:
    """A verl model's prompt-selection probe settings: model_settings fills them in where the config writes a `probe`
    block (the other models' settings stay without one), the defaults elsewhere."""
    return ProbeSettings(**settings["probe"]) if "probe" in settings else ProbeSettings()


def _length_fix(model: ModelSpec, section: str) -> str:
    """The setting a context refusal's fix names for `model`'s `section` length: the model's own where it sets one,
    else the study's, with the model's own beside it (the study's reaches every model)."""
    own = f"models.{model.name}.{section}.max_new_tokens"
    return own if model.setting_key(section, "max_new_tokens") == own else f"{section}.max_new_tokens (or {own})"


def _context(key: str, model: ModelSpec):
    """The context the model's engines are held to (model_context.engine_context)."""
    return engine_context(key, model.path or "", model.declared_context)


def _arguments(values: Mapping[str, Any]) -> str:
    return ", ".join(f"{key}={value}" for key, value in values.items())


def _parameter_count(key: str, model: ModelSpec, selection: bool) -> int | None:
    """The model's parameter count for the memory checks: from its config.json where it can be read (a model built
    on torch's meta device: once per train check), else `probe.parameters`; neither: None, and one stderr line says
    which memory was not checked."""
    parameters = model_parameters(model.path or "") or _probe(model.settings).parameters
    if parameters is None:
        checked = ("the train job's GPU memory and the selection round's memory were" if selection
                   else "the train job's GPU memory (FSDP state beside vLLM's share) was")
        print(f"{key}: {checked} not checked: its config.json cannot be read here and {key}.probe.parameters is not "
              f"set", file=sys.stderr)
    return parameters


class VerlBackend:
    name = "verl"
    conda_env = "../envs/gpu.yaml"
    build_base_model = None  # verl loads `path` and scores it untrained like any run
    # vLLM seeds each prompt's request from its own tokens (vllm_requests.request_seed) and scores batch-invariantly
    # (scoring.BATCH_INVARIANT), so the parts give the rates of one pass. 128 prompts × K = 32 samples at up to 8k
    # tokens is the most a kill or a requeue loses: at the worst case below on the slowest GPU estimated (an
    # A100-80GB's 1,300 tokens/s) 7.2 h, within half of a 1-day partition's limit; 2.2 h on an H200.
    solve_rate_part = 128
    # Three parts a job: 1,306 min at that worst case on an A100-80GB (within a 1-day partition), 660 on an H100, 415
    # on an H200; a corpus of 41k prompts (GradAlign's S3) is 107 jobs, which a cluster runs side by side. (The 1,024
    # prompts a job sized before at an assumed 5,000 tokens/s take 3,456 min at 1,300: beyond a 1-day partition.)
    solve_rate_job_prompts = 384

    @staticmethod
    def solve_rate_throughput(gpu_model: str | None) -> tuple[float, str]:
        """What the dry run sizes a solve-rate job's runtime by (dataflex_rl.study.solve_rate_time): generated tokens a
        second of its one vLLM engine under batch invariance, every sample to the length cap, on the job's GPU type
        (gpu_types.decode_throughput: an estimate from published figures, calibrated on no GPU run here)."""
        return decode_throughput(gpu_model)

    def open_probe(self, trainer, temperature: float):
        """A selection round's probe on a round boundary of the merge-then-score loop (`trainer`:
        probe.RoundBoundary, which selection_rounds.run_segments opens between verl segments)."""
        from dataflex_rl.backends.verl.probe import VerlProbe

        return VerlProbe(trainer, temperature)

    def model_settings(self, entry: Mapping[str, Any]) -> dict[str, Any]:
        settings = {"backend": self.name, "path": entry.get("path"),
                    "rollout": asdict(filled(RolloutSettings, entry.get("rollout")))}
        if "probe" in entry:  # only a model whose config writes it: the other models' settings stay as they were
            settings["probe"] = asdict(filled(ProbeSettings, entry["probe"]))
        return settings

    def result_settings(self, settings: Mapping[str, Any]) -> tuple[dict[str, Any], dict[str, Any]]:
        """The untrained base's scores depend on the weights at `path`; a trained run's also on the rollout's tensor
        parallelism (dataflex_rl.backends.verl.rollout says why not on the rest of the rollout block)."""
        rollout = settings["rollout"]
        return ({"backend": settings["backend"], "path": settings["path"]},
                {"rollout": {key: rollout[key] for key in RESULT_SETTINGS}})

    def config_errors(self, key: str, model: ModelSpec, workdir: Path, records_only: bool,
                      methods: Mapping[str, MethodSpec]) -> list[str]:
        errors = [f"methods.{name}.{error} ({key} is a verl model)" for name, method in methods.items()
                  if method.family.needs_probe for error in check_selection_options(method)]
        if "path" not in model.written:
            errors.append(f"{key}.path: missing; the verl backend needs the base model's local path or hub name "
                          f"(e.g. Qwen/Qwen2.5-7B)")
        elif not records_only:
            errors += model_path_errors(f"{key}.path", model.path, workdir)
            errors += declared_context_errors(key, model.path, model.declared_context)
            errors += declared_architecture_errors(key, model.path, model.declared_architecture)
        return errors + [f"{key}.{section}: only the embedded backend builds its model from `{section}`; the verl "
                         f"backend loads `path` — remove it" for section in ("shape", "warmup")
                         if section in model.written]

    def model_notes(self, key: str, model: ModelSpec, workdir: Path) -> list[str]:
        return model_path_notes(f"{key}.path", model.path, workdir)

    def train_resource_errors(self, key: str, model: ModelSpec, training: GRPOSettings,
                              resources: Mapping[str, Any], prompt_cap: TokenCap | None,
                              selection: SelectionSize | None = None) -> list[str]:
        """The step's batch over the GPUs (`_batch_errors`), the rollout's tensor parallelism over the GPUs and the
        model's heads (`_rollout_errors`), the rollout's context in the model's positions (`_train_context_errors`),
        the FSDP state beside vLLM's share on each GPU (`_train_memory_errors`), then, where those pass, verl's own
        check of the train command's overrides (`_verl_config_errors`)."""
        if not int(resources.get("gpu") or 0):
            return [f"resources of rule train: gpu={resources.get('gpu', 0)}, but {key} (backend verl) trains on "
                    f"GPUs; give the train rule gpu ≥ 1 (its default is {JOB_RESOURCES['train']['gpu']}: remove the "
                    f"override from the profile's set-resources or --set-resources, or set "
                    f"{key}.resources.train.gpu)"]
        parameters = _parameter_count(key, model, selection is not None)
        errors = (self._gpu_type_errors(key, model, resources.get("gpu_model"))
                  + self._batch_errors(training, int(resources["gpu"]))
                  + self._rollout_errors(key, model, int(resources["gpu"]))
                  + self._train_context_errors(key, model, training, prompt_cap, selection is not None)
                  + self._train_memory_errors(key, model, int(resources["gpu"]), parameters))
        if selection is not None and parameters is not None:
            errors += self._probe_errors(key, model, resources, selection.gradient_rows, training, prompt_cap,
                                         parameters)
        return errors or self._verl_config_errors(key, model, training, resources)

    @staticmethod
    def _probe_errors(key: str, model: ModelSpec, resources: Mapping[str, Any], gradient_rows: int,
                      training: GRPOSettings, prompt_cap: TokenCap | None, parameters: int) -> list[str]:
        """A selection round's memory on one of the train job's GPUs and on its host (probe_settings), with
        `gradient_rows` whole gradients held at once (SelectionSize), for the model's `parameters` (_parameter_count);
        the host holds the sleeping weights of one round engine per rollout.tensor_parallel_size GPUs of the job
        (round_engines.device_groups), at least one.
        Where the model's shape is known (config.json, else `architecture` as declared: model_config), the GPU's bytes
        add one micro-batch's activations and logits (probe_settings.probe_memory) at sequences of the prompt allowance
        (the corpus's prompt cap, else DEFAULT_PROMPT_TOKENS, as _train_context_errors) + training.max_new_tokens;
        where it is not, one stderr line says they were not counted."""
        from dataflex_rl.backends.verl.overrides import DEFAULT_PROMPT_TOKENS
        from dataflex_rl.backends.verl.probe_settings import ModelShape

        settings = _probe(model.settings)
        shape = ModelShape.of(model_config(model.path or "", model.declared_architecture))
        if shape is None:
            print(f"{key}: the selection round's GPU memory was checked for its parameters only (12 bytes each): its "
                  f"config.json cannot be read here and {key}.architecture is not declared, so the activations and "
                  f"logits of {key}.probe.micro_batch responses were not counted", file=sys.stderr)
        prompt_tokens = prompt_cap["tokens"] if prompt_cap else DEFAULT_PROMPT_TOKENS
        engines = max(1, int(resources.get("gpu") or 0) // _rollout(model.settings).tensor_parallel_size)
        return probe_memory_errors(key, parameters, settings, int(resources.get("mem_mb") or 0), gradient_rows,
                                   shape=shape, prompt_tokens=prompt_tokens, response_tokens=training.max_new_tokens,
                                   length_key=model.setting_key("training", "max_new_tokens"), engines=engines)

    @staticmethod
    def _gpu_type_errors(key: str, model: ModelSpec, gpu_model: str | None) -> list[str]:
        """The declared probe.gpu_memory_gb against the GPU type the train job asks for (gpu_types.gpu_model_errors;
        the selection round runs in the train job, on its GPUs); a type not in gpu_types.KNOWN_GPUS: one stderr line."""
        if gpu_model and gpu_type(gpu_model) is None:
            print(f"{key}: the train job's gpu_model {gpu_model!r} is not a GPU type of "
                  f"dataflex_rl/backends/verl/gpu_types.py, so its memory was not checked against "
                  f"{key}.probe.gpu_memory_gb here; the job checks the GPUs it gets before verl starts", file=sys.stderr)
        return gpu_model_errors(key, _probe(model.settings).gpu_memory_gb, gpu_model)

    @staticmethod
    def _train_memory_errors(key: str, model: ModelSpec, gpus: int, parameters: int | None) -> list[str]:
        """The FSDP state beside the rollout's vLLM share on each of the train job's GPUs (train_memory), for the
        model's `parameters` (_parameter_count; None: not checked)."""
        if parameters is None:
            return []
        return rollout_memory_errors(key, parameters, gpus, _rollout(model.settings).gpu_memory_utilization,
                                     _probe(model.settings).gpu_memory_gb)

    def _batch_errors(self, training: GRPOSettings, gpus: int) -> list[str]:
        """verl asserts that train_batch_size × rollout.n (prompts_per_step × rollouts; the recipe sets
        ppo_mini_batch_size = train_batch_size) divides evenly over the train job's GPUs. Its memory (FSDP shards,
        vLLM's KV cache on the GPU) is not estimated here: no GPU run calibrates it."""
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

    def _rollout_errors(self, key: str, model: ModelSpec, gpus: int) -> list[str]:
        """The rollout worker asserts that its tensor parallelism divides the train job's GPUs (verl:
        workers/engine_workers.py:655-660), and vLLM that it divides the model's heads (where its config.json can be
        read: dataflex_rl.backends.verl.model_heads)."""
        setting = f"{key}.rollout.tensor_parallel_size"
        size = _rollout(model.settings).tensor_parallel_size
        if gpus % size:
            fits = [n for n in range(1, gpus + 1) if gpus % n == 0]
            return [f"{setting}: {size} does not divide the train job's {gpus} GPUs (resource gpu={gpus}): verl's "
                    f"rollout worker runs GPUs / TP vLLM replicas and refuses at start-up after Ray and FSDP are up — "
                    f"set {setting} to one of {fits}, or give the train rule a multiple of {size} GPUs (profile "
                    f"set-resources or --set-resources train:gpu=...)"]
        heads = self._heads_problem(model, size)
        return [f"{setting}: {size} {heads}; set {setting} to one of them"] if heads else []

    @staticmethod
    def _train_context_errors(key: str, model: ModelSpec, training: GRPOSettings, prompt_cap: TokenCap | None,
                              selects: bool) -> list[str]:
        """The rollout's and the selection round's (`selects`: the model trains a prompt selection) vLLM context: the
        prompt allowance (the corpus's prompt cap, as launch.py passes it to data.max_prompt_length and the round's
        spec, else DEFAULT_PROMPT_TOKENS) + the model's training.max_new_tokens, within its context (_context)."""
        from dataflex_rl.backends.verl.overrides import DEFAULT_PROMPT_TOKENS

        tokens, source = ((prompt_cap["tokens"], prompt_cap["source"]) if prompt_cap
                          else (DEFAULT_PROMPT_TOKENS, "verl's data.max_prompt_length"))
        context = _context(key, model)
        if context is None:
            print(f"{key}: vLLM's context was not checked against its lengths: its config.json cannot be read here and "
                  f"{key}.context is not set (the model card's context length)", file=sys.stderr)
        refusal = context_refusal(context, model.path or "", prompt_tokens=tokens,
                                  prompt=f"{tokens} prompt tokens ({source})",
                                  answer_key=model.setting_key("training", "max_new_tokens"),
                                  answer_tokens=training.max_new_tokens, fix_key=_length_fix(model, "training"),
                                  use="train")
        engines = "rollout and selection round" if selects else "rollout"
        return [f"{key} {engines}: {refusal}"] if refusal else []

    @staticmethod
    def _heads_problem(model: ModelSpec, size: int) -> str | None:
        """Why vLLM cannot split the model's heads over `size` GPUs, with the sizes that can; None where it can, or
        where neither the model's config.json nor a declared architecture gives its heads."""
        heads = model_heads(model.path or "", model.declared_architecture)
        problem = heads and tensor_parallel_problem(heads, size)
        if not problem:
            return None
        fits = [n for n in range(1, heads.attention + 1) if not tensor_parallel_problem(heads, n)]
        source = architecture_source(f"models.{model.name}", model.path or "")
        return (f"does not divide the {problem} of {model.path!r} ({source}: {heads.attention} attention, "
                f"{heads.key_value} key-value heads): vLLM splits the heads over its tensor-parallel GPUs and refuses "
                f"— the sizes that split them are {fits}")

    def _verl_config_errors(self, key: str, model: ModelSpec, training: GRPOSettings,
                            resources: Mapping[str, Any]) -> list[str]:
        """verl's own composition, validation and worker dataclasses of the train command (the overrides every run of
        the model shares, at seed 0: a seed changes no check), once per model (dataflex_rl.backends.verl.verl_config),
        and that the Ray logical CPUs it gives cover what the actors of that verl hold (ray_cpus.composed_shortfall);
        where verl is not importable (a login node with only Snakemake) one line on stderr says it was not checked."""
        from dataflex_rl.backends.verl import ray_cpus, verl_config
        from dataflex_rl.backends.verl.overrides import RunFiles, run_overrides

        cpus = int(resources.get("cpus_per_task") or resources.get("threads") or 1)
        overrides = run_overrides(model.path, training, 0, gpus=int(resources["gpu"]), cpus=cpus,
                                  files=RunFiles.in_state(Path("state")), attention="sdpa",
                                  rollout_engine=_rollout(model.settings))
        if verl_config.passed_before(overrides):
            return []
        reason = verl_config.unavailable()
        if reason:
            print(f"{key}: verl's own config check of the train command was skipped: verl is not importable here "
                  f"({reason}); the train jobs' environment (envs/gpu.yaml) checks it at their start", file=sys.stderr)
            return []
        cfg, refusal = verl_config.checked(overrides)
        if refusal is None:
            shortfall = ray_cpus.composed_shortfall(cfg)
            if shortfall:
                return [f"{key}: {shortfall}"]
            verl_config.remember_passed(overrides)
            return []
        return [f"{key}: verl {verl_config.verl_version()} refuses the train command's overrides "
                f"(dataflex_rl/backends/verl/overrides.py) — {refusal}. Fix the key it names: a study setting "
                f"(training.*, {key}.rollout.*) or, for a key verl renamed, the overrides module; or run the verl "
                f"version envs/gpu.yaml pins"]

    def score_resource_errors(self, key: str, model: ModelSpec, batch_size: int, max_new_tokens: int,
                              resources: Mapping[str, Any]) -> list[str]:
        """vLLM scores on GPUs only: one engine over the score job's `gpu` GPUs (tensor parallel: they must divide the
        model's heads), whose context must fit the model's positions (model_context), where its files can be read."""
        gpus = int(resources.get("gpu") or 0)
        if gpus >= 1:
            heads = self._heads_problem(model, gpus)
            context = context_refusal(_context(key, model), model.path or "", prompt_tokens=PROMPT_TOKENS,
                                      prompt=f"the scorer's {PROMPT_TOKENS} prompt tokens",
                                      answer_key=model.setting_key("evaluation", "max_new_tokens"),
                                      answer_tokens=max_new_tokens, fix_key=_length_fix(model, "evaluation"),
                                      use="score")
            return ([f"resources of rule score: gpu={gpus}, the tensor_parallel_size of {key}'s vLLM scoring engine, "
                     f"{heads}; give the score rule one of them (profile set-resources or --set-resources "
                     f"score:gpu=...)"] if heads else []) + ([f"{key} scoring: {context}"] if context else [])
        return [f"resources of rule score: gpu={resources.get('gpu', 0)}, but {key} (backend verl) is scored with "
                f"vLLM on GPUs; give the score rule gpu ≥ 1 (its default is {JOB_RESOURCES['score']['gpu']}: remove "
                f"the override from the profile's set-resources or --set-resources)"]

    def job_commands(self, training: GRPOSettings, evaluation: EvaluationSettings,
                     resources: Mapping[str, Mapping[str, Any]], prompt_selection: bool = False) -> list[str]:
        from dataflex_rl.backends.verl.merge import merge_command
        from dataflex_rl.backends.verl.overrides import RunFiles, run_overrides, verl_command
        from dataflex_rl.backends.verl.scoring import BATCH_INVARIANT, engine_arguments, sampling_arguments

        train = resources.get("train", {})
        overrides = run_overrides("<models.<m>.path>", training, "<seed>", gpus=train.get("gpu", "<gpu>"),
                                  cpus=train.get("cpus_per_task", "<cpus>"), files=RunFiles.in_state(Path("<state>")),
                                  attention="sdpa", experiment="<method>-seed<seed>",
                                  rollout_engine=ROLLOUT_PLACEHOLDERS)
        command = textwrap.wrap(" ".join(["python", *verl_command(overrides)[1:]]), 110, break_long_words=False,
                                break_on_hyphens=False)
        tokens, seed = evaluation.max_new_tokens, evaluation.sampling_seed
        engine = engine_arguments("<run>/merged or models.<m>.path", max_new_tokens=tokens, gpus="<gpu>", seed=seed)
        sampling = sampling_arguments(max_new_tokens=tokens, temperature=evaluation.temperature,
                                      seed=f"<request_seed({seed}, prompt)>", stop_token_ids=STOP_PLACEHOLDER)
        lines = ["train (<state>: the run's state folder; flash-attn instead of sdpa where importable at launch): "
                 "VERL_FILE_LOGGER_PATH=<state>/verl_metrics.attempt<N>.jsonl", *(f"  {part}" for part in command),
                 f"merge: python {' '.join(merge_command('<run>/model[/actor]', '<run>/merged')[1:])}",
                 f"score: {BATCH_INVARIANT}=1, vllm.LLM({_arguments(engine)}), "
                 f"vllm.SamplingParams({_arguments(sampling)})"]
        return lines + ([self._round_command(training, train.get("gpu", "<gpu>"))] if prompt_selection else [])

    @staticmethod
    def _round_command(training: GRPOSettings, gpus) -> str:
        """What a prompt selection's round runs between verl segments (selection_rounds.py, round_job.py)."""
        from dataflex_rl.backends.verl import probe_rollouts
        from dataflex_rl.backends.verl.overrides import DEFAULT_PROMPT_TOKENS

        engine = probe_rollouts.engine_arguments("<round weights>", max_new_tokens=training.max_new_tokens,
                                                 prompt_tokens=DEFAULT_PROMPT_TOKENS, rollout=ROLLOUT_PLACEHOLDERS,
                                                 seed="<seed>")
        sampling = probe_rollouts.sampling_arguments(
            samples="<k_r or k_v>", temperature=f"<score_temperature, else {training.temperature}>",
            max_new_tokens=training.max_new_tokens, seed="<request_seed(seed and stream, prompt)>",
            stop_token_ids=STOP_PLACEHOLDER)
        return (f"selection round (before each verl segment of steps_per_round steps, in the train job, on its {gpus} "
                f"GPUs): python -m dataflex_rl.backends.verl.round_job <state>/round_<r>.spec.json — rollouts "
                f"vllm.LLM({_arguments(engine)}), vllm.SamplingParams({_arguments(sampling)}); gradients: "
                f"transformers AutoModelForCausalLM (<round weights>, dtype=bfloat16), a replica on each of the "
                f"{gpus} GPUs (the groups dealt round-robin), models.<m>.probe.micro_batch responses per backward "
                f"(default {ProbeSettings().micro_batch})")

    def job_resources(self, rule: str) -> dict[str, Any]:
        return dict(JOB_RESOURCES.get(rule, {}))

    def train(self, job: TrainJob, *, base, corpus, out_model, out_metrics, state_dir, threads: int,
              token_caps: TokenCaps | None, gpus: int) -> dict[str, Any]:
        """One run, resumed from the checkpoints in `state_dir`; `base` is None (verl loads `path`), `gpus` the train
        job's `gpu` resource and `threads` its CPUs."""
        from dataflex_rl.backends.verl.launch import train_verl_run

        if gpus < 1:
            raise ValueError(f"the verl train job of {job.method.name} seed {job.seed} has gpus={gpus}: verl trains "
                             f"on GPUs — give the train rule a `gpu` resource (the slurm profile's set-resources "
                             f"train:gpu)")
        return train_verl_run(job.model["path"], corpus=corpus, method=job.method, seed=job.seed,
                              training=job.training, template=job.template, out_model=out_model,
                              out_metrics=out_metrics, state_dir=Path(state_dir), gpus=gpus, cpus=threads,
                              token_caps=token_caps, target_domain=job.target_domain,
                              rollout_engine=_rollout(job.model), probe=_probe(job.model),
                              validation_draws=job.validation_draws)

    def merge(self, model_dir, out_dir) -> None:
        """The run's final FSDP checkpoint through verl's own merger (dataflex_rl.backends.verl.merge)."""
        from dataflex_rl.backends.verl.merge import merge_checkpoint

        merge_checkpoint(model_dir, out_dir)

    def open_generator(self, model: Mapping[str, Any], *, model_dir, threads: int, gpus: int):
        """A merged checkpoint (the merge job's Hugging Face directory), or the untrained `path` when None."""
        from dataflex_rl.backends.verl.scoring import VllmGenerator

        return VllmGenerator.open(str(model_dir or model["path"]), gpus)
