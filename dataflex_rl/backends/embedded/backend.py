"""The embedded CPU backend: a tiny Qwen2 built locally, trained by the embedded GRPO trainer, decoded by the
embedded sampler. Torch is imported only when a job runs, so the registry stays light for the dry run."""
from __future__ import annotations

import math
from dataclasses import asdict
from pathlib import Path
from typing import TYPE_CHECKING, Any, Collection, Mapping

from dataflex_rl.backends.base import BaseModelJob, TrainJob
from dataflex_rl.backends.embedded.memory import parameter_count, score_peak_mb, train_peak_mb
from dataflex_rl.prompt_selection.candidates import SelectionSize
from dataflex_rl.backends.embedded.settings import ModelShape, WarmupSettings
from dataflex_rl.training.recipe import GRPOSettings
from dataflex_rl.config.sections import filled
from dataflex_rl.corpus.token_caps import TokenCap, TokenCaps

if TYPE_CHECKING:
    from dataflex_rl.policies.methods import MethodSpec
    from dataflex_rl.backends.model_spec import ModelSpec
    from dataflex_rl.evaluate.settings import EvaluationSettings


def shape_errors(key: str, shape: ModelShape, written: Collection[str]) -> list[str]:
    """What the Qwen2 model (transformers' modeling_qwen2) needs of its shape and does not check itself: grouped-query
    attention shares each key-value head among num_attention_heads / num_key_value_heads query heads (repeat_kv); each
    head gets hidden_size // num_attention_heads dimensions, silently floored; and rotary embeddings rotate pairs of
    them (rotate_half), which an odd head dimension breaks in the first forward pass. `written`: the shape keys the
    config writes (the others are named as defaults)."""

    def named(field: str) -> str:
        return f"{key}.{field} {getattr(shape, field)}" + ("" if field in written else " (the default)")

    heads, kv_heads, hidden = shape.num_attention_heads, shape.num_key_value_heads, shape.hidden_size
    pair = 2 * heads  # a hidden_size that is a multiple of this gives every head an even dimension
    fits = " or ".join(str(size) for size in sorted({hidden // pair * pair, (hidden // pair + 1) * pair} - {0}))
    errors = []
    if heads % kv_heads:
        divisors = [d for d in range(1, heads + 1) if heads % d == 0]
        errors.append(f"{named('num_key_value_heads')} does not divide {named('num_attention_heads')}: grouped-query "
                      f"attention shares each key-value head among the same number of query heads; set "
                      f"num_key_value_heads to one of {divisors}")
    if hidden % heads:
        errors.append(f"{named('hidden_size')} is not a multiple of {named('num_attention_heads')}: each attention "
                      f"head gets hidden_size / num_attention_heads dimensions (an even number); use hidden_size "
                      f"{fits}")
    elif (hidden // heads) % 2:
        errors.append(f"{named('hidden_size')} / {named('num_attention_heads')} = {hidden // heads} dimensions per "
                      f"head, an odd number: rotary position embeddings rotate pairs of dimensions; use hidden_size "
                      f"{fits}")
    return errors


def _memory_errors(rule: str, key: str, shape: ModelShape, batch: str, prompts: str, estimate: float,
                   resources: Mapping[str, Any], smaller_batch: str) -> list[str]:
    """The job's `mem_mb` against the estimated peak of its process (dataflex_rl.backends.embedded.memory); no
    `mem_mb`, no check."""
    mem_mb = resources.get("mem_mb")
    if mem_mb is None or int(mem_mb) >= estimate:
        return []
    return [f"resources of rule {rule}: mem_mb={mem_mb} is below the estimated peak memory of a {rule} job, "
            f"{math.ceil(estimate)} MB, for {key} ({parameter_count(shape):,} parameters: hidden_size "
            f"{shape.hidden_size}, intermediate_size {shape.intermediate_size}, num_hidden_layers "
            f"{shape.num_hidden_layers}, vocab_size {shape.vocab_size}) with {batch} and prompts up to "
            f"{prompts} tokens; the job would grow until the kernel "
            f"kills it — raise mem_mb to at least {math.ceil(estimate)} (profile set-resources or --set-resources "
            f"{rule}:mem_mb=...), {smaller_batch}, or shrink {key}.shape"]


class EmbeddedBackend:
    name = "embedded"
    conda_env = "../envs/cpu.yaml"
    # A trained run's model directory already is a Hugging Face model (the trainer saves it so): nothing to merge, so
    # no merge job is planned, rather than one that copies the directory.
    merge = None
    # its generator draws every prompt's samples from one seeded stream (generation.py), so one part: the rates a
    # part would measure depend on the others
    solve_rate_part = None
    solve_rate_job_prompts = None
    solve_rate_throughput = None  # CPU jobs: the rule's default runtime

    def model_settings(self, entry: Mapping[str, Any]) -> dict[str, Any]:
        return {"backend": self.name, "shape": asdict(filled(ModelShape, entry.get("shape"))),
                "warmup": asdict(filled(WarmupSettings, entry.get("warmup")))}

    def result_settings(self, settings: Mapping[str, Any]) -> tuple[dict[str, Any], dict[str, Any]]:
        return dict(settings), {}  # the shape and the warm-up make the base, which every run trains from

    def config_errors(self, key: str, model: ModelSpec, workdir: Path, records_only: bool,
                      methods: Mapping[str, MethodSpec]) -> list[str]:
        written = model.written
        errors = shape_errors(f"{key}.shape", ModelShape(**model.shape), written.get("shape") or {})
        if "path" in written:
            errors.insert(0, f"{key}.path: {written['path']!r} — the embedded backend builds its model from `shape` and "
                             f"`warmup` and reads no path; remove it or set `backend: verl`")
        if "rollout" in written:
            errors.append(f"{key}.rollout: only the verl backend runs a vLLM rollout engine; the embedded backend "
                          f"samples in its own loop — remove it or set `backend: verl`")
        if "architecture" in written:
            errors.append(f"{key}.architecture: only a verl model declares its config.json's architecture; the "
                          f"embedded backend builds its model from {key}.shape — remove it")
        if "context" in written:
            errors.append(f"{key}.context: {written['context']!r} — only a verl model declares its context; the "
                          f"embedded backend builds its model with {key}.shape.max_position_embeddings positions, "
                          f"which the dry run holds its lengths to — remove it")
        return errors

    def model_notes(self, key: str, model: ModelSpec, workdir: Path) -> list[str]:
        return []

    def train_resource_errors(self, key: str, model: ModelSpec, training: GRPOSettings,
                              resources: Mapping[str, Any], prompt_cap: TokenCap | None,
                              selection: SelectionSize | None = None) -> list[str]:
        """The train job's `mem_mb` against its estimated peak, with every prompt at `prompt_cap`, the longest its
        corpus is let through (dataflex_rl.corpus.training_fit), and the study's largest prompt-selection round."""
        shape = ModelShape(**model.shape)
        estimate = train_peak_mb(shape, training.prompts_per_step, training.rollouts, training.max_new_tokens,
                                 prompt_cap["tokens"], selection)
        batch = (f"training.prompts_per_step {training.prompts_per_step} × training.rollouts {training.rollouts} "
                 f"responses of up to training.max_new_tokens {training.max_new_tokens}")
        if selection is not None:
            batch += (f", and selection rounds of {selection.candidates} candidates × {selection.rollouts} rollouts "
                      "(a prompt-selection method's candidates_per_round and rollouts)")
        prompts = f"{prompt_cap['tokens']} ({prompt_cap['source']})"
        return _memory_errors("train", key, shape, batch, prompts, estimate, resources,
                              "lower training.prompts_per_step or training.rollouts")

    def score_resource_errors(self, key: str, model: ModelSpec, batch_size: int, max_new_tokens: int,
                              resources: Mapping[str, Any]) -> list[str]:
        """The score job's `mem_mb` against its estimated peak, with every prompt at the longest its benchmarks are let
        through (dataflex_rl.evaluate.benchmark_fit): what the positions leave beside an answer, the default and the
        largest the dry run allows of data_validation.benchmarks.max_prompt_tokens."""
        shape = ModelShape(**model.shape)
        prompt_tokens = shape.max_position_embeddings - max_new_tokens
        estimate = score_peak_mb(shape, batch_size, max_new_tokens, prompt_tokens)
        batch = f"evaluation.batch_size {batch_size} answers of up to evaluation.max_new_tokens {max_new_tokens}"
        prompts = (f"{prompt_tokens} (max_position_embeddings {shape.max_position_embeddings} − "
                   f"evaluation.max_new_tokens {max_new_tokens}, the most data_validation.benchmarks.max_prompt_tokens "
                   "lets through)")
        return _memory_errors("score", key, shape, batch, prompts, estimate, resources, "lower evaluation.batch_size")

    def job_commands(self, training: GRPOSettings, evaluation: EvaluationSettings,
                     resources: Mapping[str, Mapping[str, Any]], prompt_selection: bool = False) -> list[str]:
        return []

    def job_resources(self, rule: str) -> dict[str, Any]:
        return {}

    def build_base_model(self, job: BaseModelJob, *, corpus, out_dir, threads: int,
                         token_caps: TokenCaps | None) -> None:
        from dataflex_rl.backends.embedded.base_model import build_base_model

        build_base_model(corpus, out_dir, ModelShape(**job.model["shape"]), WarmupSettings(**job.model["warmup"]),
                         job.template, threads=threads, token_caps=token_caps)

    def train(self, job: TrainJob, *, base, corpus, out_model, out_metrics, state_dir, threads: int,
              token_caps: TokenCaps | None, gpus: int) -> dict[str, Any]:
        from dataflex_rl.backends.embedded.trainer import train_run

        trained_with = train_run(base, corpus, job.method, job.seed, job.training, job.template, out_model,
                                 out_metrics, state_dir, threads=threads, token_caps=token_caps,
                                 target_domain=job.target_domain, validation_draws=job.validation_draws,
                                 open_probe=self.open_probe)
        return {"threads": trained_with}  # the one thing besides its settings that its weights depend on

    def open_generator(self, model: Mapping[str, Any], *, model_dir, threads: int, gpus: int):
        from dataflex_rl.backends.embedded.generation import EmbeddedGenerator

        return EmbeddedGenerator.load(model_dir, threads=threads)

    def open_probe(self, trainer, temperature: float):
        """Sampled rollouts and per-group gradients on the embedded trainer's model (backends/embedded/probe.py)."""
        from dataflex_rl.backends.embedded.probe import EmbeddedProbe

        return EmbeddedProbe(trainer, temperature)
