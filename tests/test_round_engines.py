"""A selection round's rollouts dealt over one engine process per GPU group (dataflex_rl/backends/verl/
round_engines.py): real processes and pipes, with a stand-in engine per process (tests/fake_round_engine.py); the
vLLM engine itself runs in tests/test_vllm_cpu.py. The round's rollouts are the same for 1, 2 and 3 engines."""
from functools import partial

import pytest

from dataflex_rl.backends.verl.round_engines import (DealtSampler, EngineError, EngineProcess, device_groups,
                                                     visible_devices)
from fake_round_engine import FakeEngine, logged

PROMPTS = [[1, 2, 3], [4], [5, 6], [7, 8, 9, 10], [11], [12, 13], [14]]


@pytest.mark.parametrize("visible, size, groups", [
    (["0", "1", "2", "3"], 1, ["0", "1", "2", "3"]),
    (["4", "5", "6", "7"], 2, ["4,5", "6,7"]),  # Slurm's allocation, as CUDA_VISIBLE_DEVICES names it
    (["0", "1", "2"], 2, ["0,1"]),  # a remainder is left out (the dry run refuses GPUs not divisible by TP)
    ([], 1, [None]),  # no GPU: one engine, nothing to set
])
def test_the_job_gpus_are_grouped_by_the_engines_tensor_parallel_size(visible, size, groups):
    assert device_groups(visible, size) == groups


def test_too_few_gpus_for_one_engine_are_refused():
    with pytest.raises(ValueError, match="needs 2 GPUs .* the job has 1: 3"):
        device_groups(["3"], 2)


def test_visible_devices_follow_cuda_visible_devices(monkeypatch):
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "4,5,6,7")
    assert visible_devices(2) == ["4", "5"]
    monkeypatch.delenv("CUDA_VISIBLE_DEVICES")
    assert visible_devices(3) == ["0", "1", "2"] and visible_devices(0) == []


@pytest.mark.parametrize("engines", [1, 2, 3])
def test_the_rollouts_dealt_over_engine_processes_are_those_of_one_engine(engines, tmp_path):
    (tmp_path / "in_process").mkdir()
    want = FakeEngine(tmp_path / "in_process").sample(PROMPTS, samples=3, temperature=0.7, seed=11)
    log = tmp_path / "engines"
    log.mkdir()
    sampler = DealtSampler([EngineProcess(partial(FakeEngine, log), str(g)) for g in range(engines)])
    try:
        assert sampler.sample(PROMPTS, samples=3, temperature=0.7, seed=11) == want
        sampler.release()
        sampler.sample(PROMPTS[:1], samples=3, temperature=0.7, seed=12)  # fewer prompts than engines
    finally:
        sampler.close()
    entries = logged(log)
    assert sorted(entries) == [str(g) for g in range(engines)]  # each process saw only its own GPU
    for g in range(engines):
        first = entries[str(g)][0]
        assert first["prompts"] == PROMPTS[g::engines] and first["temperature"] == 0.7  # dealt round-robin
        assert {"devices": str(g), "release": True} in entries[str(g)]
    assert [len(e) for _, e in sorted(entries.items())] == [3] + [2] * (engines - 1)
    assert all(not engine.process.is_alive() for engine in sampler.engines)


def test_an_engine_that_fails_to_start_is_named_with_its_traceback(tmp_path):
    engine = EngineProcess(partial(FakeEngine, tmp_path, fail=True), "5")
    try:
        with pytest.raises(EngineError, match=r"(?s)engine process on GPUs 5 failed:.*CUDA out of memory"):
            engine.sample(PROMPTS, samples=1, temperature=1.0, seed=0)
    finally:
        engine.close()
    assert not engine.process.is_alive()
