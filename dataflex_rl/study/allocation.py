"""What a study asks of its machines, for the dry-run summary: GPU-hours and CPU-hours per rule and in total, from
each rule's merged resources (its `runtime` limit in minutes, `gpu`, and `cpus_per_task` or else `threads`, as the
Slurm executor requests them) × its planned jobs. These are requested allocations, an upper bound on use: a job
that finishes early releases its machine, and nothing here is measured.
"""
from __future__ import annotations

from typing import Any, Mapping, NamedTuple


class Hours(NamedTuple):
    gpu: float
    cpu: float


def job_cpus(resources: Mapping[str, Any]) -> int:
    """The CPUs one job is allocated: `cpus_per_task` where set (at least 1), else its threads."""
    if resources.get("cpus_per_task"):
        return max(1, int(resources["cpus_per_task"]))
    return int(resources.get("threads", 1))


def requested_hours(jobs: int, resources: Mapping[str, Any], runtime: float | None = None) -> Hours | None:
    """`jobs` jobs of one rule for their whole `runtime` (minutes; the rule's own by default); None without one."""
    runtime = resources.get("runtime") if runtime is None else runtime
    if runtime is None:
        return None
    return Hours(jobs * int(resources.get("gpu") or 0) * runtime / 60, jobs * job_cpus(resources) * runtime / 60)


def hours_text(hours: Hours) -> str:
    return f"{hours.gpu:,.1f} GPU-h, {hours.cpu:,.1f} CPU-h"


def total_lines(jobs: Mapping[str, int], resources: Mapping[str, Mapping[str, Any]]) -> list[str]:
    """The study's requested GPU-hours and CPU-hours, naming the rules left out for want of a runtime."""
    hours = {rule: requested_hours(count, resources[rule]) for rule, count in jobs.items() if count}
    counted = [h for h in hours.values() if h is not None]
    uncounted = [rule for rule, h in hours.items() if h is None]
    how = "set one with --set-resources <rule>:runtime=<minutes>, or in the profile"
    if not counted:
        return [f"  requested allocation: no hours, since no rule has a runtime ({how})"]
    lines = [f"  requested allocation, the upper bound of what the study uses (each job's runtime limit × its GPUs or "
             f"CPUs × jobs; not a measurement): {sum(h.gpu for h in counted):,.1f} GPU-hours, "
             f"{sum(h.cpu for h in counted):,.1f} CPU-hours"]
    if uncounted:
        lines.append(f"    not counted, no runtime: {', '.join(uncounted)} ({how})")
    return lines


def score_layout_lines(scored_runs: int, benchmarks: int, per_benchmark: bool,
                       resources: Mapping[str, Any]) -> list[str]:
    """What evaluation.job_per_benchmark trades: a score job per (run, benchmark) loads the model once per benchmark
    and scores a run's benchmarks side by side; a job per run loads it once and scores them in turn. Both are priced
    at the same runtime per benchmark (the score rule's runtime, per job of this study's layout), so their requested
    hours agree; the model loads and the parallelism are what differ."""
    if benchmarks < 2 or not scored_runs:
        return []
    runtime = resources.get("runtime")
    per_benchmark_runtime = None if runtime is None else (runtime if per_benchmark else runtime / benchmarks)
    gpus, cpus = int(resources.get("gpu") or 0), job_cpus(resources)
    device = f"{gpus} GPU{'s' * (gpus > 1)}" if gpus else f"{cpus} CPU{'s' * (cpus > 1)}"
    layouts = [(True, scored_runs * benchmarks, per_benchmark_runtime,
                f"a run's {benchmarks} benchmarks side by side, {device} each"),
               (False, scored_runs, None if runtime is None else per_benchmark_runtime * benchmarks,
                f"a run's {benchmarks} benchmarks in turn on {device}")]
    per = "" if runtime is None else f"; {per_benchmark_runtime:g} min of score runtime per benchmark"
    lines = [f"  score layout (evaluation.job_per_benchmark; one model load per job{per}):"]
    for value, jobs, job_runtime, how in layouts:
        label = f"{str(value).lower()}{' (this study)' if value == per_benchmark else ''}:"
        cost = "" if job_runtime is None else \
            f" ({job_runtime:g} min): {hours_text(requested_hours(jobs, resources, job_runtime))}"
        lines.append(f"    {label:<19}{jobs:>7} jobs = {jobs} model loads, {how}{cost}")
    return lines
