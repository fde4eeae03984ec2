"""`snakemake --profile profiles/slurm` on a real Slurm cluster: the single-node cluster of tests/slurm/cluster.sh
(`.ci/run` starts it; `sudo bash tests/slurm/cluster.sh start` on a workstation). Skipped where no controller answers.

The smoke study goes through the profile as the README's small-cluster recipe runs it, its train and score jobs on the
`gpu` partition (models.<m>.resources), with a command-line `--set-resources train:...` that must not move them. Three
train jobs are stopped mid-run at their step-2 checkpoint (`DATAFLEX_FAULT=after_checkpoint:2:hang`,
dataflex_rl/training/faults.py) and then requeued (`scontrol requeue`), cancelled (`scancel`: the profile's `retries`
resubmit it) and killed by their time limit (`train:runtime=1`: TIMEOUT, then a retry); each retry resumes from step 2
and says so in its log, and the study's tables come out byte-identical to the same study run locally
(tests/conftest.py)."""
import os
import re
import shutil
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest
import yaml

REPO = Path(__file__).resolve().parents[1]
MODEL = "tiny-qwen2"


def controller_answers() -> str | None:
    """Why the cluster's tests cannot run here, or None where the fixture cluster answers."""
    if shutil.which("sinfo") is None:
        return "no Slurm on this machine (tests/slurm/cluster.sh install, then start)"
    try:
        ping = subprocess.run(["scontrol", "ping"], capture_output=True, text=True, timeout=15)
        partitions = subprocess.run(["sinfo", "-h", "-o", "%R"], capture_output=True, text=True, timeout=15)
    except subprocess.TimeoutExpired:
        return "the Slurm controller does not answer within 15 s"
    if "UP" not in ping.stdout:
        return f"no Slurm controller answers (scontrol ping: {(ping.stdout + ping.stderr).strip()[:200]})"
    if not {"cpu", "gpu"} <= set(partitions.stdout.split()):
        return "the Slurm cluster here has no `cpu` and `gpu` partitions (not tests/slurm/cluster.sh's)"
    return None


UNAVAILABLE = controller_answers()
pytestmark = [pytest.mark.slurm, pytest.mark.slow, pytest.mark.skipif(UNAVAILABLE is not None, reason=UNAVAILABLE or "")]

# The README's small-cluster recipe: the site's defaults sized to a 2-CPU node (the partition restated with them), the
# profile's decontaminate need sized down, and the README's train override; the executor's first status check early.
SMALL_CLUSTER = ["--default-resources", "slurm_partition=cpu", "runtime=30", "mem_mb=2000", "cpus_per_task=1",
                 "--set-resources", "decontaminate:cpus_per_task=1", "decontaminate:mem_mb=4000", "train:mem_mb=3000"]
FAST_STATUS = ["--slurm-init-seconds-before-status-checks", "2", "--slurm-keep-successful-logs"]
INTERRUPTED = {"requeue": "full/baseline/seed1/steps3", "scancel": "full/difffilter/seed1/steps3",
               "timeout": "full/softmax/seed1/steps3"}


def snakemake(workdir: Path, *args: str, targets: tuple = (), env: dict | None = None, timeout: float = 1200):
    """Snakemake on the study in `workdir` (targets first: the options' value lists would take them)."""
    return subprocess.run([sys.executable, "-m", "snakemake", *targets, "--snakefile", str(REPO / "Snakefile"),
                           "--directory", str(workdir), "--configfile", str(workdir / "study.yaml"), *args],
                          cwd=REPO, capture_output=True, text=True, env={**os.environ, **(env or {})},
                          timeout=timeout)


def jobs_of(workdir: Path) -> list[dict]:
    """The Slurm jobs this study's runs submitted (squeue remembers them for MinJobAge): id, rule comment, partition,
    state."""
    listed = subprocess.run(["squeue", "-h", "-t", "all", "-o", "%i|%k|%P|%T|%Z"], capture_output=True, text=True,
                            check=True).stdout
    rows = [dict(zip(("id", "comment", "partition", "state", "workdir"), line.split("|"))) for line in
            listed.splitlines()]
    return sorted((row for row in rows if Path(row["workdir"]).resolve() == workdir.resolve()),
                  key=lambda row: int(row["id"]))


