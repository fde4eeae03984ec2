"""A stand-in for one of a selection round's vLLM engines, for tests of the dealing over engine processes
(dataflex_rl/backends/verl/round_engines.py): each prompt's K responses are drawn from its own request seed
(vllm_requests.request_seed), as vLLM's per-request generators draw them, so a prompt's responses do not depend on
the engine or the batch; every call is logged with the GPUs the process was given."""
import json
import os
import random
from pathlib import Path

from dataflex_rl.backends.verl.vllm_requests import request_seed


class FakeEngine:
    def __init__(self, log_dir, fail: bool = False):
        if fail:
            raise RuntimeError("CUDA out of memory (the engine's start, as a test injects it)")
        self.log = Path(log_dir) / f"{os.getpid()}.jsonl"
        self.devices = os.environ.get("CUDA_VISIBLE_DEVICES")

    def _write(self, entry):
        with open(self.log, "a") as handle:
            handle.write(json.dumps({"devices": self.devices, **entry}) + "\n")

    def sample(self, prompts, *, samples, temperature, seed):
        out = []
        for prompt in prompts:
            draw = random.Random(request_seed(seed, prompt))
            out.append([[draw.randrange(100) for _ in range(draw.randrange(1, 6))] for _ in range(samples)])
        self._write({"prompts": [list(p) for p in prompts], "temperature": temperature})
        return out

    def release(self):
        self._write({"release": True})


def logged(log_dir):
    """Each engine process's log entries, by the GPUs it was given."""
    return {entries[0]["devices"]: entries for entries in
            ([json.loads(line) for line in path.read_text().splitlines()] for path in Path(log_dir).glob("*.jsonl"))}
