"""Fault injection for the resume tests: `DATAFLEX_FAULT=<point>:<step>` kills a training run at a named point;
`DATAFLEX_FAULT=<point>:<step>:hang` stops it there instead.

The trainer reads the variable once per run. At the matching point and step the process sends itself SIGKILL: no
`finally`, atexit or signal handler runs, exactly as when a cluster preempts a job or the kernel kills it for memory.
With `:hang` it sleeps there until something outside ends it, as a job stuck on a collective or a file system waits
for its scheduler: a time limit (TIMEOUT), `scancel`, `scontrol requeue` (tests/test_slurm_cluster.py). A resumed run
starts after its checkpoint's step, so a point at or before that step is not reached again. With the variable unset a
point costs one tuple comparison.

`step` is the trainer's step counter at that moment (the number of optimiser steps completed), so `after_rollouts:0`
kills the first step before any checkpoint exists. Points, in the order a run passes them:

  step_start            before the step draws its prompts
  after_rollouts        rollouts sampled and rewarded; no loss, no optimiser step yet
  after_optimiser_step  the update applied and its metrics recorded; the checkpoint not yet written
  checkpoint_write      in the middle of writing the checkpoint's temporary file (before it is synced and renamed)
  after_checkpoint      the checkpoint renamed into place
  final_weights         in the middle of writing the final model's temporary directory (weights written, tokenizer not)
  after_final_weights   the final model directory in place; the metrics file not yet written
"""
from __future__ import annotations

import os
import signal
import sys
import time
from dataclasses import dataclass
from typing import BinaryIO

ENV = "DATAFLEX_FAULT"
ACTIONS = ("kill", "hang")
POINTS = ("step_start", "after_rollouts", "after_optimiser_step", "checkpoint_write", "after_checkpoint",
          "final_weights", "after_final_weights")


@dataclass(frozen=True)
class FaultPlan:
    """Where to kill or stop the process, and which; the default plan never fires."""

    point: str | None = None
    step: int = -1
    action: str = "kill"

    @classmethod
    def from_environment(cls) -> "FaultPlan":
        text = os.environ.get(ENV, "")
        if not text:
            return cls()
        fields = text.split(":")
        point, step, action = [*fields, "kill"][:3] if len(fields) in (2, 3) else ("", "", "")
        if point not in POINTS or not step.isdigit() or action not in ACTIONS:
            raise ValueError(f"{ENV}={text!r} is not <point>:<step>[:hang]; point is one of {', '.join(POINTS)} and "
                             f"step a non-negative integer, e.g. {ENV}=after_rollouts:0 (or unset it)")
        return cls(point, int(step), action)

    def reached(self, point: str, step: int) -> None:
        """Kill or stop this process if the plan names `point` at `step`."""
        if (point, step) == (self.point, self.step):
            self._fire()

    def writer(self, handle: BinaryIO, point: str, step: int) -> BinaryIO:
        """`handle` itself, or, where the plan names `point` at `step`, a handle whose writer dies (or stops)
        mid-file."""
        return _DiesMidWrite(handle, self._fire) if (point, step) == (self.point, self.step) else handle

    def _fire(self) -> None:
        if self.action == "hang":
            print(f"{ENV}: stopped at {self.point} of step {self.step} until killed", file=sys.stderr, flush=True)
            while True:
                time.sleep(60)
        os.kill(os.getpid(), signal.SIGKILL)


class _DiesMidWrite:
    """Passes the first write through to disk, then fires on the second: a truncated file, as a kill mid-write
    leaves."""

    def __init__(self, handle: BinaryIO, fire):
        self._handle, self._writes, self._fire = handle, 0, fire

    def write(self, data: bytes) -> int:
        if self._writes:
            self._handle.flush()
            self._fire()
        self._writes += 1
        return self._handle.write(data)

    def flush(self) -> None:
        self._handle.flush()
