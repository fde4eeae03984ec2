#!/usr/bin/env bash
# The verl backend end to end on one GPU, offline, in about 12 minutes (at most 20): the environment check, a tiny
# locally built model, 2 verl steps of a selection policy through our train job, the plugin in the Ray workers, verl's
# raw metrics, the actor update's fields, the merge and vLLM scoring, then 2 rounds of GradAlign between verl segments
# (tests/gpu/gpu_smoke.py). It installs nothing:
# prepare the environment beforehand (pip install -e ".[gpu]", envs/gpu.yaml) and run it on the GPU node.
# Usage: tests/gpu/gpu_smoke.sh [output folder]   (PYTHON picks the interpreter; default python)
set -euo pipefail
cd "$(dirname "$0")/../.."
PYTHON=${PYTHON:-python}
OUT=${1:-/tmp/dataflex_rl_gpu_smoke}
export PYTHONPATH="$PWD${PYTHONPATH:+:$PYTHONPATH}"  # this checkout, in verl's process and its Ray workers
# Ray's logs of the session verl starts (ray.init's default temp folder, or RAY_TMPDIR)
RAY_LOGS="${RAY_TMPDIR:-/tmp}/ray/session_latest/logs"

stage() {  # stage <name> <seconds> <command...>: one line per stage with its time; stops the smoke on failure
    local name=$1 limit=$2 start=$SECONDS
    shift 2
    echo "== $name (limit ${limit} s)"
    if ! timeout "$limit" "$@" 2>&1 | tee "$OUT/$name.log"; then
        echo "[FAILED] stage $name after $((SECONDS - start)) s; its output: $OUT/$name.log"
        exit 1
    fi
    echo "== $name done in $((SECONDS - start)) s"
}

# before anything else: every missing or wrong piece at once, nothing installed
"$PYTHON" -m dataflex_rl.backends.verl.gpu_stack
rm -rf "$OUT" && mkdir -p "$OUT"
stage train 400 "$PYTHON" tests/gpu/gpu_smoke.py train "$OUT"
stage check 50 "$PYTHON" tests/gpu/gpu_smoke.py check "$OUT" "$RAY_LOGS"
stage score 150 "$PYTHON" tests/gpu/gpu_smoke.py score "$OUT"
stage select 600 "$PYTHON" tests/gpu/gpu_smoke.py select "$OUT"
echo "GPU smoke passed in $SECONDS s: $OUT"
