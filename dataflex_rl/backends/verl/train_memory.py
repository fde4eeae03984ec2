"""What a verl train job holds on each GPU when its rollout engine wakes up, against the GPU's memory; torch-free (the
dry run reads it). An estimate, calibrated on no GPU: its arithmetic is below.

The train command keeps every FSDP state on the GPUs (verl 0.9.1: trainer/config/engine/fsdp.yaml:12, 16: no param or
optimizer offload; :33 model_dtype fp32), sharded over the job's G GPUs: the actor's fp32 parameters (4 bytes a
parameter), Adam's two fp32 moments (8) and the reference policy's fp32 parameters (4), 16 bytes a parameter / G. Its
gradients are freed after each update, and the update's activations before the rollout resumes. vLLM wakes its
weights and KV cache beside that state at each step (verl: workers/engine_workers.py, the rollout's resume), up to its
`gpu_memory_utilization` u of the GPU (vLLM sizes its KV cache to u of the total, whatever else the GPU holds). With
about 1.5 GiB of CUDA and NCCL context a process:

    16 · P / G + 1.5 GiB + u · M ≤ M          (M: the GPU's memory, models.<m>.probe.gpu_memory_gb)

M is the declared size counted as gpu_types.usable_gib says (GB less 2 GiB: an 80 GB GPU as 78 GiB). Qwen2.5-7B
(7.62e9 parameters) on 8 GPUs of 80 GB: 14.2 + 1.5 + 0.85 · 78 = 82.0 GiB > 78 at the released u 0.85, which
(docs/backends.md) assumed an offloaded optimiser; u ≤ 0.79 fits. The train job asks for the same sum free before each
verl segment (`beside_rollout_bytes`; gpu_memory.check_free_in_subprocess), on the GPUs it measures.
"""
from __future__ import annotations

import math

from dataflex_rl.backends.verl.gpu_types import counted, usable_gib

GIB = 1 << 30
FSDP_BYTES_PER_PARAMETER = 4 + 8 + 4  # fp32 actor parameters, Adam's two fp32 moments, fp32 reference parameters
CONTEXT_GIB = 1.5  # CUDA and NCCL context of a training process (estimate)


def fsdp_gib(parameters: int, gpus: int) -> float:
    """The FSDP state of the actor and reference on one of `gpus` GPUs, GiB."""
    return FSDP_BYTES_PER_PARAMETER * parameters / gpus / GIB


def beside_rollout_bytes(parameters: int, gpus: int) -> int:
    """What verl holds on each of `gpus` GPUs beside vLLM's share when the rollout wakes: the FSDP state and the
    context, bytes."""
    return math.ceil(FSDP_BYTES_PER_PARAMETER * parameters / gpus + CONTEXT_GIB * GIB)


def largest_utilization(parameters: int, gpus: int, gpu_memory_gib: float) -> float:
    """The largest rollout gpu_memory_utilization (two decimals, rounded down) that fits beside the FSDP state."""
    room = (gpu_memory_gib - fsdp_gib(parameters, gpus) - CONTEXT_GIB) / gpu_memory_gib
    return math.floor(room * 100) / 100


def rollout_memory_errors(key: str, parameters: int, gpus: int, utilization: float,
                          gpu_memory_gb: float) -> list[str]:
    """Why the train job's vLLM, at `utilization` of each of `gpus` GPUs of a declared `gpu_memory_gb` (counted as
    gpu_types.usable_gib), cannot wake up beside the FSDP state of a `parameters`-parameter model; [] where it fits."""
    gpu_memory_gib = usable_gib(gpu_memory_gb)
    state = fsdp_gib(parameters, gpus)
    total = state + CONTEXT_GIB + utilization * gpu_memory_gib
    if total <= gpu_memory_gib:
        return []
    fits = largest_utilization(parameters, gpus, gpu_memory_gib)
    fix = (f"set {key}.rollout.gpu_memory_utilization to at most {fits:.2f}" if fits > 0
           else "give the train job more GPUs (the FSDP state is sharded over them) or larger ones")
    return [f"{key}.rollout.gpu_memory_utilization: {utilization:g}, but on each of the train job's {gpus} GPUs of "
            f"{counted(gpu_memory_gb)} ({key}.probe.gpu_memory_gb; dataflex_rl/backends/verl/gpu_types.py) verl "
            f"holds the FSDP state of {parameters:.3g} parameters ({FSDP_BYTES_PER_PARAMETER} bytes a parameter "
            f"over {gpus} GPUs: {state:.1f} GiB) and {CONTEXT_GIB:g} GiB of context when vLLM wakes its {utilization:g} of the GPU: {total:.1f} GiB in "
            f"all (an estimate: dataflex_rl/backends/verl/train_memory.py) — {fix}, or set "
            f"{key}.probe.gpu_memory_gb to the GPUs the train job really gets"]