def train_comment(run: str) -> str:
    return f"rule_train_wildcards_{MODEL}_{run.replace('/', '_')}"


def interrupt_when_stopped(workdir: Path, actions: dict[str, str], done: dict, deadline: float) -> None:
    """Watch the stopped train jobs' logs; requeue or cancel each once it has stopped at its step-2 checkpoint."""
    pending = {action: run for action, run in actions.items() if action in ("requeue", "scancel")}
    while pending and time.time() < deadline:
        for action, run in list(pending.items()):
            log = workdir / "logs/train" / MODEL / f"{run}.log"
            if not (log.exists() and "stopped at after_checkpoint of step 2" in log.read_text()):
                continue
            running = [job for job in jobs_of(workdir) if job["comment"] == train_comment(run)
                       and job["state"] == "RUNNING"]
            if not running:
                continue
            command = ["scontrol", "requeue", running[0]["id"]] if action == "requeue" else ["scancel", running[0]["id"]]
            subprocess.run(command, check=True, capture_output=True)
            done[action] = running[0]["id"]
            del pending[action]
        time.sleep(0.5)


@pytest.fixture(scope="module")
def cluster_study(tmp_path_factory):
    """The smoke study through the profile: first the three interrupted train jobs, then the whole study."""
    workdir = tmp_path_factory.mktemp("slurm")
    config = yaml.safe_load((REPO / "config/smoke.yaml").read_text())
    config["models"][MODEL]["resources"] = {"train": {"slurm_partition": "gpu"}, "score": {"slurm_partition": "gpu"}}
    (workdir / "study.yaml").write_text(yaml.safe_dump(config, sort_keys=False))
    profile = ["--profile", str(REPO / "profiles/slurm"), *FAST_STATUS]
    targets = tuple(f"results/runs/{MODEL}/{run}/metrics.parquet" for run in INTERRUPTED.values())

    interrupted, deadline = {}, time.time() + 1200
    watcher = threading.Thread(target=interrupt_when_stopped, args=(workdir, INTERRUPTED, interrupted, deadline))
    watcher.start()
    stopped = snakemake(workdir, *profile, *SMALL_CLUSTER, "train:runtime=1", targets=targets,
                        env={"DATAFLEX_FAULT": "after_checkpoint:2:hang"})
    watcher.join()
    study = snakemake(workdir, *profile, *SMALL_CLUSTER)
    return workdir, stopped, study, interrupted


def test_the_profiles_dry_run_refuses_a_job_no_node_can_run(tmp_path):
    """Unsized, the profile's decontaminate job (8 CPUs, 32 GB) fits no node of the 2-CPU fixture; a GPU asked of a
    partition without GPUs is refused the same way, and so is a runtime beyond the gpu partition's 2-day limit."""
    (tmp_path / "study.yaml").write_text((REPO / "config/smoke.yaml").read_text())
    cpus = int(subprocess.run(["sinfo", "-h", "-N", "-p", "cpu", "-o", "%c"], capture_output=True, text=True,
                              check=True).stdout.split()[0])
    refused = snakemake(tmp_path, "-n", "--profile", str(REPO / "profiles/slurm"))
    assert refused.returncode != 0
    output = refused.stdout + refused.stderr
    assert ("resources of rule decontaminate: cpus_per_task=8, mem_mb=32000 fit no node of Slurm partition 'cpu' "
            f"(sinfo: 1 node(s), at most {cpus} CPUs") in output
    assert f"--set-resources decontaminate:cpus_per_task={cpus}" in output
    gpu = snakemake(tmp_path, "-n", "--profile", str(REPO / "profiles/slurm"), *SMALL_CLUSTER,
                    "train:slurm_partition=gpu", "train:gpu=1")
    assert gpu.returncode != 0
    output = gpu.stdout + gpu.stderr
    assert "resources of rule train: cpus_per_task=1, mem_mb=3000, gpu=1 fit no node of Slurm partition 'gpu'" \
           in output and "0 GPUs each" in output
    too_long = snakemake(tmp_path, "-n", "--profile", str(REPO / "profiles/slurm"), *SMALL_CLUSTER,
                         "train:slurm_partition=gpu", "train:runtime=2881")
    assert too_long.returncode != 0
    assert ("resources of rule train: runtime=2881 minutes is longer than the time limit of Slurm partition 'gpu' "
            "(sinfo: 2880 minutes)") in too_long.stdout + too_long.stderr  # tests/slurm/slurm.conf.in: 2-00:00:00
    sized = snakemake(tmp_path, "-n", "--profile", str(REPO / "profiles/slurm"), *SMALL_CLUSTER)
    assert sized.returncode == 0, sized.stderr[-3000:]


