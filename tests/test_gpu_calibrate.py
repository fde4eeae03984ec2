"""tests/gpu/calibrate.py, the GPU memory calibration a lent GPU runs, in its reduced form on the CPU: every shipped
prompt-selection model's cases run through the real probe backward and host accumulation, and the estimates it prints
beside them are the dry run's, checked here against hand-worked arithmetic, so the script cannot rot unseen."""
from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def _reduced_run(out: Path) -> dict:
    result = subprocess.run([sys.executable, "tests/gpu/calibrate.py", "--reduced", "--out", str(out)], cwd=ROOT,
                            capture_output=True, text=True, timeout=600)
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
    return json.loads((out / "calibration.json").read_text()) | {"stdout": result.stdout}


def test_the_reduced_calibration_runs_every_shipped_case_beside_the_dry_runs_estimate(tmp_path):
    data = _reduced_run(tmp_path)
    # the shipped micro_batches (config/campaigns/gradalign_verl.yaml: 4 and 8), and 1, at 16 and 32 tokens each
    cases = {(row["model"], row["micro_batch"], row["response_tokens"]) for row in data["backward"]}
    assert cases == {(model, batch, tokens) for model, own in (("qwen3-8b-base", 4), ("qwen2.5-math-1.5b", 8))
                     for batch in (1, own) for tokens in (16, 32)}
    row = next(r for r in data["backward"]
               if (r["model"], r["micro_batch"], r["response_tokens"]) == ("qwen3-8b-base", 1, 16))
    # the reduced Qwen3 (hidden 64, MLP 160, 2 layers, vocabulary 512, 4 heads and 2 KV heads of 16, untied head):
    # 2 × 512 × 64 embeddings + 2 × (q 4096 + k 2048 + v 2048 + o 4096 + q/k norms 32 + MLP 30720 + norms 128)
    # + 64 = 151,936 parameters; 8 prompt + 16 response tokens, T = 24:
    # 12 × 151,936 + 24 × 2 × 64 × (2 + 4) + 24² × 3 + max(24 × (12·64 + 8·160 + 14·64 + 12·32 + 6·64),
    # 16 × 512 × 12) = 1,823,232 + 18,432 + 1,728 + 98,304 bytes
    assert row["estimate_bytes"] == 1_823_232 + 18_432 + 1_728 + 98_304
    assert row["allocated_bytes"] is None and row["layers"] == row["of_layers"] == 2  # no CUDA: nothing to measure
    host = data["host"][0]
    assert host["peak_rss_bytes"] > 0 and host["estimate_bytes"] > 0
    assert "backward qwen3-8b-base layers 2/2 micro_batch 4 8+32 tokens" in data["stdout"]
