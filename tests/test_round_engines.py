"""A selection round's rollouts dealt over one engine process per GPU group (dataflex_rl/backends/verl/
round_engines.py): real processes and pipes, with a stand-in engine per process (tests/fake_round_engine.py); the
vLLM engine itself runs in tests/test_vllm_cpu.py. With engines whose draws do not depend on the batch (vLLM's on a
CPU, not on a GPU unless batch-invariant: round_engines), the dealt rollouts are those of one engine for 1, 2 and 3.
A failed engine stops the round at once and every engine process (and what it started) is ended."""
import os
import signal
import time
from functools import partial

import pytest

from dataflex_rl.backends.verl import round_engines
from dataflex_rl.backends.verl.round_engines import (DealtSampler, EngineError, EngineProcess, device_groups,
                                                     visible_devices)
from fake_round_engine import FakeEngine, StuckEngine, logged

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
def test_the_dealt_rollouts_of_batch_independent_engines_are_those_of_one_engine(engines, tmp_path):
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
        first = entries[str(g)][1]  # after its start
        assert first["prompts"] == PROMPTS[g::engines] and first["temperature"] == 0.7  # dealt round-robin
        assert {"devices": str(g), "release": True} in entries[str(g)]
    assert [len(e) for _, e in sorted(entries.items())] == [4] + [3] * (engines - 1)
    assert all(not engine.process.is_alive() for engine in sampler.engines)


def test_an_engine_that_fails_to_start_is_named_with_its_traceback(tmp_path):
    engine = EngineProcess(partial(FakeEngine, tmp_path, fail=True), "5")
    try:
        with pytest.raises(EngineError, match=r"(?s)engine process on GPUs 5 failed:.*CUDA out of memory"):
            engine.sample(PROMPTS, samples=1, temperature=1.0, seed=0)
    finally:
        engine.close()
    assert not engine.process.is_alive()


def _running(pid: int) -> bool:
    """Whether process `pid` runs (not gone, not a zombie awaiting its reaper)."""
    try:
        with open(f"/proc/{pid}/stat") as handle:
            return handle.read().rpartition(")")[2].split()[0] != "Z"
    except FileNotFoundError:
        return False


def _prompts_received(log):
    return [entry["prompts"] for entries in logged(log).values() for entry in entries if "prompts" in entry]


def test_a_failed_start_stops_the_round_before_any_prompt_is_dealt(tmp_path):
    """Engine 1 fails at once while the others are still loading (30 s): the round stops then, naming it, and no
    prompt reaches the others, which are ended mid-start."""
    engines = [EngineProcess(partial(FakeEngine, tmp_path, fail=g == 1, start_s=0 if g == 1 else 30), str(g))
               for g in range(3)]
    began = time.monotonic()
    try:
        with pytest.raises(EngineError, match=r"(?s)engine process on GPUs 1 failed:.*CUDA out of memory"):
            DealtSampler(engines).sample(PROMPTS, samples=1, temperature=1.0, seed=0)
        stopped = time.monotonic() - began
        assert _prompts_received(tmp_path) == []
        assert [engine.process.is_alive() for engine in engines] == [False] * 3
        assert stopped < 20, f"the round stopped {stopped:.1f} s in, after the other engines' start"
    finally:
        for engine in engines:
            engine.close()


def test_a_failed_sample_ends_the_other_engines_mid_sample(tmp_path):
    """Engine 1 fails its share while the others draw theirs (30 s each): the error comes at once, and the busy
    engines, which read no pipe until they are done, are ended by signal rather than waited for."""
    sampler = DealtSampler([EngineProcess(partial(FakeEngine, tmp_path, fail_sample=g == 1,
                                                  sample_s=0 if g == 1 else 30), str(g)) for g in range(3)])
    began = time.monotonic()
    try:
        with pytest.raises(EngineError, match=r"(?s)engine process on GPUs 1 failed:.*illegal memory access"):
            sampler.sample(PROMPTS, samples=1, temperature=1.0, seed=0)
        stopped = time.monotonic() - began
        assert len(_prompts_received(tmp_path)) == 3  # each engine had its share
        assert [engine.process.is_alive() for engine in sampler.engines] == [False] * 3
        assert stopped < 20, f"the error came {stopped:.1f} s in, after the other engines' shares"
    finally:
        sampler.close()


def test_close_ends_the_process_an_engine_started_even_when_neither_exits(tmp_path, monkeypatch):
    """The engine starts a process (as vLLM's engine starts EngineCore, which watches for no parent's death), then
    neither exits when asked and both ignore SIGTERM: close() ends the engine's whole process group with SIGKILL."""
    monkeypatch.setattr(round_engines, "CLOSE_GRACE_S", 1.0, raising=False)
    pid_file = tmp_path / "grandchild.pid"
    engine = EngineProcess(partial(StuckEngine, tmp_path, pid_file), "0")
    grandchild = None
    try:
        engine.release()  # started
        grandchild = int(pid_file.read_text())
        assert _running(grandchild)
        began = time.monotonic()
        engine.close()
        assert not engine.process.is_alive()
        assert not _running(grandchild), "the engine's own process outlived close()"
        assert time.monotonic() - began < 10
    finally:
        if grandchild is not None and _running(grandchild):
            os.kill(grandchild, signal.SIGKILL)
        engine.close()
