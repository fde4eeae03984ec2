"""The GPU memory handed from one user to the next inside a train job: the round process's backward passes, vLLM's
wake-up or start, and verl's segments take the same GPUs in turn.

- `release_cached`: after the backward passes, the round process's caching allocator still holds what they reserved
  (weights, gradients, the activation peak) although no tensor uses it; vLLM's wake-up re-creates its weights and KV
  cache with cuMemCreate beside it (vLLM: device_allocator/cumem.py, CuMemAllocator.wake_up), and fails if it does
  not fit. So the references go, then gc, then every device's cache is emptied.
- `check_free`: before a user maps `fraction` of each GPU (vLLM's `gpu_memory_utilization`, which vLLM checks only
  once its weights are loaded: vLLM: v1/worker/utils.py, "Free memory on device ... less than desired"), the free
  memory is compared with it, and a refusal names each short device, its free and total GiB and the processes that
  hold it (nvidia-smi), so a leftover vLLM or Ray worker is named before minutes of start-up are spent.
- `check_free_in_subprocess`: the same check from the train job's own process, which never touches CUDA (a CUDA
  context there would hold ~0.5 GiB of every GPU for the whole verl segment): a short child process measures and
  exits. Before a verl segment it asks for vLLM's share plus what verl holds beside it (`beside`: the FSDP state and
  context, train_memory.beside_rollout_bytes), and first compares each device's total with the model's declared
  probe.gpu_memory_gb (`device_errors`), so a job sent to smaller GPUs than its config plans for fails in seconds,
  before Ray, FSDP and vLLM start.
"""
from __future__ import annotations

import gc
import json
import math
import shutil
import subprocess
import sys
from dataclasses import dataclass
from typing import Sequence

from dataflex_rl.backends.verl.gpu_types import counted, usable_gib

GIB = 1 << 30


class GpuMemoryError(RuntimeError):
    """A GPU of the job has less free memory than the next user of it will map."""


@dataclass(frozen=True)
class DeviceMemory:
    index: int
    free: int
    total: int


def release_cached(devices: Sequence[str]) -> None:
    """Garbage-collect, then return every CUDA device's cached blocks to the driver (nothing on the CPU)."""
    import torch

    gc.collect()
    for device in devices:
        if str(device).startswith("cuda") and torch.cuda.is_available():
            with torch.cuda.device(device):
                torch.cuda.empty_cache()


def measured(count: int | None = None) -> list[DeviceMemory]:
    """The free and total memory of the first `count` CUDA devices (all where None) by cudaMemGetInfo; none on a
    machine without CUDA."""
    import torch

    if not torch.cuda.is_available():
        return []
    indices = range(torch.cuda.device_count() if count is None else min(count, torch.cuda.device_count()))
    return [DeviceMemory(i, *torch.cuda.mem_get_info(i)) for i in indices]


def holders() -> list[str]:
    """The compute processes nvidia-smi lists on the machine's GPUs, as 'pid <pid> (<name>, <used> MiB, GPU <uuid>)';
    none where nvidia-smi is absent or fails."""
    if shutil.which("nvidia-smi") is None:
        return []
    try:
        result = subprocess.run(["nvidia-smi", "--query-compute-apps=pid,process_name,used_memory,gpu_uuid",
                                 "--format=csv,noheader,nounits"], capture_output=True, text=True, timeout=30)
    except (OSError, subprocess.TimeoutExpired):
        return []
    listed = []
    for line in result.stdout.splitlines() if result.returncode == 0 else []:
        fields = [field.strip() for field in line.split(",")]
        if len(fields) == 4:
            listed.append(f"pid {fields[0]} ({fields[1]}, {fields[2]} MiB, GPU {fields[3]})")
    return listed


