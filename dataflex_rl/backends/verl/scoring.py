"""Scoring on the verl backend: vLLM offline inference on a merged (Hugging Face) checkpoint or the untrained `path`.

The settings that decide a score are explicit, never vLLM's defaults: `LLM.generate` falls back to the model's
generation_config (max_tokens 16) only without SamplingParams, and `max_model_len` would otherwise be the model's
advertised context (KV memory for 32k+ tokens). Greedy output depends on the batch's composition unless vLLM runs
batch-invariant (`VLLM_BATCH_INVARIANT=1`, read when vllm is imported). Prompts are rendered by the caller through
the checkpoint tokenizer's chat template (dataflex_rl.corpus.prompting, as in training) and tokenized here as verl's
dataset does (no special tokens added: the template has them), so the engine sees the training token ids.
"""
from __future__ import annotations

import os
import sys
from typing import Any, Mapping, Sequence

from dataflex_rl.backends.base import Answer
from dataflex_rl.backends.verl.vllm_requests import completions, request_seed
from dataflex_rl.corpus.turn_end import stop_token_ids

BATCH_INVARIANT = "VLLM_BATCH_INVARIANT"
# The prompt allowance beside the answer in max_model_len, as in the released evaluation (eval_benchmark.py:
# max_model_len = max_tokens + 1024) and the released recipe's data.max_prompt_length.
PROMPT_TOKENS = 1024
EXAMPLES = 3  # over-long prompts named in the refusal (all are counted)


def engine_arguments(model_path: str, *, max_new_tokens: int, gpus: int, seed: int,
                     options: Mapping[str, Any] | None = None) -> dict[str, Any]:
    """vllm.LLM's arguments: bfloat16 weights, a context of PROMPT_TOKENS + the answer, one engine over the job's
    GPUs (tensor parallel). `options` adds engine settings that do not change an answer (the GPU smoke's
    enforce_eager and low gpu_memory_utilization, which save start-up time and memory); it cannot replace these."""
    arguments = {"model": model_path, "dtype": "bfloat16", "max_model_len": PROMPT_TOKENS + max_new_tokens,
                 "tensor_parallel_size": gpus, "seed": seed}
    clash = sorted(set(options or {}) & set(arguments))
    if clash:
        raise ValueError(f"engine options {clash} would replace the scoring settings that decide an answer")
    return {**arguments, **(options or {})}


def sampling_arguments(*, max_new_tokens: int, temperature: float, seed: int, stop_token_ids: Sequence[int],
                       samples: int = 1) -> dict[str, Any]:
    """vllm.SamplingParams' arguments: `samples` answers per prompt as one request with n = samples, greedy at
    temperature 0, no nucleus truncation, ending at any of `stop_token_ids` (dataflex_rl.corpus.turn_end.
    stop_token_ids: EOS and the template's turn end; vLLM itself stops only at the tokenizer's EOS and the
    generation_config's eos_token_id). One request, not `samples` copies of the prompt: vLLM gives each seeded request
    its own generator, so copies under one seed decode one stream; the n streams of a request are seeded apart.
    `seed`: the request's (vllm_requests.request_seed)."""
    return {"temperature": temperature, "top_p": 1.0, "max_tokens": max_new_tokens, "n": samples, "seed": seed,
            "stop_token_ids": list(stop_token_ids)}


def check_prompt_lengths(lengths: Sequence[int]) -> None:
    """Refuse prompts longer than PROMPT_TOKENS before the engine starts (vLLM would reject them mid-job)."""
    over = [(index, length) for index, length in enumerate(lengths) if length > PROMPT_TOKENS]
    if not over:
        return
    named = ", ".join(f"prompt {index} ({length} tokens)" for index, length in over[:EXAMPLES])
    more = f" and {len(over) - EXAMPLES} more" if len(over) > EXAMPLES else ""
    raise ValueError(f"{len(over)} of {len(lengths)} prompts are longer than the {PROMPT_TOKENS} prompt tokens vLLM "
                     f"scoring allows beside the answer (dataflex_rl/backends/verl/scoring.py PROMPT_TOKENS): "
                     f"{named}{more}. Drop those items when the benchmark is built "
                     f"(data_validation.benchmarks.max_prompt_chars), or raise PROMPT_TOKENS")


