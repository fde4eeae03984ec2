"""The probe's rollouts on a GPU: one vLLM offline engine over the round's weights, sampling as the training rollout
does (probe.Sampler).

The training rollout's settings, from the run's overrides and verl 0.9.1's rollout defaults: the model's vLLM
tensor parallelism and memory share (models.<m>.rollout), top_p 1 and top_k −1 (verl: trainer/config/rollout/
rollout.yaml:20, 23), responses up to `training.max_new_tokens` (data.max_response_length), stopping at EOS and the chat
template's turn end (the ids the train job writes into the rollout's generation config: rollout_stops.py), in bf16.
The temperature is the round's (the method's `score_temperature`, by default the training temperature) and each
stream's seed its own, each prompt's request seeded from it and its tokens (vllm_requests.request_seed). Between
sampling passes the engine sleeps (level 1: weights to CPU memory, KV cache dropped), so that the backward passes
have the GPU, where the platform has sleep mode (vLLM: CUDA, ROCm and XPU); elsewhere (vLLM's CPU build) the engine
keeps its memory, and says so once. Before the engine starts and before each wake-up, the GPUs it maps must have its
memory share free (gpu_memory.check_free), or the round stops naming the processes that hold them.
"""
from __future__ import annotations

import sys
from typing import Any, Sequence

from dataflex_rl.backends.verl.gpu_memory import check_free
from dataflex_rl.backends.verl.rollout import RolloutSettings
from dataflex_rl.backends.verl.vllm_requests import completions, request_seed


def engine_arguments(model_dir: str, *, max_new_tokens: int, prompt_tokens: int, rollout: RolloutSettings,
                     seed, sleep_mode: bool = True) -> dict[str, Any]:
    """vllm.LLM's arguments for a round's rollouts: the training rollout's engine, with sleep mode where the
    platform has it."""
    return {"model": model_dir, "dtype": "bfloat16", "tensor_parallel_size": rollout.tensor_parallel_size,
            "gpu_memory_utilization": rollout.gpu_memory_utilization, "enforce_eager": rollout.enforce_eager,
            "max_model_len": prompt_tokens + max_new_tokens, "seed": seed, "enable_sleep_mode": sleep_mode}


def sampling_arguments(*, samples, temperature, max_new_tokens: int, seed, stop_token_ids: Sequence) -> dict[str, Any]:
    """vllm.SamplingParams' arguments for one rollout stream: the training rollout's nucleus (none) and length."""
    return {"n": samples, "temperature": temperature, "top_p": 1.0, "top_k": -1, "max_tokens": max_new_tokens,
            "seed": seed, "stop_token_ids": list(stop_token_ids)}


class VllmSampler:
    def __init__(self, model_dir: str, *, max_new_tokens: int, prompt_tokens: int, stop_token_ids: Sequence[int],
                 rollout: RolloutSettings, seed: int):
        from vllm import LLM
        from vllm.platforms import current_platform

        self.max_new_tokens, self.stop_token_ids = max_new_tokens, list(stop_token_ids)
        self.sleeps = bool(current_platform.is_sleep_mode_available())
        if not self.sleeps:
            print(f"vLLM on {current_platform.device_type}: no sleep mode on this platform, so the round's engine "
                  f"keeps its memory while the gradients run", file=sys.stderr)
        self.memory_share, self.engine_gpus = rollout.gpu_memory_utilization, rollout.tensor_parallel_size
        check_free(self.memory_share, "the selection round's vLLM engine", self.engine_gpus)
        self.engine = LLM(**engine_arguments(model_dir, max_new_tokens=max_new_tokens, prompt_tokens=prompt_tokens,
                                             rollout=rollout, seed=seed, sleep_mode=self.sleeps))
        self.asleep = False

    def sample(self, prompts: Sequence[Sequence[int]], *, samples: int, temperature: float,
               seed: int) -> list[list[list[int]]]:
        from vllm import SamplingParams

        if self.asleep:
            check_free(self.memory_share, "vLLM's wake-up after the round's backward passes", self.engine_gpus)
            self.engine.wake_up()
            self.asleep = False
        params = [SamplingParams(**sampling_arguments(samples=samples, temperature=temperature,
                                                      max_new_tokens=self.max_new_tokens,
                                                      seed=request_seed(seed, prompt),
                                                      stop_token_ids=self.stop_token_ids)) for prompt in prompts]
        outputs = self.engine.generate([{"prompt_token_ids": list(p)} for p in prompts], params, use_tqdm=False)
        return [[list(completion.token_ids) for completion in completions(output)] for output in outputs]

    def release(self) -> None:
        if self.sleeps and not self.asleep:
            self.engine.sleep(level=1)
            self.asleep = True
