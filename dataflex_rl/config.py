"""The study configuration: run-matrix expansion, run ids, matched seeds and method specs.

A config is checked before any job starts by dataflex_rl.config_checks (the schema, then what a schema cannot see).
Importing this module does not import torch: policies are described by the torch-free catalogue, so every
`snakemake -n` stays fast.
"""
from __future__ import annotations

from dataclasses import dataclass

from dataflex_rl.policies.catalogue import CATALOGUE
from dataflex_rl.records import run_id
from dataflex_rl.recipe import GRPOSettings


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


def method_spec(config: dict, name: str) -> MethodSpec:
    entry = config["methods"][name]
    return MethodSpec(name=name, policy=entry["policy"], params=dict(entry.get("params") or {}),
                      family=CATALOGUE[entry["policy"]].family, control=entry.get("control"))


def expand_runs(config: dict) -> list[Run]:
    """Every (model, method, seed): all methods share the same seed list, so seeds are matched by construction."""
    return [Run(model, method, int(seed)) for model in config["models"] for method in config["methods"]
            for seed in config["seeds"]]


def controls(config: dict) -> dict[str, str]:
    return {name: entry["control"] for name, entry in config["methods"].items() if entry.get("control")}


def grpo_settings(config: dict) -> GRPOSettings:
    return GRPOSettings.from_config(config["training"])
