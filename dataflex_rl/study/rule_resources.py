"""What a rule's jobs ask of their machine: the backends' requests merged over a study's models, and the values
Snakemake merged from the rule, the profile and the command line, as the dry run's checks and summary read them."""
from __future__ import annotations

from pathlib import Path
from typing import Any, Mapping

from dataflex_rl.study.resolved import Study
from dataflex_rl.study.solve_rate_time import sized_runtime

# The resources the dry run checks and prices.
RESOURCE_NAMES = ("threads", "cpus_per_task", "mem_mb", "gpu", "runtime", "slurm_partition", "nodes", "gpu_model")


def _job_resources(study: Study, name: str, rule: str, workdir: Path) -> dict[str, Any]:
    """Model `name`'s `rule` job: ModelSpec.job_resources, with a solve-rate job's runtime sized by its work where its
    backend states a throughput and the model sets none (dataflex_rl.study.solve_rate_time)."""
    resources = study.models[name].job_resources(rule)
    if rule == "solve_rates" and name in study.solve_rates_models():
        sized = sized_runtime(study, name, workdir)
        if sized is not None:
            resources["runtime"] = sized
    return resources


def backend_resources(study: Study, rule: str, workdir: Path = Path(".")) -> dict[str, Any]:
    """What a job of `rule` asks of its machine on the study's backends (Backend.job_resources, then the model's own
    `models.<m>.resources`; a solve-rate job's runtime sized by its work: _job_resources), the largest value of each
    resource over the study's models (a partition: the one they share); none for the embedded backend unless a model
    says so, so its rules keep Snakemake's and the profile's defaults. A profile's set-resources or --set-resources
    overrides them. Paths (the corpus files a solve-rate job's size is counted from) are relative to `workdir`."""
    merged: dict[str, Any] = {}
    asked_by: dict[str, str] = {}
    for name in study.models:
        for key, value in _job_resources(study, name, rule, workdir).items():
            if isinstance(value, str) and merged.get(key, value) != value:
                raise ValueError(
                    f"models.{asked_by[key]} and models.{name} put their {rule} jobs on other "
                    f"{key}s ({merged[key]!r}, {value!r}), and one rule has one; give both models' "
                    f"resources.{rule}.{key} the same value, or set it with --set-resources {rule}:{key}=")
            merged[key] = value if isinstance(value, str) else max(merged.get(key, value), value)
            asked_by.setdefault(key, name)
    return merged


def merged_values(resources: Mapping[str, Any]) -> dict[str, Any]:
    """A rule's resource values as Snakemake merged them (rule, profile default-resources / set-resources /
    set-threads, command line; `resources`: the rule's `Resources`, each value with its `.raw`), by RESOURCE_NAMES;
    a value computed per job (e.g. Snakemake's input-size default) is left out."""
    values = {key: resources[key].raw for key in resources if not callable(resources[key].raw)}
    values["threads"] = values.pop("_cores", None)
    return {key: values[key] for key in RESOURCE_NAMES if values.get(key) is not None}
