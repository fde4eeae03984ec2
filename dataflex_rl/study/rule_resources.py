"""What a rule's jobs ask of their machine: the backends' requests merged over a study's models, and the values
Snakemake merged from the rule, the profile and the command line, as the dry run's checks and summary read them."""
from __future__ import annotations

from typing import Any, Mapping

from dataflex_rl.study.resolved import Study

# The resources the dry run checks and prices.
RESOURCE_NAMES = ("threads", "cpus_per_task", "mem_mb", "gpu", "runtime", "slurm_partition", "nodes")


def backend_resources(study: Study, rule: str) -> dict[str, Any]:
    """What a job of `rule` asks of its machine on the study's backends (Backend.job_resources, then the model's own
    `models.<m>.resources`), the largest value of each resource over the study's models (a partition: the one they
    share); none for the embedded backend unless a model says so, so its rules keep Snakemake's and the profile's
    defaults. A profile's set-resources or --set-resources overrides them."""
    merged: dict[str, Any] = {}
    asked_by: dict[str, str] = {}
    for name, model in study.models.items():
        for key, value in model.job_resources(rule).items():
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
