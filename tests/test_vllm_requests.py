"""What the vLLM code path needs that runs without vLLM: each request's seed (dataflex_rl.backends.verl.vllm_requests)
and the workflow scripts that can start a vLLM engine, re-run as a spawned worker's `__mp_main__`."""
import os
import subprocess
import sys
from pathlib import Path

import pytest

from dataflex_rl.backends.verl.vllm_requests import SEED_BITS, request_seed

REPO = Path(__file__).resolve().parents[1]
VLLM_SCRIPTS = ("score", "solve_rates")  # the jobs that open a Generator: on the verl backend, a vLLM engine


def _seed_in_a_fresh_process(seed: int, ids: list[int], hash_seed: str) -> int:
    code = f"from dataflex_rl.backends.verl.vllm_requests import request_seed; print(request_seed({seed}, {ids}))"
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True,
                            env={**os.environ, "PYTHONHASHSEED": hash_seed})
    return int(result.stdout)


def test_a_prompts_seed_depends_on_the_seed_and_its_tokens_only():
    seed = request_seed(3, [5, 6, 7])
    assert seed == request_seed(3, (5, 6, 7)) == _seed_in_a_fresh_process(3, [5, 6, 7], "1") \
        == _seed_in_a_fresh_process(3, [5, 6, 7], "2")  # not Python's salted hash
    assert 0 <= seed < 2 ** SEED_BITS
    assert len({seed, request_seed(4, [5, 6, 7]), request_seed(3, [5, 6, 8]), request_seed(3, [7, 6, 5]),
                request_seed(3, [56, 7])}) == 5  # "5,6,7" and "56,7" are other texts


def test_the_prompts_of_a_batch_get_distinct_seeds():
    """Distinct seeds per prompt: one seed for all would give every prompt's j-th sample the same random numbers."""
    seeds = [request_seed(0, [token, token + 1]) for token in range(2000)]
    assert len(set(seeds)) == len(seeds)


@pytest.mark.parametrize("script", VLLM_SCRIPTS)
def test_a_script_that_starts_vllm_does_nothing_when_a_spawned_worker_reruns_it(script):
    """vLLM starts its workers with the spawn start method (always on the CPU, and on a GPU once CUDA is up), which
    re-runs the parent's main file as `__mp_main__`: there the script must not run its job again. As `__main__` it
    does (it reaches the `snakemake` object Snakemake injects, absent here)."""
    path = str(REPO / "workflow_scripts" / f"{script}.py")
    probe = "import runpy, sys; runpy.run_path(sys.argv[1], run_name=sys.argv[2])"
    as_worker = subprocess.run([sys.executable, "-c", probe, path, "__mp_main__"], capture_output=True, text=True)
    assert as_worker.returncode == 0, as_worker.stderr
    as_job = subprocess.run([sys.executable, "-c", probe, path, "__main__"], capture_output=True, text=True)
    assert "NameError: name 'snakemake' is not defined" in as_job.stderr