def device_errors(devices: Sequence[DeviceMemory], gpu_memory_gb: float, model: str) -> str | None:
    """Why devices whose total memory is below the declared `gpu_memory_gb` (counted as gpu_types.usable_gib) cannot
    run what the dry run sized for `model`; None where each has it."""
    small = [d for d in devices if d.total < usable_gib(gpu_memory_gb) * GIB]
    if not small:
        return None
    listed = ", ".join(f"cuda:{d.index} has {d.total / GIB:.2f} GiB in all" for d in small)
    fits = math.floor(min(d.total for d in small) / GIB)  # GB that count as less than the smallest total
    return (f"the train job of {model} is planned for GPUs of {counted(gpu_memory_gb)} "
            f"(models.<m>.probe.gpu_memory_gb: {gpu_memory_gb:g}), but {listed} (CUDA's total): verl's rollout and "
            f"a selection round sized for the declared GPUs would run out of memory — ask Slurm for GPUs of that "
            f"size (models.<m>.resources.train.gpu_model, e.g. h200, which the Slurm executor sends as "
            f"--gpus=<gpu_model>:<gpu>), or lower models.<m>.probe.gpu_memory_gb to at most {fits} for these GPUs")


def shortfall(devices: Sequence[DeviceMemory], fraction: float, user: str,
              processes: Sequence[str] = (), beside: int = 0) -> str | None:
    """Why `user`, mapping `fraction` of each device's total memory beside `beside` bytes that another holds there
    (verl's FSDP state and context), would not fit the devices' free memory; None where every device has room."""
    short = [d for d in devices if d.free < fraction * d.total + beside]
    if not short:
        return None
    held_beside = f" + {beside / GIB:.1f} GiB beside it" if beside else ""
    listed = ", ".join(f"cuda:{d.index} has {d.free / GIB:.1f} of {d.total / GIB:.1f} GiB free, below the "
                       f"{(fraction * d.total + beside) / GIB:.1f} GiB ({fraction:g} of it{held_beside})"
                       for d in short)
    besides = (f" beside the {beside / GIB:.1f} GiB that verl holds there (the FSDP state and context: "
               f"dataflex_rl/backends/verl/train_memory.py)" if beside else "")
    held = "; ".join(processes) if processes else "nvidia-smi lists no compute process (or is not installed)"
    return (f"{user} maps {fraction:g} of each GPU's memory{besides}, but {listed}. Processes on the GPUs: {held}. A "
            f"process left over from an earlier vLLM or Ray start holds it: end it (or requeue the job on a free "
            f"node), then rerun the train job; it resumes from its checkpoints")


def check_free(fraction: float, user: str, count: int | None = None) -> None:
    """Refuse (GpuMemoryError) where the first `count` CUDA devices lack `fraction` of their memory free; nothing
    to check without CUDA."""
    _refuse_short(measured(count), fraction, user)


def check_free_in_subprocess(fraction: float, user: str, beside: int = 0, gpu_memory_gb: float | None = None,
                             model: str = "the model") -> None:
    """check_free over every CUDA device, `beside` bytes besides the share, measured by a child process (this process
    keeps no CUDA context); first, where `gpu_memory_gb` is given, each device's total against it (device_errors).
    Nothing to check where torch sees no CUDA device."""
    import torch

    if not torch.cuda.is_available():
        return
    result = subprocess.run([sys.executable, "-m", __name__], capture_output=True, text=True, timeout=600)
    if result.returncode:
        raise GpuMemoryError(f"measuring the GPUs' free memory before {user} failed (exit {result.returncode}): "
                             f"{result.stderr.strip()[-2000:]}")
    devices = [DeviceMemory(**entry) for entry in json.loads(result.stdout.strip().splitlines()[-1])]
    small = device_errors(devices, gpu_memory_gb, model) if gpu_memory_gb is not None else None
    if small is not None:
        raise GpuMemoryError(small)
    _refuse_short(devices, fraction, user, beside)


def _refuse_short(devices: Sequence[DeviceMemory], fraction: float, user: str, beside: int = 0) -> None:
    if shortfall(devices, fraction, user, beside=beside) is not None:
        raise GpuMemoryError(shortfall(devices, fraction, user, holders(), beside))


if __name__ == "__main__":
    print(json.dumps([vars(device) for device in measured()]))
