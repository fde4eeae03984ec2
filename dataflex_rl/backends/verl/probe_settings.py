"""A verl model's probe settings (`models.<m>.probe`) and what a selection round asks of the train job's machine;
torch-free (the dry run reads it).

The round's backward passes run on each of the job's GPUs (probe_shards.py): a replica's weights and one group's
gradient in the model's dtype (bf16: 2 + 2 bytes a parameter), and, in fp32, the unit validation gradient and the
share's mean scored gradient that the streamed score accumulates (4 + 4): 12 bytes a parameter, ~98 GB for an 8.2B
model, before the activations of `micro_batch` responses. On the host: the model between backward passes (2),
vLLM's weights while it sleeps (2) and the validation gradient (4), 8 bytes a parameter. The options that need whole
per-group gradients at once hold them on the host besides, fp32: a projection the M candidates', normalised
validation groups the |P_v| groups' (33 GB a group at 8B parameters, which only a small model can afford); the dry
run counts them.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from dataflex_rl.policies.methods import MethodSpec

GIB = 1 << 30
DTYPE_BYTES = 2  # bf16 weights and gradients, as the released scorer ran its model
GPU_BYTES_PER_PARAMETER = 2 * DTYPE_BYTES + 4 + 4
HOST_BYTES_PER_PARAMETER = 2 * DTYPE_BYTES + 4
GPU_HEADROOM = 0.9  # of a GPU's memory: CUDA context, allocator fragmentation


@dataclass(frozen=True)
class ProbeSettings:
    """`gpu_memory_gb`: the memory of one of the train job's GPUs (default 80: an A100/H100-80GB); `parameters`: the
    model's parameter count where its config.json cannot be read at dry run (a hub name not in the local cache);
    `micro_batch`: responses per forward and backward of the probe (default 1; the released scorer used 8)."""

    gpu_memory_gb: float = 80.0
    parameters: int | None = None
    micro_batch: int = 1


def probe_memory_errors(key: str, parameters: int, settings: ProbeSettings, host_mb: int,
                        gradient_rows: int = 0) -> list[str]:
    """Why a selection round of a `parameters`-parameter model cannot run on the train job's GPUs of
    `settings.gpu_memory_gb` and its `host_mb` of memory, holding `gradient_rows` whole fp32 gradients on the host
    besides (a projection, normalised validation groups: prompt_selection.candidates.SelectionSize)."""
    errors = []
    gpu = parameters * GPU_BYTES_PER_PARAMETER
    if gpu > GPU_HEADROOM * settings.gpu_memory_gb * GIB:
        errors.append(f"{key}.probe.gpu_memory_gb: {settings.gpu_memory_gb:g}, but a selection round's backward "
                      f"passes need {gpu / GIB:.0f} GiB on one GPU for {parameters:.3g} parameters (bf16 weights and "
                      f"gradient, fp32 validation and mean gradients: {GPU_BYTES_PER_PARAMETER} bytes a parameter, "
                      f"within {GPU_HEADROOM:.0%} of the GPU) — train on GPUs of ≥ "
                      f"{gpu / GPU_HEADROOM / GIB:.0f} GiB (and say so in {key}.probe.gpu_memory_gb), or use a "
                      f"smaller model")
    host = parameters * HOST_BYTES_PER_PARAMETER
    rows = gradient_rows * parameters * 4
    if host + rows > host_mb * (1 << 20):
        held = (f" and {gradient_rows} whole fp32 gradients of its groups ({rows / (1 << 20):.0f} MB: a "
                f"projection_dim holds the M candidates', normalise_validation_groups the |P_v| validation groups')"
                if rows else "")
        fix = f" — raise the train rule's mem_mb ({key}.resources.train.mem_mb)" + (
            ", or leave those options out (every other reduction streams one group at a time)" if rows else "")
        errors.append(f"resources of rule train: mem_mb={host_mb}, but a selection round of {key} holds "
                      f"{(host + rows) / (1 << 20):.0f} MB on the host: the model, vLLM's sleeping weights and the "
                      f"validation gradient ({HOST_BYTES_PER_PARAMETER} bytes a parameter){held}{fix}")
    return errors


def check_selection_options(method: MethodSpec) -> list[str]:
    """What of a prompt-selection method's options the verl backend cannot run, each saying why."""
    if method.params.get("precondition") == "adam":
        return ["params.precondition: 'adam' divides g_v by Adam's second moment, which on the verl backend lives in "
                "the FSDP optimiser shards of the run's checkpoint, not in the merged weights the probe scores; the "
                "released loop never enabled it — use precondition: none (the default) on verl"]
    return []
