"""The dry-run summary's GPU- and CPU-hours: each rule's merged resources × its planned jobs, against hand counts."""
import re
from pathlib import Path

from dataflex_rl.study.allocation import job_cpus, requested_hours, score_layout_lines, total_lines

import forked_snakemake

REPO = Path(__file__).resolve().parents[1]


def test_a_job_is_allocated_its_cpus_per_task_else_its_threads():
    """As the Slurm executor asks: --cpus-per-task from `cpus_per_task` when set (non-zero), else the job's threads."""
    assert job_cpus({"cpus_per_task": 40, "threads": 8}) == 40
    assert job_cpus({"threads": 8}) == 8
    assert job_cpus({"cpus_per_task": 0, "threads": 3}) == 3
    assert job_cpus({}) == 1


def test_hours_are_jobs_times_devices_times_runtime():
    # 10 jobs × 2 GPUs × 90 min = 30 GPU-hours; 10 × 6 CPUs × 1.5 h = 90 CPU-hours
    assert requested_hours(10, {"gpu": 2, "cpus_per_task": 6, "runtime": 90}) == (30.0, 90.0)
    assert requested_hours(10, {"threads": 4, "runtime": 30}) == (0.0, 20.0)  # no gpu: none
    assert requested_hours(10, {"gpu": 2}) is None  # no runtime: not counted
    resources = {"a": {"runtime": 20, "threads": 2}, "b": {"threads": 1}, "c": {}}
    assert total_lines({"a": 3, "b": 2, "c": 0}, resources) == [
        "  requested allocation, the upper bound of what the study uses (each job's runtime limit × its GPUs or CPUs "
        "× jobs; not a measurement): 0.0 GPU-hours, 2.0 CPU-hours",
        "    not counted, no runtime: b (set one with --set-resources <rule>:runtime=<minutes>, or in the profile)"]


def test_the_score_layouts_are_priced_at_the_same_runtime_per_benchmark():
    """13 scored runs × 12 benchmarks, a study scoring per run with 240 min per job: per benchmark that is 20 min, so
    156 jobs of 20 min and 13 jobs of 240 min both ask 13 × 240 / 60 = 52 GPU-hours (× 8 CPUs = 416 CPU-hours)."""
    assert score_layout_lines(13, 12, False, {"gpu": 1, "cpus_per_task": 8, "runtime": 240}) == [
        "  score layout (evaluation.job_per_benchmark; one model load per job; 20 min of score runtime per benchmark):",
        "    true:                  156 jobs = 156 model loads, a run's 12 benchmarks side by side, 1 GPU each "
        "(20 min): 52.0 GPU-h, 416.0 CPU-h",
        "    false (this study):     13 jobs = 13 model loads, a run's 12 benchmarks in turn on 1 GPU (240 min): "
        "52.0 GPU-h, 416.0 CPU-h"]
    assert score_layout_lines(13, 1, True, {"gpu": 1, "runtime": 240}) == []  # one benchmark: the layouts agree


def _row(output: str, rule: str) -> list[str]:
    return re.search(rf"^    {rule} .*$", output.split("jobs from scratch", 1)[1], re.MULTILINE)[0].split()


def test_the_paper_dry_run_prices_a_runtime_set_on_the_command_line():
    """--set-resources reaches the summary (the merged resources). Snakemake replaces the profile's whole
    set-resources with the command line's, so the train job here keeps the workflow's 8 GPUs and 40 CPUs and gets 100
    minutes: 13 methods × 12 seeds × 8 GPUs × 100 / 60 = 2,080 GPU-hours, × 40 CPUs = 10,400 CPU-hours; the score
    jobs keep theirs: 157 runs × 12 benchmarks × 1 GPU × 120 / 60 = 3,768 GPU-hours."""
    result = forked_snakemake.snakemake(
        ["-n", "--quiet", "--snakefile", str(REPO / "Snakefile"), "--profile",
         "profiles/slurm", "--configfile", "config/paper.yaml", "--set-resources", "train:runtime=100"],
        cwd=REPO, timeout=300)
    assert result.returncode == 0, result.stderr[-3000:]
    assert _row(result.stderr, "train")[:8] == ["train", "156", "8", "40", "320000", "8", "100", "2,080.0"]
    assert _row(result.stderr, "train")[8] == "10,400.0"
    assert _row(result.stderr, "score")[6:9] == ["120", "3,768.0", "30,144.0"]
    assert "not a measurement): 5,848.0 GPU-hours," in result.stderr
