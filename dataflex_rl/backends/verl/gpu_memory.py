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
  exits.
"""
from __future__ import annotations

import gc
import json
import shutil
import subprocess
import sys
from dataclasses import dataclass
from typing import Sequence

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


def shortfall(devices: Sequence[DeviceMemory], fraction: float, user: str,
              processes: Sequence[str] = ()) -> str | None:
    """Why `user`, mapping `fraction` of each device's total memory, would not fit the devices' free memory; None
    where every device has room."""
    short = [d for d in devices if d.free < fraction * d.total]
    if not short:
        return None
    listed = ", ".join(f"cuda:{d.index} has {d.free / GIB:.1f} of {d.total / GIB:.1f} GiB free, below the "
                       f"{fraction * d.total / GIB:.1f} GiB ({fraction:g} of it)" for d in short)
    held = "; ".join(processes) if processes else "nvidia-smi lists no compute process (or is not installed)"
    return (f"{user} maps {fraction:g} of each GPU's memory, but {listed}. Processes on the GPUs: {held}. A process "
            f"left over from an earlier vLLM or Ray start holds it: end it (or requeue the job on a free node), then "
            f"rerun the train job; it resumes from its checkpoints")


def check_free(fraction: float, user: str, count: int | None = None) -> None:
    """Refuse (GpuMemoryError) where the first `count` CUDA devices lack `fraction` of their memory free; nothing
    to check without CUDA."""
    _refuse_short(measured(count), fraction, user)


def check_free_in_subprocess(fraction: float, user: str) -> None:
    """check_free over every CUDA device, measured by a child process (this process keeps no CUDA context); nothing
    to check where torch sees no CUDA device."""
    import torch

    if not torch.cuda.is_available():
        return
    result = subprocess.run([sys.executable, "-m", __name__], capture_output=True, text=True, timeout=600)
    if result.returncode:
        raise GpuMemoryError(f"measuring the GPUs' free memory before {user} failed (exit {result.returncode}): "
                             f"{result.stderr.strip()[-2000:]}")
    _refuse_short([DeviceMemory(**entry) for entry in json.loads(result.stdout.strip().splitlines()[-1])],
                  fraction, user)


def _refuse_short(devices: Sequence[DeviceMemory], fraction: float, user: str) -> None:
    if shortfall(devices, fraction, user) is not None:
        raise GpuMemoryError(shortfall(devices, fraction, user, holders()))


if __name__ == "__main__":
    print(json.dumps([vars(device) for device in measured()]))
