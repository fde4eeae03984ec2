#!/usr/bin/env bash
# The verl backend end to end on one GPU: a tiny locally built model, 2 verl steps of a selection policy through our
# train job, the plugin's registration in the workers' logs, the metrics, the merge, and vLLM scoring of 8 prompts
# (tests/gpu/gpu_smoke.py). Installs the gpu extra (verl[vllm]==0.9.1: torch 2.11.0, vllm 0.24.0) when verl or vLLM is
# missing. Usage: tests/gpu/gpu_smoke.sh [output folder]   (PYTHON picks the interpreter; default python)
set -euo pipefail
cd "$(dirname "$0")/../.."
PYTHON=${PYTHON:-python}
OUT=${1:-/tmp/dataflex_rl_gpu_smoke}
# the trainer's start-up line (dataflex_rl/backends/verl/plugin.py) in the driver's or a Ray worker's log
PLUGIN_LINE='dataflex_rl.*regist|regist.*dataflex_rl'

if ! "$PYTHON" -c "import verl, vllm" 2>/dev/null; then
    echo "verl or vLLM missing: installing the gpu extra from PyPI"
    "$PYTHON" -m pip install -e ".[gpu]"
fi
"$PYTHON" -c "import torch, verl, vllm; print('torch', torch.__version__, 'verl', verl.__version__, 'vllm',
    vllm.__version__, 'GPU', torch.cuda.get_device_name(0))"
rm -rf "$OUT" && mkdir -p "$OUT"

"$PYTHON" tests/gpu/gpu_smoke.py train "$OUT" 2>&1 | tee "$OUT/train.log"
ray_logs=$(ls -d /tmp/ray/session_latest/logs 2>/dev/null || true)
if grep -Eiq "$PLUGIN_LINE" "$OUT/train.log" ${ray_logs:+-r "$ray_logs"}; then
    echo "[ok] the plugin registered in the trainer's process: $(grep -Eih "$PLUGIN_LINE" "$OUT/train.log" \
        ${ray_logs:+-r "$ray_logs"} | head -1)"
else
    echo "[FAILED] no line matching /$PLUGIN_LINE/ in $OUT/train.log or ${ray_logs:-the Ray logs}"; exit 1
fi

"$PYTHON" tests/gpu/gpu_smoke.py score "$OUT" run 2>&1 | tee "$OUT/score_run.log"
"$PYTHON" tests/gpu/gpu_smoke.py score "$OUT" base 2>&1 | tee "$OUT/score_base.log"
echo "GPU smoke check passed: $OUT"
