"""A verl model's rollout engine settings (`models.<m>.rollout`): vLLM's tensor parallelism, its share of GPU memory
and whether it captures CUDA graphs. The defaults are the authors' released runs (8 GPUs × TP 1 at 0.85: the
released launch script, experiments/train_one_7b_jizhi.sh), not verl 0.9.1's (TP 2 at 0.5: trainer/config/rollout/
rollout.yaml), whose TP 2 cannot start on one GPU (the rollout worker asserts that TP divides the GPUs:
workers/engine_workers.py:655-660).

Which of them a trained run's result depends on (the train slice of dataflex_rl/study/resolved.py): the tensor
parallelism, since vLLM splits each layer's reductions over TP GPUs and so can sample other tokens; not the memory share
(the KV cache's size) nor eager mode (kernel launch, no CUDA graphs), which change speed and memory, so changing them
retrains nothing.
"""
from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class RolloutSettings:
    tensor_parallel_size: int = 1
    gpu_memory_utilization: float = 0.85
    enforce_eager: bool = False


# the settings a trained run's result depends on (the module docstring says why the others are not)
RESULT_SETTINGS = ("tensor_parallel_size",)
