"""GPU memory handed between a verl train job's processes (dataflex_rl/backends/verl/gpu_memory.py): the refusal's
arithmetic on hand-built devices, nvidia-smi's listing read from a stand-in executable, the child-process protocol
run for real, and the round's replicas dropped so that the allocator cache can be handed back."""
import gc
import json
import os
import stat
import subprocess
import sys
import weakref

import pytest
import torch

from dataflex_rl.backends.verl import gpu_memory, probe_shards
from dataflex_rl.backends.verl.gpu_memory import GIB, DeviceMemory, GpuMemoryError, device_errors, shortfall
from dataflex_rl.backends.verl.train_memory import beside_rollout_bytes

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
HOLDER = "pid 4242 (VLLM::EngineCore, 40960 MiB, GPU GPU-1)"


def test_a_gpu_short_of_the_share_is_named_with_its_figures_and_the_processes_holding_it():
    devices = [DeviceMemory(0, 100 * GIB, 140 * GIB), DeviceMemory(1, 130 * GIB, 140 * GIB)]
    problem = shortfall(devices, 0.85, "the selection round's vLLM engine", [HOLDER])
    # 0.85 × 140 = 119 GiB: cuda:0 (100 free) is short, cuda:1 (130 free) is not
    assert ("the selection round's vLLM engine maps 0.85 of each GPU's memory, but cuda:0 has 100.0 of 140.0 GiB "
            "free, below the 119.0 GiB (0.85 of it). Processes on the GPUs: " + HOLDER) in problem
    assert "cuda:1" not in problem
    assert shortfall(devices, 100 / 140, "x") is None  # exactly the share free is enough
    assert shortfall(devices, 0.72, "x") is not None  # 100.8 GiB > 100 free
    with open(os.path.join(REPO, "docs", "refusals.md")) as handle:
        assert problem.split("pid 4242")[0] in handle.read()


def test_nvidia_smis_compute_processes_are_listed(tmp_path, monkeypatch):
    tool = tmp_path / "nvidia-smi"
    tool.write_text("#!/bin/sh\necho '4242, VLLM::EngineCore, 40960, GPU-1'\necho '77, python, 512, GPU-2'\n")
    tool.chmod(tool.stat().st_mode | stat.S_IEXEC)
    monkeypatch.setenv("PATH", f"{tmp_path}{os.pathsep}{os.environ['PATH']}")
    assert gpu_memory.holders() == [HOLDER, "pid 77 (python, 512 MiB, GPU GPU-2)"]
    tool.write_text("#!/bin/sh\necho 'NVIDIA-SMI has failed' >&2\nexit 9\n")
    assert gpu_memory.holders() == []


def test_the_child_process_reports_the_devices_torch_sees():
    result = subprocess.run([sys.executable, "-m", "dataflex_rl.backends.verl.gpu_memory"], capture_output=True,
                            text=True, check=True, cwd=REPO)
    reported = json.loads(result.stdout.strip().splitlines()[-1])
    assert [entry["index"] for entry in reported] == list(range(torch.cuda.device_count()))
    assert all(0 <= entry["free"] <= entry["total"] for entry in reported)
    if not torch.cuda.is_available():  # nothing to check: no refusal, and no child process started
        gpu_memory.check_free(0.99, "x")
        gpu_memory.check_free_in_subprocess(0.99, "x")


def test_a_refusal_raises_with_the_listed_processes(monkeypatch):
    monkeypatch.setattr(gpu_memory, "measured", lambda count=None: [DeviceMemory(0, 10 * GIB, 80 * GIB)])
    monkeypatch.setattr(gpu_memory, "holders", lambda: [HOLDER])
    try:
        gpu_memory.check_free(0.5, "verl's rollout")
    except GpuMemoryError as refused:
        assert "cuda:0 has 10.0 of 80.0 GiB free, below the 40.0 GiB" in str(refused) and HOLDER in str(refused)
    else:
        raise AssertionError("a GPU with 10 of 80 GiB free was not refused for a 0.5 share")


# CUDA's totals (cudaMemGetInfo) on an 80 GB H100 and a 141 GB H200, as PyTorch's out-of-memory messages print them
H100, H200 = int(79.11 * GIB), int(139.72 * GIB)
QWEN3_8B = 8_190_735_360


