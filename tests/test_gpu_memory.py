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

import torch

from dataflex_rl.backends.verl import gpu_memory, probe_shards
from dataflex_rl.backends.verl.gpu_memory import GIB, DeviceMemory, GpuMemoryError, shortfall

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


def test_the_replicas_are_dropped_when_the_backward_passes_end_though_the_caller_still_names_the_list():
    model = torch.nn.Linear(4, 4)
    with probe_shards.replicas(model, ("cpu", "cpu")) as models:
        copy = weakref.ref(models[1])
        assert models[1] is not model and torch.equal(models[1].weight, model.weight)
    gc.collect()
    assert models == [] and copy() is None
    assert next(model.parameters()).device.type == "cpu"
