"""The study, resolved once: a typed, defaults-filled view of a validated config, and each job's settings slice.

Every default lives here (or in the dataclass a section resolves to), not in the rules. A job's *slice* is the flat
mapping {config key: resolved value} of everything its result depends on, upstream jobs included: the rules pass it
as a `params:` value, so Snakemake replans exactly the jobs whose slice changed, and the job writes its fingerprint
(`provenance.fingerprint(slice)`) beside its outputs. Keys are config paths (`training.learning_rate`,
`methods.difffilter.params.low`, `models.tiny-qwen2.shape.hidden_size`), so a stale artefact names the keys that
changed. Settings that cannot change a result stay out of every slice: `training.checkpoint_every` (a resumed run is
bit-identical), `evaluation.seed` under greedy decoding, a method's control (read by the tables only), the
calibration gates (a gate passes or stops the DAG; it changes no artefact), threads.

Importing this module does not import torch: `snakemake -n` stays fast.
"""
from __future__ import annotations

import functools
from dataclasses import asdict, dataclass, field
from typing import Any, Mapping

from dataflex_rl import layout
from dataflex_rl.backends.base import get_backend
from dataflex_rl.methods import MethodSpec
from dataflex_rl.layout import UNTRAINED, parse_run, run_id, run_name
from dataflex_rl.policies.catalogue import CATALOGUE
from dataflex_rl.recipe import GRPOSettings
from dataflex_rl.sections import filled
from dataflex_rl.tasks.prompting import DEFAULT_TEMPLATE

# Training settings that cannot change a run's result (a checkpointed, resumed run is bit-identical).
RESULT_NEUTRAL_TRAINING = ("checkpoint_every",)


@dataclass(frozen=True)
class EvaluationSettings:
    max_new_tokens: int = 8
    batch_size: int = 128
    temperature: float = 0.0
    seed: int = 0
    min_parse_rate: float = 0.5
    job_per_benchmark: bool = False

    def scoring(self) -> dict[str, Any]:
        """What a score depends on: the sampling seed only when answers are sampled (temperature > 0)."""
        picked = {"max_new_tokens": self.max_new_tokens, "batch_size": self.batch_size,
                  "temperature": self.temperature}
        if self.temperature:
            picked["seed"] = self.seed
        return picked


@dataclass(frozen=True)
class BenchmarkSettings:
    names: tuple[str, ...]
    items: int = 100
    seed: int = 1000
    files: Mapping[str, str | list[str]] = field(default_factory=dict)  # a benchmark may be several files
    hub_fallback: bool = False


@dataclass(frozen=True)
class CorpusSettings:
    sources: tuple[str, ...]
    items_per_domain: int
    seed: int
    files: tuple[Mapping[str, Any], ...] = ()


@dataclass(frozen=True)
class DecontaminationSettings:
    threshold: float = 0.8
    num_perm: int = 128


@dataclass(frozen=True)
class CalibrationSettings:
    min_base_parse_rate: float = 0.0


@dataclass(frozen=True)
class StatsSettings:
    confidence: float = 0.95
    bootstrap_resamples: int = 9999
    seed_subsets: int = 200
    mde_seed_counts: tuple[int, ...] = (3, 6, 12)
    curve_window: int = 10
    pairing: str = "paired"


@dataclass(frozen=True)
class ModelSpec:
    """A base model: its backend and its config entry with the backend's defaults filled in (`settings`)."""

    name: str
    backend: str
    settings: Mapping[str, Any]

    @property
    def path(self) -> str | None:
        """Where the verl backend loads the model from (the embedded backend builds its own)."""
        return self.settings.get("path")

    @property
    def builds_base_model(self) -> bool:
        return get_backend(self.backend).builds_base_model


@dataclass(frozen=True)
class Run:
    model: str
    method: str
    seed: int

    @property
    def id(self) -> str:
        return run_id(self.model, self.method, self.seed)

    @property
    def name(self) -> str:
        """The `{run}` wildcard value (dataflex_rl.layout)."""
        return run_name(self.method, self.seed)


def _method(name: str, entry: Mapping[str, Any]) -> MethodSpec:
    return MethodSpec(name=name, policy=entry["policy"], params=_canonical(entry.get("params") or {}),
                      family=CATALOGUE[entry["policy"]].family, control=entry.get("control"))


def _model(name: str, entry: Mapping[str, Any]) -> ModelSpec:
    return ModelSpec(name, entry["backend"], get_backend(entry["backend"]).model_settings(entry))


