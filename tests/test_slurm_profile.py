"""`snakemake --profile slurm` as the README documents it: the profile installed under its name in Snakemake's user
config folder (or named by SNAKEMAKE_PROFILE) plans the paper matrix with the verl jobs' resources, as the path
`--profile profiles/slurm` does; the embedded default plans no merge job and asks for no GPU."""
import os
import re
import subprocess
import sys
from pathlib import Path
from types import SimpleNamespace

import pytest
from snakemake_executor_plugin_slurm.submit_string import get_submit_command

from dataflex_rl.study.config_checks import resource_type_errors

REPO = Path(__file__).resolve().parents[1]
SNAKEMAKE = [sys.executable, "-m", "snakemake", "-n", "--snakefile", str(REPO / "Snakefile")]
PAPER = ("--configfile", "config/paper.yaml")


def dry_run(home: Path, *args, env: dict | None = None) -> subprocess.CompletedProcess:
    """A dry run with HOME and XDG_CONFIG_HOME in `home`, so that only a profile installed there is found."""
    environment = {key: value for key, value in os.environ.items() if key != "SNAKEMAKE_PROFILE"}
    environment.update(HOME=str(home), XDG_CONFIG_HOME=str(home / ".config"), **(env or {}))
    return subprocess.run([*SNAKEMAKE, *args], cwd=REPO, capture_output=True, text=True, env=environment,
                          timeout=600)


def job_resources(output: str, rule: str) -> str:
    """The `resources:` line of the first job of `rule` in a dry run's job list."""
    return re.search(rf"^rule {rule}:\n(?:    .*\n)*?    resources: (.*)$", output, re.MULTILINE)[1]


def job_count(output: str, rule: str) -> int:
    found = re.search(rf"^{rule}\s+(\d+)\s*$", output.split("Job stats:", 1)[1], re.MULTILINE)
    return int(found[1]) if found else 0


def check_paper_plan(result: subprocess.CompletedProcess) -> None:
    output = result.stdout + result.stderr
    assert result.returncode == 0, output[-3000:]
    assert (job_count(output, "train"), job_count(output, "merge"), job_count(output, "score")) == (156, 156, 1884)
    train, merge, score = (job_resources(output, rule) for rule in ("train", "merge", "score"))
    assert "slurm_partition=gpu" in train and "gpu=8" in train and "cpus_per_task=40" in train
    assert "runtime=2880" in train and "mem_mb=320000" in train
    assert "slurm_partition=cpu" in merge and "gpu=" not in merge and "mem_mb=128000" in merge
    assert "slurm_partition=gpu" in score and "gpu=1" in score and "runtime=120" in score
    # the summary names what the verl jobs run
    assert ("verl merge: python -m verl.model_merger merge --backend fsdp --local_dir <run>/model[/actor] "
            "--target_dir <run>/merged") in output
    assert ("verl score: VLLM_BATCH_INVARIANT=1, vllm.LLM(model=<run>/merged or models.<m>.path, dtype=bfloat16, "
            "max_model_len=5120, tensor_parallel_size=<gpu>, seed=0), vllm.SamplingParams(temperature=0.0, "
            "top_p=1.0, max_tokens=4096, n=1, seed=<request_seed(0, prompt)>, stop_token_ids=['<eos>', \"<chat template's turn end>\"])") in output
    # (max_model_len: 1024 prompt tokens + evaluation.max_new_tokens)
    # a trained verl run is scored from its merged directory, the untrained base from the model's `path`
    scored = re.findall(r"^rule score:\n    input: (.*)$", output, re.MULTILINE)
    assert any("/steps300/merged" in line for line in scored)
    assert not any("/model," in line or line.endswith("/model") for line in scored)


def test_the_profile_installed_under_its_name_is_found(tmp_path):
    refused = dry_run(tmp_path, "--profile", "slurm", *PAPER)
    assert refused.returncode != 0  # not installed: `profiles/` is not where Snakemake looks names up
    folder = tmp_path / ".config" / "snakemake"
    folder.mkdir(parents=True)
    (folder / "slurm").symlink_to(REPO / "profiles" / "slurm")  # the README's install command
    check_paper_plan(dry_run(tmp_path, "--profile", "slurm", *PAPER))


