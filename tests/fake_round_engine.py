"""A stand-in for one of a selection round's vLLM engines, for tests of the dealing over engine processes
(dataflex_rl/backends/verl/round_engines.py): each prompt's K responses are drawn from its own request seed
(vllm_requests.request_seed), as vLLM's per-request generators draw them, so a prompt's responses do not depend on
the engine or the batch; every call is logged, as it arrives, with the GPUs the process was given. The options make
an engine slow to start or to sample (`start_s`, `sample_s`: a vLLM load, a long generate), fail at its start or in a
sample, or start a process of its own (`StuckEngine`: vLLM's EngineCore) and never exit."""
import json
import os
import random
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

from dataflex_rl.backends.verl.vllm_requests import request_seed


class FakeEngine:
    def __init__(self, log_dir, fail: bool = False, start_s: float = 0.0, sample_s: float = 0.0,
                 fail_sample: bool = False):
        time.sleep(start_s)
        if fail:
            raise RuntimeError("CUDA out of memory (the engine's start, as a test injects it)")
        self.log = Path(log_dir) / f"{os.getpid()}.jsonl"
        self.devices = os.environ.get("CUDA_VISIBLE_DEVICES")
        self.sample_s, self.fail_sample = sample_s, fail_sample
        self._write({"started": True})

    def _write(self, entry):
        with open(self.log, "a") as handle:
            handle.write(json.dumps({"devices": self.devices, **entry}) + "\n")

    def sample(self, prompts, *, samples, temperature, seed):
        self._write({"prompts": [list(p) for p in prompts], "temperature": temperature})
        if self.fail_sample:
            raise RuntimeError("CUDA error: an illegal memory access (a sample, as a test injects it)")
        time.sleep(self.sample_s)
        out = []
        for prompt in prompts:
            draw = random.Random(request_seed(seed, prompt))
            out.append([[draw.randrange(100) for _ in range(draw.randrange(1, 6))] for _ in range(samples)])
        return out

    def release(self):
        self._write({"release": True})


# A process that ignores SIGTERM (only SIGKILL ends it) and says when it does so
GRANDCHILD = ("import signal, sys, time; signal.signal(signal.SIGTERM, signal.SIG_IGN); print('ignoring', flush=True); "
              "time.sleep(600)")


class StuckEngine(FakeEngine):
    """An engine that starts a process of its own (as vLLM's engine starts its EngineCore), writes its id to
    `pid_file`, and never exits once asked to: a thread that never ends holds its interpreter's shutdown, and it
    ignores SIGTERM too."""

    def __init__(self, log_dir, pid_file):
        super().__init__(log_dir)
        child = subprocess.Popen([sys.executable, "-c", GRANDCHILD], stdout=subprocess.PIPE, text=True)
        assert child.stdout.readline().strip() == "ignoring"
        Path(pid_file).write_text(str(child.pid))
        signal.signal(signal.SIGTERM, signal.SIG_IGN)
        threading.Thread(target=time.sleep, args=(3600,), daemon=False).start()


def logged(log_dir):
    """Each engine process's log entries, by the GPUs it was given."""
    return {entries[0]["devices"]: entries for entries in
            ([json.loads(line) for line in path.read_text().splitlines()] for path in Path(log_dir).glob("*.jsonl"))}
