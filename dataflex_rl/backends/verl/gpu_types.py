"""The GPU types a verl job can ask for (the Slurm executor's `gpu_model` resource) and the one rule by which a
declared `models.<m>.probe.gpu_memory_gb` is read; torch-free (the dry run reads it).

The Slurm executor plugin turns a job's `gpu` and `gpu_model` into `--gpus=<gpu_model>:<gpu>`
(snakemake_executor_plugin_slurm 2.8.0: utils.py:384-402; a gpu_model without `gpu` asks for one GPU, utils.py:400),
and names a model as letters, digits, `_` and `.` (utils.py:351). A type's name is the site's GRES type (`sinfo -o %G`:
`gpu:h200:8`), so the table below knows only the common names; another name is passed on unchecked.

GB against GiB. A card sold as "80 GB" shows 81,559 MiB (H100) or 81,920 MiB (A100) in nvidia-smi, and CUDA reports
less again as its total (cudaMemGetInfo, which vLLM sizes its `gpu_memory_utilization` share from and this project's
checks measure): the totals PyTorch's out-of-memory messages print on these cards in public issue threads are 79.11 to
79.25 GiB for the 80 GB H100 and A100 (e.g. vllm-project/vllm#27508: "GPU 0 has a total capacity of 79.11 GiB" on an
H100), 139.72 to 139.81 GiB for the 141 GB H200 and 39.38 to 39.56 GiB for the 40 GB A100. So every check here counts
a declared `gpu_memory_gb` of G as G - 2 GiB (`usable_gib`): below what CUDA reports on each of these cards (G - 1
would be above an H200's 139.7), and the dry run's memory estimates and the job's check of the GPU it got use that
one number. A card whose CUDA total is further below its marketed size (a GDDR card with ECC on) is caught by the job's
check in seconds (gpu_memory.device_errors).
"""
from __future__ import annotations

from dataclasses import dataclass

GIB = 1 << 30
MARGIN_GIB = 2.0  # a declared size less this is what the checks count: below every CUDA total in KNOWN_GPUS
COMMON_GPU_GB = 80  # the smallest common data-centre GPU of the train jobs' partitions (A100/H100 80 GB)


@dataclass(frozen=True)
class GpuType:
    """A GPU type: its marketed memory (GB), nvidia-smi's total (MiB, as the card's listings print it), the least
    total CUDA reports for it (GiB, as above), and the worst-case decoding throughput of one vLLM engine of an ~8B
    model on it (tokens/s; None: no estimate)."""

    marketed_gb: int
    nvidia_smi_mib: int
    cuda_gib: float
    decode_tokens_per_second: int | None


# Decoding throughput, as estimated in the GPU-path review's §4: Qwen3-8B-Base in bf16 on one vLLM engine at the
# default 0.9 share, batch-invariant, n = 32 samples a prompt, every sample to 8,192 tokens (the worst case the
# solve-rate runtime is sized for). Scaled from published figures (TensorRT-LLM's performance overview, Llama-3.1-8B
# FP8 on H100 and H200: 14,325 and 18,027 tokens/s at 128 in / 4096 out; a published vLLM benchmark of
# DeepSeek-R1-Distill-Qwen-7B on one A100-80GB: 3,363) by the KV cache a token holds (Qwen3-8B's 144 KiB: 2.25× and
# 2.57× theirs) and a context twice as long: H100 ≈ 2.6k, H200 ≈ 4.2k, A100-80GB ≈ 1.3k tokens/s, each the low end of
# its range. No estimate for the 40 GB A100: the sizing takes the lowest known one for it (solve_rate_time). The
# figures are for an ~8B model and are not scaled by model size: a smaller model decodes faster, so its jobs are
# oversized, never cut short.
KNOWN_GPUS = {
    "h100": GpuType(80, 81_559, 79.11, 2_600),
    "h200": GpuType(141, 143_771, 139.72, 4_200),
    "a100_80gb": GpuType(80, 81_920, 79.15, 1_300),
    "a100_40gb": GpuType(40, 40_960, 39.38, None),
    # a bare `a100` names either size: it guarantees the smaller one
    "a100": GpuType(40, 40_960, 39.38, None),
}
LOWEST_THROUGHPUT = min(gpu.decode_tokens_per_second for gpu in KNOWN_GPUS.values() if gpu.decode_tokens_per_second)


def gpu_type(name: str | None) -> GpuType | None:
    """The known type a `gpu_model` names (case-insensitive), None for none or another name."""
    return KNOWN_GPUS.get(str(name).lower()) if name else None


def usable_gib(gpu_memory_gb: float) -> float:
    """The GiB every check counts for a declared `gpu_memory_gb` (the module's rule)."""
    return gpu_memory_gb - MARGIN_GIB


def counted(gpu_memory_gb: float) -> str:
    """How the messages say it: "141 GB, counted as 139 GiB"."""
    return f"{gpu_memory_gb:g} GB, counted as {usable_gib(gpu_memory_gb):g} GiB"


def gpu_model_errors(key: str, gpu_memory_gb: float, gpu_model: str | None) -> list[str]:
    """A declared `gpu_memory_gb` that the train job's requested GPU type does not guarantee: above the smallest
    common GPU (80 GB) with no `gpu_model` asked, or a known `gpu_model` whose CUDA total is below the size counted."""
    setting = f"{key}.probe.gpu_memory_gb"
    fix_model = f"{key}.resources.train.gpu_model: h200"
    if not gpu_model:
        if gpu_memory_gb <= COMMON_GPU_GB:
            return []
        return [f"{setting}: {gpu_memory_gb:g}, but the train job asks for no GPU type (resource gpu_model), so Slurm "
                f"may give it any GPU of its partition, and the smallest common one has {COMMON_GPU_GB} GB "
                f"({KNOWN_GPUS['h100'].cuda_gib:g} GiB as CUDA reports an H100): verl's rollout and a selection "
                f"round sized for {counted(gpu_memory_gb)} would run out of memory — ask for the type "
                f"({fix_model}, or another type of ≥ {gpu_memory_gb:g} GB; the Slurm executor sends "
                f"--gpus=<gpu_model>:<gpu>), or lower {setting} to at most {COMMON_GPU_GB}"]
    known = gpu_type(gpu_model)
    if known is None or known.cuda_gib >= usable_gib(gpu_memory_gb):
        return []
    return [f"{setting}: {gpu_memory_gb:g}, but the train job asks for gpu_model {gpu_model!r} "
            f"({known.marketed_gb} GB: {known.cuda_gib:g} GiB as CUDA reports it, nvidia-smi "
            f"{known.nvidia_smi_mib:,} MiB), below the {counted(gpu_memory_gb)} — ask for a larger type ({fix_model}) "
            f"or lower {setting} to at most {known.marketed_gb}"]


def decode_throughput(gpu_model: str | None) -> tuple[int, str]:
    """The worst-case decoding throughput a solve-rate job on `gpu_model` is sized at (tokens/s), and how the summary
    names it: the type's estimate where KNOWN_GPUS has one, else the lowest estimate known (no type asked, or a type
    without one)."""
    known = gpu_type(gpu_model)
    if known is not None and known.decode_tokens_per_second:
        return known.decode_tokens_per_second, f"gpu_model {gpu_model}'s estimate"
    lowest = "the lowest estimate known, an A100-80GB's"
    if gpu_model:
        return LOWEST_THROUGHPUT, f"{lowest}, for gpu_model {gpu_model!r}, which has none"
    return LOWEST_THROUGHPUT, f"{lowest}: the job asks for no GPU type (models.<m>.resources.solve_rates.gpu_model)"
