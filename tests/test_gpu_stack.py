"""The GPU smoke's environment check, run for real in the CPU test environment (pyproject's `test` extra: verl 0.9.1
without vLLM, no GPU): it names exactly vLLM and the GPU, installs nothing and exits 1; a version verl forbids is named
with verl's own requirement (its installed metadata: transformers>=5.5.3,<5.11,!=5.6.0)."""
import importlib.util
import os
import subprocess
import sys

import pytest

from dataflex_rl.backends.verl.gpu_stack import _unmet, gpu_stack_problems

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def _cpu_test_environment() -> bool:
    import torch

    return importlib.util.find_spec("verl") is not None and importlib.util.find_spec("vllm") is None and \
        not torch.cuda.is_available()


pytestmark = pytest.mark.skipif(not _cpu_test_environment(),
                                reason="checks the CPU test environment: verl installed, no vLLM, no GPU")


def test_the_cpu_test_environment_lacks_exactly_vllm_and_a_gpu():
    import torch

    assert gpu_stack_problems() == [
        "vllm 0.24.0: not installed",
        f"a CUDA GPU: torch {torch.__version__} sees none (CUDA build {torch.version.cuda}, "
        f"CUDA_VISIBLE_DEVICES={os.environ.get('CUDA_VISIBLE_DEVICES')!r})"]


def test_the_command_names_them_and_exits_1_without_installing():
    env = {**os.environ, "PYTHONPATH": REPO}
    result = subprocess.run([sys.executable, "-m", "dataflex_rl.backends.verl.gpu_stack"], env=env, cwd=REPO,
                            capture_output=True, text=True, timeout=120)
    assert result.returncode == 1
    lines = result.stdout.splitlines()
    assert "(2 problem(s)); nothing was installed" in lines[0]
    assert lines[1] == "  - vllm 0.24.0: not installed" and lines[2].startswith("  - a CUDA GPU: torch ")
    assert len(lines) == 3


@pytest.mark.parametrize("installed, unmet", [
    ("5.10.4", []), ("5.9.0", []),
    ("5.11.0", ["verl needs transformers!=5.6.0,<5.11,>=5.5.3"]),
    ("5.6.0", ["verl needs transformers!=5.6.0,<5.11,>=5.5.3"]),
    ("5.16.0+local", ["verl needs transformers!=5.6.0,<5.11,>=5.5.3"]),
])
def test_a_transformers_that_verl_forbids_is_named_with_verls_requirement(installed, unmet):
    assert _unmet("transformers", installed) == unmet