@pytest.mark.parametrize("how", ["path", "SNAKEMAKE_PROFILE"])
def test_the_profile_by_path_or_environment_plans_the_same(tmp_path, how):
    if how == "path":
        check_paper_plan(dry_run(tmp_path, "--profile", "profiles/slurm", *PAPER))
    else:
        check_paper_plan(dry_run(tmp_path, *PAPER, env={"SNAKEMAKE_PROFILE": str(REPO / "profiles" / "slurm")}))


def test_the_embedded_default_plans_no_merge_and_no_gpu(tmp_path):
    result = dry_run(tmp_path, "--cores", "2", "--forceall")  # the whole plan, whatever results/ holds already
    output = result.stdout + result.stderr
    assert result.returncode == 0, output[-3000:]
    assert job_count(output, "merge") == 0 and job_count(output, "train") > 0
    assert "gpu=" not in output
    scored = re.findall(r"^rule score:\n    input: (.*)$", output, re.MULTILINE)
    assert scored and all("/model" in line and "/merged" not in line for line in scored)


def test_the_readmes_override_on_the_command_line_keeps_the_gpu_jobs_on_the_gpu_partition(tmp_path):
    """A command-line --set-resources replaces the profile's whole set-resources block; the GPU jobs' partition comes
    with their own resources, so it stays, while the profile's other per-rule settings (decontaminate's memory) go,
    as Snakemake documents."""
    result = dry_run(tmp_path, "--profile", "profiles/slurm", *PAPER, "--set-resources", "train:gpu=4")
    output = result.stdout + result.stderr
    assert result.returncode == 0, output[-3000:]
    train, score, merge = (job_resources(output, rule) for rule in ("train", "score", "merge"))
    assert "slurm_partition=gpu" in train and "gpu=4" in train and "slurm_partition=gpu" in score
    assert "slurm_partition=cpu" in merge
    assert re.search(r"^    train +156 .* gpu$", output, re.MULTILINE)  # the summary's partition column


class _Resources(dict):
    """A job's resources as the Slurm executor reads them: `.get(key)` and `.key`."""
    __getattr__ = dict.__getitem__


def _sbatch(threads: int, **resources) -> str:
    """The sbatch command line the Slurm executor plugin builds for a job of `threads` threads and `resources`."""
    params = {"run_uuid": "job", "slurm_logfile": "log", "comment_str": "rule_train", "account": "",
              "partition": "-p cpu", "workdir": ""}
    return get_submit_command(SimpleNamespace(resources=_Resources(resources), threads=threads), params)


def test_a_zero_runtime_memory_or_cpu_count_is_refused_for_what_the_slurm_executor_makes_of_it():
    """At 0 the executor sends no --time and no --mem (the partition's defaults apply) and asks for the job's threads
    as its CPUs (and the cost plan prices a runtime of 0 at 0 hours): the dry run refuses each, naming rule, key and
    value."""
    asked = {"runtime": 60, "mem_mb": 8000, "cpus_per_task": 4}
    assert _sbatch(2, **asked).endswith("-t 60 --mem 8000 --ntasks=1 --cpus-per-task=4")
    assert resource_type_errors({"train": asked}) == []
    for key, dropped in (("runtime", " -t 60"), ("mem_mb", " --mem 8000"), ("cpus_per_task", "--cpus-per-task=4")):
        command = _sbatch(2, **{**asked, key: 0})
        assert dropped not in command and ("--cpus-per-task=2" in command) == (key == "cpus_per_task")
        [error] = resource_type_errors({"train": {**asked, key: 0}})
        assert error.startswith(f"resources of rule train: {key}=0, but runtime, mem_mb and cpus_per_task must "
                                f"each be at least 1: the Slurm executor ")
        assert f"give {key} ≥ 1 (--set-resources train:{key}=<integer>" in error
        assert resource_type_errors({"train": {**asked, key: "0"}}) == [error.replace(f"{key}=0", f"{key}='0'")]
    assert resource_type_errors({"corpus": {"gpu": 0, "threads": 1}}) == []  # a CPU job asks for no GPU