def test_every_job_ran_as_a_slurm_job_on_its_partition(cluster_study):
    workdir, stopped, study, _ = cluster_study
    assert stopped.returncode == 0, stopped.stderr[-5000:]
    assert study.returncode == 0, study.stderr[-5000:]
    jobs = jobs_of(workdir)
    executed = sum(int(n) for rule, n in re.findall(r"^(\w+)\s+(\d+)\s*$", study.stderr.split("Job stats:")[1].split(
        "\n\n")[0], re.MULTILINE) if rule not in ("all", "total"))
    submitted = re.findall(r"has been submitted with SLURM jobid (\d+)", study.stderr)
    assert len(submitted) == executed > 0  # not one job of the study ran outside Slurm
    assert "localrule" not in study.stderr.replace("localrule all:", "")
    assert {job["id"] for job in jobs} >= set(submitted)
    for job in jobs:
        rule = re.match(r"rule_(\w+?)(_wildcards_|$)", job["comment"])[1]
        expected = "gpu" if rule in ("train", "score") else "cpu"
        assert job["partition"] == expected, job  # the command line's train:... kept train on its partition
    assert {re.match(r"rule_(\w+?)(_wildcards_|$)", job["comment"])[1] for job in jobs} >= {"train", "score",
                                                                                           "decontaminate", "tables"}


def test_a_requeued_a_cancelled_and_a_timed_out_train_job_resume_from_their_checkpoint(cluster_study):
    workdir, stopped, _, interrupted = cluster_study
    assert set(interrupted) == {"requeue", "scancel"}, stopped.stderr[-5000:]
    states = {job["id"]: job["state"] for job in jobs_of(workdir)}
    by_run = {run: [job for job in jobs_of(workdir) if job["comment"] == train_comment(run)]
              for run in INTERRUPTED.values()}
    # requeued: the same job id ran twice and finished; cancelled and timed out: a second job resubmitted by `retries`
    assert states[interrupted["requeue"]] == "COMPLETED" and len(by_run[INTERRUPTED["requeue"]]) == 1
    assert [job["state"] for job in by_run[INTERRUPTED["scancel"]]] == ["CANCELLED", "COMPLETED"]
    assert [job["state"] for job in by_run[INTERRUPTED["timeout"]]] == ["TIMEOUT", "COMPLETED"]
    for run in INTERRUPTED.values():
        log = (workdir / "logs/train" / MODEL / f"{run}.log").read_text()
        assert "resuming from step 2 of " in log, (run, log[-2000:])
        assert "stopped at" not in log  # the log is the resumed attempt's
        assert (workdir / f"results/runs/{MODEL}/{run}/metrics.parquet").exists()


def test_the_tables_are_byte_identical_to_the_local_run(cluster_study, smoke_study):
    workdir = cluster_study[0]
    _, local = smoke_study
    tables = workdir / "results/tables/smoke"
    through_slurm = {path.relative_to(tables).as_posix(): path.read_bytes() for path in sorted(tables.rglob("*.csv"))}
    assert sorted(through_slurm) == sorted(local) and len(local) >= 17
    assert [name for name in local if through_slurm[name] != local[name]] == []
