"""Verifier calls spread over processes, for the answer sets of thousands that a selection round's rewards and a
solve-rate or score job verify: the verifiers run in Python, one core each, and math-verify's time-outs need each call
on its process's main thread, so processes rather than threads, started by spawn (the caller may hold CUDA or a vLLM
engine's threads, which a fork would copy). Below POOL_MIN_CALLS a pool does not repay its start: each worker
imports the verifiers (seconds).

The caller's `__main__` must be importable without side effects: spawn re-runs a script's top level in each worker
as `__mp_main__` (the workflow scripts that verify this way are guarded, as vLLM's spawned workers need anyway).
"""
from __future__ import annotations

import multiprocessing
from concurrent.futures import ProcessPoolExecutor
from typing import Callable, Sequence, TypeVar

Call = TypeVar("Call")
Result = TypeVar("Result")

POOL_MIN_CALLS = 4096


def in_processes(function: Callable[[Call], Result], calls: Sequence[Call], *, workers: int,
                 minimum: int | None = None) -> list[Result]:
    """`function(call)` for each call, in the calls' order: in `workers` spawned processes where there are `minimum`
    (default POOL_MIN_CALLS) calls or more and more than one worker, else in this process. `function` and the calls
    must pickle (a module-level function, a functools.partial of one)."""
    if workers <= 1 or len(calls) < (POOL_MIN_CALLS if minimum is None else minimum):
        return [function(call) for call in calls]
    with ProcessPoolExecutor(workers, mp_context=multiprocessing.get_context("spawn")) as pool:
        return list(pool.map(function, calls, chunksize=max(1, len(calls) // (8 * workers))))
