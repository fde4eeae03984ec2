"""The address book of a study's results: every artefact's path, the run id and the one run wildcard.

Rules, scripts, the audit and the tests read paths from here and nowhere else. A *run* is a model's untrained base
(`{model}/untrained`) or a trained (model, method, seed) (`{model}/{method}/seed{seed}`); the rules address both
with the wildcards `{model}/{run}`, where `run` is `untrained` or `{method}/seed{seed}`. Torch-free.
"""
from __future__ import annotations

import re

UNTRAINED = "untrained"
RESULTS = "results"

CORPUS_RAW = f"{RESULTS}/corpus/raw.parquet"
CORPUS_AUDIT = f"{RESULTS}/corpus/raw_audit.json"
CORPUS_QUARANTINE = f"{RESULTS}/corpus/quarantine.jsonl"
CORPUS_CLEAN = f"{RESULTS}/corpus/clean.parquet"
DECONTAMINATION_AUDIT = f"{RESULTS}/corpus/decontamination.json"
RECORDS = f"{RESULTS}/records/records.parquet"
AUDIT_JSON = f"{RESULTS}/audit/audit.json"
AUDIT_MD = f"{RESULTS}/audit/audit.md"
PROVENANCE = "provenance.json"


def run_name(method: str, seed: int | None) -> str:
    """The `{run}` wildcard value: "untrained" for the base, "{method}/seed{seed}" for a trained run."""
    if (method == UNTRAINED) != (seed is None):
        raise ValueError(f"method {method!r} with seed {seed!r}: a seed is required exactly when the model is trained")
    return UNTRAINED if seed is None else f"{method}/seed{int(seed)}"


def run_id(model: str, method: str, seed: int | None) -> str:
    """Name a run; the untrained base has no seed, so it cannot be mistaken for a seeded arm."""
    return f"{model}/{run_name(method, seed)}"


_TRAINED_RUN = re.compile(r"(?P<method>.+)/seed(?P<seed>\d+)")


def parse_run(run: str) -> tuple[str, int | None]:
    """(method, seed) of a `{run}` wildcard value; (UNTRAINED, None) for the base."""
    if run == UNTRAINED:
        return UNTRAINED, None
    match = _TRAINED_RUN.fullmatch(run)
    if match is None:
        raise ValueError(f"{run!r} is neither {UNTRAINED!r} nor '<method>/seed<seed>'")
    return match["method"], int(match["seed"])


def benchmark_items(benchmark: str) -> str:
    return f"{RESULTS}/benchmarks/{benchmark}.parquet"


def benchmark_audit(benchmark: str) -> str:
    return f"{RESULTS}/benchmarks/{benchmark}.audit.json"


def benchmark_quarantine(benchmark: str) -> str:
    return f"{RESULTS}/benchmarks/{benchmark}.quarantine.jsonl"


def calibration(benchmark: str) -> str:
    return f"{RESULTS}/calibration/{benchmark}.json"


def parse_gate(model: str) -> str:
    return f"{RESULTS}/calibration/parse_gate/{model}.json"


def base_model(model: str) -> str:
    """The base model directory (Hugging Face layout; its provenance.json inside)."""
    return f"{RESULTS}/models/{model}"


def run_dir(model: str, run: str) -> str:
    return f"{RESULTS}/runs/{model}/{run}"


def run_model(model: str, run: str) -> str:
    """A trained run's final model directory (Hugging Face layout: config, safetensors, tokenizer)."""
    return f"{run_dir(model, run)}/model"


def metrics(model: str, run: str) -> str:
    return f"{run_dir(model, run)}/metrics.parquet"


def train_provenance(model: str, run: str) -> str:
    return f"{run_dir(model, run)}/{PROVENANCE}"


def train_state(model: str, run: str) -> str:
    """Resumable training state (not a declared output: Snakemake deletes a failed job's outputs); one directory per
    state key below it (dataflex_rl.provenance.state_key)."""
    return f"{run_dir(model, run)}/state"


def scored_model(model: str, run: str) -> str:
    """The model directory a run is scored with: the base for the untrained run, else the run's final model."""
    return base_model(model) if run == UNTRAINED else run_model(model, run)


def scored_model_provenance(model: str, run: str) -> str:
    """The provenance record of `scored_model`: inside the base directory, beside a trained run's outputs."""
    return f"{base_model(model)}/{PROVENANCE}" if run == UNTRAINED else train_provenance(model, run)


def score(model: str, run: str, benchmark: str) -> str:
    return f"{RESULTS}/scores/{model}/{run}/{benchmark}.parquet"


def score_provenance(model: str, run: str, benchmark: str) -> str:
    return f"{RESULTS}/scores/{model}/{run}/{benchmark}.{PROVENANCE}"


def tables_dir(study: str) -> str:
    return f"{RESULTS}/tables/{study}"


def training_curves(study: str) -> str:
    return f"{tables_dir(study)}/figures/training_curves.png"


def trained_run_pattern(methods) -> str:
    """The regular expression of a trained run's `{run}` wildcard value for these method names."""
    return "|".join(rf"{re.escape(method)}/seed\d+" for method in methods)
