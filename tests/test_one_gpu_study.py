"""The one-GPU study (config/one_gpu.yaml) as a workstation user runs it, through the real dry run: every GPU job asks
for the one GPU that `--resources gpu=1` gives, verl trains on one GPU, and a model's own `resources` sit between the
backend's defaults and the command line's `--set-resources`."""
import re
from pathlib import Path

import yaml

from dataflex_rl.backends.verl.backend import JOB_RESOURCES
from dataflex_rl.study.resolved import Study

import forked_snakemake

REPO = Path(__file__).resolve().parents[1]
ONE_GPU = ("--profile", "profiles/local", "--configfile", "config/one_gpu.yaml", "--resources", "gpu=1")


def dry_run(*args: str) -> str:
    result = forked_snakemake.snakemake(["-n", "--snakefile", str(REPO / "Snakefile"), *args], cwd=REPO, timeout=600)
    output = result.stdout + result.stderr
    assert result.returncode == 0, output[-3000:]
    return output


def job_resources(output: str, rule: str) -> dict[str, str]:
    """The `resources:` of the first job of `rule` in a dry run's job list, as key → value."""
    line = re.search(rf"^rule {rule}:\n(?:    .*\n)*?    resources: (.*)$", output, re.MULTILINE)[1]
    return dict(item.split("=", 1) for item in line.split(", "))


def test_the_one_gpu_study_plans_every_gpu_job_on_one_gpu():
    output = dry_run(*ONE_GPU)
    jobs = {rule: int(count) for rule, count in re.findall(r"^(\w+)\s+(\d+)\s*$", output.split("Job stats:")[1],
                                                               re.MULTILINE)}
    # 4 methods × 2 seeds; the untrained base is scored too, one job per run (job_per_benchmark: false)
    assert (jobs["train"], jobs["merge"], jobs["score"]) == (8, 8, 9)
    train, merge, score = (job_resources(output, rule) for rule in ("train", "merge", "score"))
    assert (train["gpu"], train["cpus_per_task"], train["mem_mb"], train["runtime"]) == ("1", "8", "64000", "240")
    assert (score["gpu"], score["runtime"]) == ("1", "90") and "gpu" not in merge
    assert "trainer.n_gpus_per_node=1" in output  # the train command the summary prints


def test_a_models_resources_override_the_backends_and_the_command_line_overrides_both():
    study = Study.from_config(yaml.safe_load((REPO / "config/one_gpu.yaml").read_text()))
    (model,) = study.models.values()
    # the model's own values replace the backend's; the keys it leaves out keep the backend's
    assert model.job_resources("train") == {**JOB_RESOURCES["train"], "gpu": 1, "cpus_per_task": 8, "mem_mb": 64000,
                                            "runtime": 240}
    assert model.job_resources("solve_rates") == JOB_RESOURCES["solve_rates"]
    output = dry_run(*ONE_GPU, "--set-resources", "train:runtime=300")
    assert job_resources(output, "train")["runtime"] == "300" and job_resources(output, "train")["gpu"] == "1"


def test_a_misspelt_rule_or_a_fractional_gpu_in_a_models_resources_is_refused_naming_the_key():
    from dataflex_rl.study.config_checks import config_errors

    schema = yaml.safe_load((REPO / "config/schema.yaml").read_text())
    config = yaml.safe_load((REPO / "config/one_gpu.yaml").read_text())
    resources = config["models"]["qwen2.5-1.5b-instruct"]["resources"]
    resources["trian"] = resources.pop("train")
    assert config_errors(config, schema, REPO) == [
        "models.qwen2.5-1.5b-instruct.resources: 'trian' is not one of ['train', 'merge', 'score', 'solve_rates']; "
        "did you mean 'train'?"]
    resources["train"] = {**resources.pop("trian"), "gpu": 1.5}
    assert config_errors(config, schema, REPO) == [
        "models.qwen2.5-1.5b-instruct.resources.train.gpu: 1.5 is not an integer; write it without the decimal point"]
