"""A selection round's rollouts on all of the train job's GPUs: one sampler engine per group of `tensor_parallel_size`
GPUs, each in its own process with only its GPUs visible, and the prompts dealt round-robin over them.

Each prompt's request is seeded from the stream's seed and the prompt's own tokens (vllm_requests.request_seed), so a
prompt's noise does not depend on which engine draws it. Its responses do not either where the logits do not depend
on the batch: on vLLM's CPU build, and on a GPU under VLLM_BATCH_INVARIANT=1, which the round's engines do not set
(it costs throughput). On a GPU without it the logits depend on the batch an engine runs, so a changed number of
engines, or a stream drawn again (a round resumed before the stream was saved), draws other responses; across the
methods of one seed, round 0's candidates are the same only as far as vLLM's schedule is deterministic.
tests/test_round_engines.py deals over 1, 2 and 3 engines whose draws do not depend on the batch: it checks the
dealing, not vLLM.

An engine process takes its commands over a pipe; its GPUs are set (CUDA_VISIBLE_DEVICES) before it imports torch or
vLLM, so every engine sees its group as cuda:0…, as vLLM expects of an engine of its own, and its start-up memory
check looks at its own GPUs only. The processes start together, so the engines load in parallel, and the round waits
for every engine to start before it deals a prompt (DealtSampler): the first that fails stops the round.

Each engine process leads a session of its own (os.setsid), which holds the processes it starts (vLLM's EngineCore,
which watches for no parent's death and is stopped only by the engine process's exit handlers), so that close() can
end them all: an idle engine is asked to exit, then whatever is left of its group gets SIGTERM and, after
CLOSE_GRACE_S, SIGKILL. An engine busy inside a command (vLLM's generate, its start) reads no pipe until it is done,
so where a round stops early (another engine failed) a busy engine's group is signalled at once, without asking.
"""
from __future__ import annotations

import multiprocessing
import os
import signal
import time
import traceback
from multiprocessing.connection import wait
from typing import Any, Callable, Sequence

# How long close() waits for an engine to exit once asked, and again for its process group once signalled SIGTERM
CLOSE_GRACE_S = 60.0


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
    os.setsid()  # first: the session (and process group) of this engine and every process it starts
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


def _group_running(group: int) -> bool:
    """Whether a process of the process group `group` runs (a zombie, dead and not yet reaped, does not count)."""
    try:
        os.killpg(group, 0)
    except (ProcessLookupError, PermissionError):
        return False
    try:
        entries = [entry for entry in os.listdir("/proc") if entry.isdigit()]
    except OSError:  # no /proc: any member counts
        return True
    for entry in entries:
        try:
            with open(f"/proc/{entry}/stat") as handle:
                state, _, pgrp = handle.read().rpartition(")")[2].split()[:3]
        except (OSError, ValueError):
            continue
        if int(pgrp) == group and state != "Z":
            return True
    return False


