"""A selection round's rollouts on all of the train job's GPUs: one sampler engine per group of `tensor_parallel_size`
GPUs, each in its own process with only its GPUs visible, and the prompts dealt round-robin over them.

Each prompt's request is seeded from the stream's seed and the prompt's own tokens (vllm_requests.request_seed), so a
prompt's responses do not depend on which engine draws them, nor on the others in its batch: the round's rollouts
are the same for any number of engines (tests/test_round_engines.py deals over 1, 2 and 3). An engine process takes
its commands over a pipe; its GPUs are set (CUDA_VISIBLE_DEVICES) before it imports torch or vLLM, so every engine
sees its group as cuda:0…, as vLLM expects of an engine of its own, and its start-up memory check looks at its own
GPUs only. The processes start together, so the engines load in parallel.
"""
from __future__ import annotations

import multiprocessing
import os
import traceback
from concurrent.futures import ThreadPoolExecutor
from typing import Any, Callable, Sequence

from dataflex_rl.backends.verl.probe_shards import each_share


class EngineError(RuntimeError):
    """An engine process failed: its traceback, as the process printed it."""


def device_groups(visible: Sequence[str], tensor_parallel_size: int) -> list[str | None]:
    """The CUDA_VISIBLE_DEVICES of each engine: the job's GPUs (`visible`, as CUDA_VISIBLE_DEVICES lists them) in
    consecutive groups of `tensor_parallel_size` (a remainder is left out: verl's own rollout replicas need the GPUs
    divisible by it, which the dry run checks); [None] where there is no GPU (one engine, nothing to set)."""
    if not visible:
        return [None]
    count = len(visible) // tensor_parallel_size
    if count < 1:
        raise ValueError(f"the round's engine needs {tensor_parallel_size} GPUs (its tensor_parallel_size), and the "
                         f"job has {len(visible)}: {','.join(visible)}")
    return [",".join(visible[g * tensor_parallel_size:(g + 1) * tensor_parallel_size]) for g in range(count)]


def visible_devices(count: int) -> list[str]:
    """The job's `count` GPUs as CUDA_VISIBLE_DEVICES names them (Slurm sets it to the allocation's), else 0…count−1."""
    listed = [d for d in os.environ.get("CUDA_VISIBLE_DEVICES", "").split(",") if d.strip()]
    return (listed or [str(i) for i in range(count)])[:count]


def _serve(connection, factory: Callable[[], Any], devices: str | None) -> None:
    if devices is not None:
        os.environ["CUDA_VISIBLE_DEVICES"] = devices
    try:
        sampler = factory()
        connection.send(("ready", None))
    except BaseException:  # noqa: BLE001 - the parent raises it with this traceback
        connection.send(("error", traceback.format_exc()))
        return
    while True:
        command, arguments = connection.recv()
        if command == "close":
            connection.send(("closed", None))
            return
        try:
            connection.send(("done", getattr(sampler, command)(*arguments[0], **arguments[1])))
        except BaseException:  # noqa: BLE001
            connection.send(("error", traceback.format_exc()))


class EngineProcess:
    """A sampler (probe.Sampler) built by `factory` in a process of its own, with `devices` as its
    CUDA_VISIBLE_DEVICES (None: the parent's)."""

    def __init__(self, factory: Callable[[], Any], devices: str | None):
        context = multiprocessing.get_context("spawn")
        self.devices = devices
        self.connection, child = context.Pipe()
        self.process = context.Process(target=_serve, args=(child, factory, devices), name=f"round engine {devices}")
        self.process.start()
        child.close()
        self.ready = False

    def _receive(self):
        try:
            status, value = self.connection.recv()
        except EOFError:
            self.process.join(5)
            raise EngineError(f"the round's engine process on GPUs {self.devices} exited (code "
                              f"{self.process.exitcode}) without answering") from None
        if status == "error":
            raise EngineError(f"the round's engine process on GPUs {self.devices} failed:\n{value}")
        return value

    def _call(self, command: str, *args, **kwargs):
        if not self.ready:
            self._receive()
            self.ready = True
        self.connection.send((command, (args, kwargs)))
        return self._receive()

    def sample(self, prompts, *, samples: int, temperature: float, seed: int):
        return self._call("sample", prompts, samples=samples, temperature=temperature, seed=seed)

    def release(self) -> None:
        self._call("release")

    def close(self) -> None:
        if self.process.is_alive():
            try:
                self.connection.send(("close", None))
                self.connection.recv()
            except (EOFError, OSError):
                pass
        self.process.join(60)
        if self.process.is_alive():
            self.process.kill()
            self.process.join()


class DealtSampler:
    """probe.Sampler over several engines: the prompts dealt round-robin (probe_shards.each_share), each engine's
    share drawn in parallel, the responses put back in the prompts' order."""

    def __init__(self, engines: Sequence[Any]):
        self.engines = list(engines)

    def sample(self, prompts: Sequence[Sequence[int]], *, samples: int, temperature: float,
               seed: int) -> list[list[list[int]]]:
        out: list[Any] = [None] * len(prompts)

        def draw(engine, rows):
            return engine.sample([prompts[r] for r in rows], samples=samples, temperature=temperature, seed=seed)

        for rows, responses in each_share(self.engines, len(prompts), draw):
            for row, response in zip(rows, responses, strict=True):
                out[row] = response
        return out

    def release(self) -> None:
        with ThreadPoolExecutor(max_workers=len(self.engines)) as pool:
            list(pool.map(lambda engine: engine.release(), self.engines))

    def close(self) -> None:
        for engine in self.engines:
            engine.close()