def import_vllm():
    """vllm, imported batch-invariant. The variable is read at import, so a vllm imported earlier without it
    cannot be made invariant: refuse rather than score with batch-dependent greedy output."""
    if sys.modules.get("vllm") is not None and os.environ.get(BATCH_INVARIANT) != "1":
        raise RuntimeError(f"vllm was imported before {BATCH_INVARIANT}=1 was set, so its greedy output depends on "
                           f"the batch; set {BATCH_INVARIANT}=1 in the job's environment")
    os.environ[BATCH_INVARIANT] = "1"
    try:
        import vllm
    except ImportError as error:
        raise ImportError(f"scoring on the verl backend needs vLLM ({error}); install the GPU environment: "
                          f"pip install 'dataflex-rl[gpu]' (envs/gpu.yaml)") from error
    return vllm


class VllmGenerator:
    """The verl backend's scorer side (dataflex_rl.backends.base.Generator). The engine starts at the first
    `generate`, when the answer length that sizes its context is known; the tokenizer is loaded at once, since
    prompts are rendered with it before."""

    def __init__(self, model_path: str, tokenizer, gpus: int, engine_options: Mapping[str, Any] | None = None):
        self.model_path, self.tokenizer, self.gpus = model_path, tokenizer, gpus
        self.engine_options = engine_options  # engine_arguments' options
        self._engine = None  # (vllm, LLM, the largest max_new_tokens it was sized for)

    @classmethod
    def open(cls, model_path: str, gpus: int, engine_options: Mapping[str, Any] | None = None) -> "VllmGenerator":
        if gpus < 1:
            raise ValueError(f"scoring {model_path} with vLLM needs a GPU, and the score job has none (resource "
                             f"gpu={gpus}); give the score rule gpu ≥ 1 (profile set-resources or --set-resources)")
        from transformers import AutoTokenizer

        return cls(model_path, AutoTokenizer.from_pretrained(model_path), gpus, engine_options)

    def _started(self, max_new_tokens: int, seed: int):
        if self._engine is None:
            vllm = import_vllm()
            engine = vllm.LLM(**engine_arguments(self.model_path, max_new_tokens=max_new_tokens, gpus=self.gpus,
                                                 seed=seed, options=self.engine_options))
            self._engine = (vllm, engine, max_new_tokens)
        vllm, engine, sized_for = self._engine
        if max_new_tokens > sized_for:
            raise ValueError(f"max_new_tokens {max_new_tokens} > the {sized_for} this job's vLLM engine was sized "
                             f"for; score answers of one length per job")
        return vllm, engine

    def generate(self, prompts: Sequence[str], *, max_new_tokens: int, batch_size: int, temperature: float,
                 seed: int, samples: int = 1) -> list[Answer]:
        """`batch_size` is not used: vLLM schedules its own batches, and batch invariance keeps the answers
        independent of them. The n completions of each prompt are returned sample-major (Generator.generate)."""
        ids = [self.tokenizer(prompt, add_special_tokens=False).input_ids for prompt in prompts]
        check_prompt_lengths([len(prompt) for prompt in ids])
        vllm, engine = self._started(max_new_tokens, seed)
        stops = stop_token_ids(self.tokenizer)
        params = [vllm.SamplingParams(**sampling_arguments(max_new_tokens=max_new_tokens, temperature=temperature,
                                                           seed=request_seed(seed, prompt), stop_token_ids=stops,
                                                           samples=samples)) for prompt in ids]
        outputs = engine.generate([{"prompt_token_ids": prompt} for prompt in ids], params)
        run = {"vllm_version": vllm.__version__, "tensor_parallel_size": self.gpus}
        ordered = [completions(out) for out in outputs]
        return [Answer(own[sample].text, len(own[sample].token_ids), {"finish_reason": own[sample].finish_reason, **run})
                for sample in range(samples) for own in ordered]