def _canonical(value: Any) -> Any:
    """`value` with every mapping's keys in sorted order: Snakemake records a params value by its repr, so a config
    that only lists the same keys in another order must give the same params."""
    if isinstance(value, Mapping):
        return {key: _canonical(value[key]) for key in sorted(value, key=str)}
    if isinstance(value, (list, tuple)):
        return [_canonical(item) for item in value]
    return value


def _flat(prefix: str, value: Any) -> dict[str, Any]:
    """{prefix.key...: leaf} for nested mappings; lists and other values are leaves (tuples become lists)."""
    if isinstance(value, Mapping):
        flat: dict[str, Any] = {}
        for key in sorted(value, key=str):
            flat.update(_flat(f"{prefix}.{key}", value[key]))
        return flat
    return {prefix: _canonical(value)}


def _memoised(method):
    """Compute a slice once per study and arguments: the dry run of a large matrix asks for the same upstream slices
    thousands of times. Callers get the shared dict and must not change it."""
    @functools.wraps(method)
    def cached(self, *args):
        cache = self.__dict__.setdefault("_slices", {})
        key = (method.__name__, args)
        if key not in cache:
            cache[key] = method(self, *args)
        return cache[key]
    return cached


def _sorted(slice_: Mapping[str, Any]) -> dict[str, Any]:
    """Keys in one order, so that Snakemake's record of a params value (its repr) changes only with its content."""
    return {key: slice_[key] for key in sorted(slice_)}


