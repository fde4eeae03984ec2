"""The study configuration: run-matrix expansion, run ids, matched seeds, method specs and semantic checks.

The JSON schema (config/schema.yaml) checks shapes and types; `semantic_errors` checks what a schema cannot — names
that must exist in the registries, controls that must be in the matrix — and says which key to fix, so a bad config
fails at dry-run time before any job starts.
"""
from __future__ import annotations

from dataclasses import dataclass
from dataflex_rl.policies import list_policies
from dataflex_rl.records import UNTRAINED, run_id
from dataflex_rl.recipe import GRPOSettings
from dataflex_rl.tasks.registry import REGISTRY, get_benchmark


@dataclass(frozen=True)
class MethodSpec:
    """A named configuration: the registry policy it runs, its parameters, its family and its control method."""

    name: str
    policy: str
    params: dict
    family: str
    control: str | None = None


@dataclass(frozen=True)
class Run:
    model: str
    method: str
    seed: int

    @property
    def id(self) -> str:
        return run_id(self.model, self.method, self.seed)

    @property
    def path(self) -> str:
        """The run's directory under results/runs/ (and its name in scores/)."""
        return f"{self.model}/{self.method}/seed{self.seed}"


_FAMILIES = {name: family for name, family, _ in list_policies()}


def method_spec(config: dict, name: str) -> MethodSpec:
    entry = config["methods"][name]
    return MethodSpec(name=name, policy=entry["policy"], params=dict(entry.get("params") or {}),
                      family=_FAMILIES[entry["policy"]], control=entry.get("control"))


def expand_runs(config: dict) -> list[Run]:
    """Every (model, method, seed): all methods share the same seed list, so seeds are matched by construction."""
    return [Run(model, method, int(seed)) for model in config["models"] for method in config["methods"]
            for seed in config["seeds"]]


def controls(config: dict) -> dict[str, str]:
    return {name: entry["control"] for name, entry in config["methods"].items() if entry.get("control")}


def grpo_settings(config: dict) -> GRPOSettings:
    return GRPOSettings.from_config(config["training"])


def semantic_errors(config: dict) -> list[str]:
    """Every problem a schema cannot see, each naming the key, the bad value and the fix."""
    errors: list[str] = []
    for name, entry in config["methods"].items():
        if name == UNTRAINED:
            errors.append(f"methods.{name}: the name {UNTRAINED!r} is reserved for the base model; rename the method")
        if entry["policy"] not in _FAMILIES:
            errors.append(f"methods.{name}.policy: unknown policy {entry['policy']!r}; "
                          f"known: {', '.join(sorted(_FAMILIES))}")
        control = entry.get("control")
        if control is not None and control not in config["methods"]:
            errors.append(f"methods.{name}.control: {control!r} is not a method of this study; "
                          f"add it under methods or change the control")
        if control == name:
            errors.append(f"methods.{name}.control: a method cannot be its own control")
    for key in ("corpus.sources", "benchmarks.names"):
        section, field = key.split(".")
        for name in config[section][field]:
            if name not in REGISTRY:
                errors.append(f"{key}: unknown benchmark/source {name!r}; known: {', '.join(sorted(REGISTRY))}")
    for name in config["corpus"]["sources"]:
        if name in REGISTRY and not REGISTRY[name].procedural:
            errors.append(f"corpus.sources: {name!r} is a real benchmark, not a procedural training source")
    files = config["benchmarks"].get("files", {})
    for name in config["benchmarks"]["names"]:
        if name in REGISTRY and not get_benchmark(name).procedural and name not in files:
            errors.append(f"benchmarks.files: real benchmark {name!r} needs a local file; add `{name}: <path>`")
    domains = {get_benchmark(n).domain for n in config["benchmarks"]["names"] if n in REGISTRY}
    if len(domains) < 3:
        errors.append(f"benchmarks.names: the domain-balanced summary needs math, logic and science benchmarks; "
                      f"found {sorted(domains)}")
    for model, entry in config["models"].items():
        if entry["backend"] == "verl" and "path" not in entry:
            errors.append(f"models.{model}.path: the verl backend needs the base model's path or hub name")
    return errors