def test_a_gpu_smaller_than_the_declared_size_is_named_with_both_figures_and_the_fix():
    """An H100 where 141 GB are declared: refused with the device, its total, the declared size as counted and the
    key to fix; an H200 (139.72 GiB ≥ 141 − 2) and an H100 under the default 80 (79.11 ≥ 78) pass."""
    devices = [DeviceMemory(0, H100, H100), DeviceMemory(1, H200, H200)]
    problem = device_errors(devices, 141, "Qwen/Qwen3-8B-Base")
    assert problem == ("the train job of Qwen/Qwen3-8B-Base is planned for GPUs of 141 GB, counted as 139 GiB "
                       "(models.<m>.probe.gpu_memory_gb: 141), but cuda:0 has 79.11 GiB in all (CUDA's total): verl's "
                       "rollout and a selection round sized for the declared GPUs would run out of memory — ask Slurm "
                       "for GPUs of that size (models.<m>.resources.train.gpu_model, e.g. h200, which the Slurm "
                       "executor sends as --gpus=<gpu_model>:<gpu>), or lower models.<m>.probe.gpu_memory_gb to at "
                       "most 79 for these GPUs")
    assert device_errors(devices[1:], 141, "m") is None
    assert device_errors(devices[:1], 80, "m") is None
    with open(os.path.join(REPO, "docs", "refusals.md")) as handle:
        assert "is planned for GPUs of" in handle.read()


def test_the_free_memory_asked_before_a_verl_segment_counts_the_fsdp_state_beside_vllms_share():
    """Qwen3-8B on 8 H200s at 0.85: vLLM's 118.8 GiB plus 15.3 GiB of FSDP state and 1.5 of context = 135.6 GiB free
    on each GPU; a leftover of 10 GiB (129.7 free) passes the share alone, and is refused with the FSDP state."""
    beside = beside_rollout_bytes(QWEN3_8B, 8)
    assert beside / GIB == pytest.approx(16 * QWEN3_8B / 8 / GIB + 1.5)  # 15.26 + 1.5
    devices = [DeviceMemory(0, H200 - 10 * GIB, H200)]
    assert shortfall(devices, 0.85, "verl's rollout") is None
    problem = shortfall(devices, 0.85, "verl's rollout", [HOLDER], beside)
    assert problem.startswith("verl's rollout maps 0.85 of each GPU's memory beside the 16.8 GiB that verl holds "
                              "there (the FSDP state and context: dataflex_rl/backends/verl/train_memory.py), but "
                              "cuda:0 has 129.7 of 139.7 GiB free, below the 135.5 GiB (0.85 of it + 16.8 GiB beside "
                              "it). Processes on the GPUs: " + HOLDER)
    assert shortfall([DeviceMemory(0, H200, H200)], 0.85, "x", beside=beside) is None


def test_the_train_jobs_check_refuses_small_gpus_before_the_free_memory(monkeypatch):
    """check_free_in_subprocess on fabricated devices (no GPU here): the child's report is stood in for; 8 H100s for
    a 141 GB declaration fail on their size, 8 H200s with room pass."""
    def child(devices):
        report = json.dumps([vars(device) for device in devices])
        return lambda *args, **kwargs: subprocess.CompletedProcess(args, 0, stdout=report + "\n", stderr="")

    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    monkeypatch.setattr(gpu_memory, "holders", lambda: [])
    monkeypatch.setattr(gpu_memory.subprocess, "run", child([DeviceMemory(i, H100, H100) for i in range(8)]))
    with pytest.raises(GpuMemoryError, match=r"cuda:0 has 79.11 GiB in all, .* cuda:7 has 79.11 GiB in all "):
        gpu_memory.check_free_in_subprocess(0.85, "verl's rollout", beside_rollout_bytes(QWEN3_8B, 8), 141, "m")
    monkeypatch.setattr(gpu_memory.subprocess, "run", child([DeviceMemory(i, H200, H200) for i in range(8)]))
    gpu_memory.check_free_in_subprocess(0.85, "verl's rollout", beside_rollout_bytes(QWEN3_8B, 8), 141, "m")
    monkeypatch.setattr(gpu_memory.subprocess, "run", child([DeviceMemory(0, H200 - 10 * GIB, H200)]))
    with pytest.raises(GpuMemoryError, match="below the 135.5 GiB"):
        gpu_memory.check_free_in_subprocess(0.85, "verl's rollout", beside_rollout_bytes(QWEN3_8B, 8), 141, "m")


def test_the_replicas_are_dropped_when_the_backward_passes_end_though_the_caller_still_names_the_list():
    model = torch.nn.Linear(4, 4)
    with probe_shards.replicas(model, ("cpu", "cpu")) as models:
        copy = weakref.ref(models[1])
        assert models[1] is not model and torch.equal(models[1].weight, model.weight)
    gc.collect()
    assert models == [] and copy() is None
    assert next(model.parameters()).device.type == "cpu"