@dataclass(frozen=True)
class Study:
    name: str
    template: str
    threads: int
    models: Mapping[str, ModelSpec]
    methods: Mapping[str, MethodSpec]
    seeds: tuple[int, ...]
    training: GRPOSettings
    evaluation: EvaluationSettings
    benchmarks: BenchmarkSettings
    corpus: CorpusSettings
    decontamination: DecontaminationSettings
    calibration: CalibrationSettings
    stats: StatsSettings
    data_validation: Mapping[str, Any]
    records_file: str | None = None

    @classmethod
    def from_config(cls, config: Mapping[str, Any]) -> "Study":
        """The study of a config that passed `config_checks.config_errors` and the schema."""
        bench = config["benchmarks"]
        corpus = config["corpus"]
        return cls(
            name=config["study"],
            template=config.get("prompt_template", DEFAULT_TEMPLATE),
            threads=int(config.get("threads_per_job", 1)),
            models={name: _model(name, entry) for name, entry in config["models"].items()},
            methods={name: _method(name, entry) for name, entry in config["methods"].items()},
            seeds=tuple(int(s) for s in config["seeds"]),
            training=filled(GRPOSettings, config["training"]),
            evaluation=filled(EvaluationSettings, config.get("evaluation")),
            benchmarks=filled(BenchmarkSettings, {**bench, "names": tuple(bench["names"]),
                                                  "files": _canonical(bench.get("files") or {})}),
            corpus=filled(CorpusSettings, {**corpus, "sources": tuple(corpus["sources"]),
                                           "files": tuple(_canonical(corpus.get("files") or ()))}),
            decontamination=filled(DecontaminationSettings, config.get("decontamination")),
            calibration=filled(CalibrationSettings, config.get("calibration")),
            stats=filled(StatsSettings, {k: tuple(v) if isinstance(v, list) else v
                                          for k, v in (config.get("stats") or {}).items()}),
            data_validation={"corpus": _canonical((config.get("data_validation") or {}).get("corpus") or {}),
                             "benchmarks": _canonical((config.get("data_validation") or {}).get("benchmarks") or {})},
            records_file=config.get("records_file"),
        )

    # --- the matrix ---------------------------------------------------------------------------------------------
    @property
    def runs(self) -> list[Run]:
        """Every (model, method, seed): all methods share the seed list, so seeds are matched by construction."""
        return [Run(model, method, seed) for model in self.models for method in self.methods for seed in self.seeds]

    def scored_runs(self) -> list[tuple[str, str]]:
        """(model, run wildcard) of every scored run: each model's untrained base, then the trained runs."""
        return [(model, UNTRAINED) for model in self.models] + [(run.model, run.name) for run in self.runs]

    def controls(self) -> dict[str, str]:
        return {name: m.control for name, m in self.methods.items() if m.control}

    # --- slices: {config key: value} of everything a job's result depends on ------------------------------------
    @_memoised
    def corpus_slice(self) -> dict[str, Any]:
        return _sorted({**_flat("corpus", asdict(self.corpus)),
                        **_flat("data_validation.corpus", self.data_validation["corpus"])})

    @_memoised
    def benchmark_slice(self, benchmark: str) -> dict[str, Any]:
        b = self.benchmarks
        return _sorted({"benchmark": benchmark, "benchmarks.items": b.items, "benchmarks.seed": b.seed,
                        f"benchmarks.files.{benchmark}": b.files.get(benchmark),
                        "benchmarks.hub_fallback": b.hub_fallback,
                        **_flat("data_validation.benchmarks", self.data_validation["benchmarks"])})

    @_memoised
    def clean_corpus_slice(self) -> dict[str, Any]:
        """The decontaminated corpus: the corpus, every benchmark it is checked against, and the detector."""
        picked = {**self.corpus_slice(), **_flat("decontamination", asdict(self.decontamination)),
                  "benchmarks.names": list(self.benchmarks.names)}
        for benchmark in self.benchmarks.names:
            picked.update({k: v for k, v in self.benchmark_slice(benchmark).items() if k != "benchmark"})
        return _sorted(picked)

    @_memoised
    def base_slice(self, model: str) -> dict[str, Any]:
        """The base model: built from the clean corpus by the embedded backend, loaded from `path` by verl."""
        spec = self.models[model]
        picked = _flat(f"models.{model}", spec.settings)
        if spec.builds_base_model:
            picked.update(self.clean_corpus_slice(), prompt_template=self.template)
        return _sorted(picked)

    def _training(self) -> dict[str, Any]:
        """The training settings that can change a run's result."""
        return {k: v for k, v in asdict(self.training).items() if k not in RESULT_NEUTRAL_TRAINING}

    @_memoised
    def train_slice(self, model: str, method: str, seed: int) -> dict[str, Any]:
        spec = self.methods[method]
        return _sorted({**self.base_slice(model), **self.clean_corpus_slice(), "prompt_template": self.template,
                        f"methods.{method}.policy": spec.policy,
                        **_flat(f"methods.{method}.params", spec.resolved_params()),
                        "seed": seed, **_flat("training", self._training())})

    # --- a job's arguments: plain JSON-able values, every one of them result-determining ----------------------------
    def base_job(self, model: str) -> dict[str, Any]:
        return {"model": self.models[model].settings, "template": self.template}

    def train_job(self, model: str, method: str, seed: int) -> dict[str, Any]:
        spec = self.methods[method]
        return {"model": self.models[model].settings, "template": self.template, "seed": seed,
                "training": self._training(),
                "method": {"name": spec.name, "policy": spec.policy, "params": spec.params, "family": spec.family}}

    def score_job(self, model: str) -> dict[str, Any]:
        return {"model": self.models[model].settings, "template": self.template,
                "evaluation": self.evaluation.scoring()}

    def weights_slice(self, model: str, run: str) -> dict[str, Any]:
        """What the scored weights of run `run` (a `{run}` wildcard value) depend on."""
        method, seed = parse_run(run)
        return self.base_slice(model) if seed is None else self.train_slice(model, method, seed)

    def score_slice(self, model: str, run: str, benchmark: str) -> dict[str, Any]:
        return _sorted({**self.weights_slice(model, run), **self.benchmark_slice(benchmark),
                        "prompt_template": self.template, **_flat("evaluation", self.evaluation.scoring())})

    # --- what the audit expects on disk ----------------------------------------------------------------------------
    def _artefacts(self, model: str, run: str) -> list[dict[str, Any]]:
        method, seed = parse_run(run)
        artefacts = []
        if seed is None and self.models[model].builds_base_model:
            directory = layout.base_model(model)
            artefacts.append({"kind": "base model", "files": [directory],
                              "provenance": f"{directory}/{layout.PROVENANCE}", "settings": self.base_slice(model)})
        elif seed is not None:
            artefacts.append({"kind": "training", "files": [layout.run_model(model, run), layout.metrics(model, run)],
                              "provenance": layout.train_provenance(model, run),
                              "settings": self.train_slice(model, method, seed)})
        artefacts += [{"kind": f"score:{b}", "benchmark": b, "files": [layout.score(model, run, b)],
                       "provenance": layout.score_provenance(model, run, b),
                       "settings": self.score_slice(model, run, b)} for b in self.benchmarks.names]
        return artefacts

    def expected_artefacts(self) -> dict[str, Any]:
        """Every cell of the matrix (each model's untrained base, each run) with its artefacts' paths and the settings
        slices they should have been built with: the audit's input, plain JSON."""
        cells = []
        for model, run in self.scored_runs():
            method, seed = parse_run(run)
            cells.append({"model": model, "method": method, "seed": seed, "run_id": run_id(model, method, seed),
                          "artefacts": self._artefacts(model, run)})
        return {"study": self.name, "models": list(self.models), "benchmarks": list(self.benchmarks.names),
                "controls": self.controls(), "records": layout.RECORDS, "cells": cells}