class EngineProcess:
    """A sampler (probe.Sampler) built by `factory` in a process of its own, with `devices` as its
    CUDA_VISIBLE_DEVICES (None: the parent's). Its first answer is its start (`ready` or the error); `awaiting` says
    whether an answer is still to come (its start, or the command last sent)."""

    def __init__(self, factory: Callable[[], Any], devices: str | None):
        context = multiprocessing.get_context("spawn")
        self.devices = devices
        self.connection, child = context.Pipe()
        self.process = context.Process(target=_serve, args=(child, factory, devices), name=f"round engine {devices}")
        self.process.start()
        child.close()
        self.awaiting, self.closed = True, False

    def send(self, command: str, *args, **kwargs) -> None:
        if self.awaiting:  # its start
            self.receive()
        self.connection.send((command, (args, kwargs)))
        self.awaiting = True

    def receive(self):
        """The answer awaited: an EngineError naming the engine's GPUs where it failed or exited."""
        try:
            status, value = self.connection.recv()
        except EOFError:
            self.process.join(5)
            raise EngineError(f"the round's engine process on GPUs {self.devices} exited (code "
                              f"{self.process.exitcode}) without answering") from None
        finally:
            self.awaiting = False
        if status == "error":
            raise EngineError(f"the round's engine process on GPUs {self.devices} failed:\n{value}")
        return value

    def _call(self, command: str, *args, **kwargs):
        self.send(command, *args, **kwargs)
        return self.receive()

    def sample(self, prompts, *, samples: int, temperature: float, seed: int):
        return self._call("sample", prompts, samples=samples, temperature=temperature, seed=seed)

    def release(self) -> None:
        self._call("release")

    def close(self) -> None:
        """End the engine and its process group: an idle engine is asked to exit and given CLOSE_GRACE_S; then what
        is left of the group (a busy engine, one that did not exit, vLLM's EngineCore) gets SIGTERM, and SIGKILL
        after CLOSE_GRACE_S more. Again after a close: nothing."""
        if self.closed:
            return
        self.closed = True
        if not self.awaiting and self.process.is_alive():
            try:
                self.connection.send(("close", None))
                if self.connection.poll(CLOSE_GRACE_S):
                    self.connection.recv()
            except (EOFError, OSError):
                pass
            self.process.join(CLOSE_GRACE_S)
        self._end_group()
        self.connection.close()

    def _end_group(self) -> None:
        group = self.process.pid  # the session's leader: the group's id is its own (os.setsid in _serve)
        for sent in (signal.SIGTERM, signal.SIGKILL):
            leader = self.process.is_alive()  # reaps a dead leader, so that its zombie does not count
            if not (leader or _group_running(group)):
                break
            for kill in (os.killpg, os.kill) if leader else (os.killpg,):  # os.kill: killed before its setsid
                try:
                    kill(group, sent)
                except (ProcessLookupError, PermissionError):
                    pass
            deadline = time.monotonic() + CLOSE_GRACE_S
            while (self.process.is_alive() or _group_running(group)) and time.monotonic() < deadline:
                time.sleep(0.05)
        self.process.join()


def answers(engines: Sequence[EngineProcess], all_engines: Sequence[EngineProcess] | None = None) -> list:
    """Each engine's awaited answer (its start, or the command last sent to it), in the engines' order, waiting on all
    of them at once: the first failure closes every engine of `all_engines` (by default `engines`: those still busy
    are signalled, not asked; EngineProcess.close) and is raised as soon as it comes, not after the others' answers."""
    got: dict[int, Any] = {}
    pending = {engine.connection: index for index, engine in enumerate(engines) if engine.awaiting}
    try:
        while pending:
            for connection in wait(list(pending)):
                index = pending.pop(connection)
                got[index] = engines[index].receive()
    except BaseException:
        for engine in all_engines if all_engines is not None else engines:
            engine.close()
        raise
    return [got.get(index) for index in range(len(engines))]


class DealtSampler:
    """probe.Sampler over several engine processes: the prompts dealt round-robin (probe_shards.shares), each
    engine's share drawn in parallel, the responses put back in the prompts' order. It is made once every engine has
    started; the first engine that fails, to start or later, stops the round, and every engine is closed."""

    def __init__(self, engines: Sequence[EngineProcess]):
        self.engines = list(engines)
        answers(self.engines)

    def sample(self, prompts: Sequence[Sequence[int]], *, samples: int, temperature: float,
               seed: int) -> list[list[list[int]]]:
        # here, not at the top: an engine process imports this module before it sets its GPUs, and probe_shards
        # imports torch
        from dataflex_rl.backends.verl.probe_shards import shares

        dealt = shares(len(prompts), len(self.engines))
        out: list[Any] = [None] * len(prompts)
        drawn = self._each([(engine, "sample", ([prompts[r] for r in rows],),
                             {"samples": samples, "temperature": temperature, "seed": seed})
                            for engine, rows in zip(self.engines, dealt)])
        for rows, responses in zip(dealt, drawn, strict=True):
            for row, response in zip(rows, responses, strict=True):
                out[row] = response
        return out

    def release(self) -> None:
        self._each([(engine, "release", (), {}) for engine in self.engines])

    def _each(self, commands: Sequence[tuple[EngineProcess, str, tuple, dict]]) -> list:
        """Each (engine, command, args, kwargs) sent at once, and the answers in their order (`answers`)."""
        try:
            for engine, command, args, kwargs in commands:
                engine.send(command, *args, **kwargs)
        except BaseException:
            self.close()
            raise
        return answers([engine for engine, *_ in commands], self.engines)

    def close(self) -> None:
        for engine in self.engines:
            engine.close()
