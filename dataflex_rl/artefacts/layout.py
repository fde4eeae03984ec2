"""The address book of a study's results: every artefact's path, the run id and the one run wildcard.

Rules, scripts, the audit and the tests read paths from here and nowhere else. A *run* is a model's untrained base
(`{model}/untrained`) or a trained (model, regime, method, seed, step budget); the rules address both with the
wildcards `{model}/{run}`, where `run` is `untrained` or `{regime}/{method}/seed{seed}/steps{steps}` ({regime} is
`full` for the clean corpus). A record's run id is shorter: a study cell's `{model}/{method}/seed{seed}`. Torch-free.
"""
from __future__ import annotations

import re
from typing import NamedTuple

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


# The regime component of a run's path when it trains on the decontaminated corpus as built (no regime transform).
FULL_DATA = "full"


class RunKey(NamedTuple):
    """What a `{run}` wildcard value names: (UNTRAINED, None, None, None) for the base."""

    method: str
    seed: int | None
    regime: str | None = None
    steps: int | None = None


def _check_seed(method: str, seed: int | None) -> None:
    if (method == UNTRAINED) != (seed is None):
        raise ValueError(f"method {method!r} with seed {seed!r}: a seed is required exactly when the model is trained")


def run_name(method: str, seed: int | None, regime: str | None = None, steps: int | None = None) -> str:
    """The `{run}` wildcard value: "untrained" for the base, "{regime}/{method}/seed{seed}/steps{steps}" for a
    trained run ({regime} is FULL_DATA without a regime transform)."""
    _check_seed(method, seed)
    if seed is None:
        return UNTRAINED
    if steps is None:
        raise ValueError(f"run {method!r} seed {seed}: a trained run has a step budget")
    return f"{regime or FULL_DATA}/{method}/seed{int(seed)}/steps{int(steps)}"


def run_id(model: str, method: str, seed: int | None) -> str:
    """A record's run id: a study cell's (model, method, seed); the untrained base has no seed, so it cannot be
    mistaken for a seeded arm."""
    _check_seed(method, seed)
    return f"{model}/{UNTRAINED}" if seed is None else f"{model}/{method}/seed{int(seed)}"


def study_cell(model: str, campaign: str, regime: str | None, steps: int | None = None) -> str:
    """What the records and tables call a model when a study has campaigns: "{model}@{campaign}[:{regime}]", and
    "+{steps}steps" when the campaign trains several step budgets (the released records' cells have one each)."""
    return f"{model}@{campaign}" + (f":{regime}" if regime else "") + (f"+{steps}steps" if steps else "")


_TRAINED_RUN = re.compile(r"(?P<regime>[^/]+)/(?P<method>[^/]+)/seed(?P<seed>\d+)/steps(?P<steps>\d+)")


def parse_run(run: str) -> RunKey:
    """What a `{run}` wildcard value names."""
    if run == UNTRAINED:
        return RunKey(UNTRAINED, None)
    match = _TRAINED_RUN.fullmatch(run)
    if match is None:
        raise ValueError(f"{run!r} is neither {UNTRAINED!r} nor '<regime>/<method>/seed<seed>/steps<steps>'")
    regime = None if match["regime"] == FULL_DATA else match["regime"]
    return RunKey(match["method"], int(match["seed"]), regime, int(match["steps"]))


def benchmark_items(benchmark: str) -> str:
    return f"{RESULTS}/benchmarks/{benchmark}.parquet"


def benchmark_audit(benchmark: str) -> str:
    return f"{RESULTS}/benchmarks/{benchmark}.audit.json"


def benchmark_quarantine(benchmark: str) -> str:
    return f"{RESULTS}/benchmarks/{benchmark}.quarantine.jsonl"


# The data a quarantine gate holds to its threshold: the corpus, or a benchmark's items (by the benchmark's name).
CORPUS_DATA = "corpus"


def quarantine_gate(data: str) -> str:
    """The quarantine gate's report on `data` (CORPUS_DATA or a benchmark name)."""
    return f"{RESULTS}/gates/quarantine/{data}.json"


def data_audit(data: str) -> str:
    """The audit in which the data job of `data` (CORPUS_DATA or a benchmark name) counted its quarantined rows."""
    return CORPUS_AUDIT if data == CORPUS_DATA else benchmark_audit(data)


def calibration(benchmark: str) -> str:
    return f"{RESULTS}/calibration/{benchmark}.json"


def parse_gate(model: str) -> str:
    return f"{RESULTS}/calibration/parse_gate/{model}.json"


def base_model(model: str) -> str:
    """The base model directory (Hugging Face layout; its provenance.json inside)."""
    return f"{RESULTS}/models/{model}"


def run_dir(model: str, run: str) -> str:
    return f"{RESULTS}/runs/{model}/{run}"


def training_line(model: str, run: str) -> str:
    """The folder of a run's training line: its (model, regime, method, seed) without the step budget. Every budget
    of a line shares its resumable state, so a longer run continues the shorter one's checkpoint."""
    return run_dir(model, run).rsplit("/", 1)[0]


def run_model(model: str, run: str) -> str:
    """A trained run's final model directory (Hugging Face layout: config, safetensors, tokenizer)."""
    return f"{run_dir(model, run)}/model"


def merged_model(model: str, run: str) -> str:
    """A verl run's final checkpoint merged into a Hugging Face model directory (its provenance.json inside): what
    vLLM scores."""
    return f"{run_dir(model, run)}/merged"


def metrics(model: str, run: str) -> str:
    return f"{run_dir(model, run)}/metrics.parquet"


def train_provenance(model: str, run: str) -> str:
    return f"{run_dir(model, run)}/{PROVENANCE}"


def train_state(model: str, run: str) -> str:
    """Resumable training state of the run's line (not a declared output: Snakemake deletes a failed job's outputs);
    one directory per state key below it (dataflex_rl.artefacts.provenance.state_key)."""
    return f"{training_line(model, run)}/state"


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


def tables_provenance(study: str) -> str:
    return f"{tables_dir(study)}/{PROVENANCE}"


def training_curves(study: str) -> str:
    return f"{tables_dir(study)}/figures/training_curves.png"


SELECTION_TABLES = ("selection_rounds", "selection_composition", "selection_overhead")


def selection_tables(study: str) -> list[str]:
    """The prompt-selection tables (dataflex_rl.report.selection), CSV and Markdown."""
    return [f"{tables_dir(study)}/{name}.{ext}" for name in SELECTION_TABLES for ext in ("csv", "md")]


def scenario_tables(study: str, campaigns: list[str]) -> list[str]:
    """The scenario tables of the prompt-selection campaigns (dataflex_rl.report.scenarios), CSV and Markdown."""
    return [f"{tables_dir(study)}/scenario_{name}.{ext}" for name in campaigns for ext in ("csv", "md")]


def _regime_file(regime: str, model: str, suffix: str) -> str:
    """A regime's outputs are per (regime, model): a transform may depend on the model (low_utility)."""
    return f"{RESULTS}/corpus/regimes/{regime}/{model}{suffix}"


def regime_corpus(regime: str, model: str) -> str:
    """The training corpus of a regime."""
    return _regime_file(regime, model, ".parquet")


def regime_record(regime: str, model: str) -> str:
    """Per prompt, what the regime's transform did."""
    return _regime_file(regime, model, ".record.parquet")


def regime_audit(regime: str, model: str) -> str:
    return _regime_file(regime, model, ".audit.json")


def solve_rates(model: str) -> str:
    """The untrained base's measured solve rate per prompt of the clean corpus (the low_utility regime's input)."""
    return f"{RESULTS}/corpus/solve_rates/{model}.parquet"


def solve_rate_chunk(model: str, chunk) -> str:
    """The solve rates one job measured: chunk `chunk` of the clean corpus (dataflex_rl.study.solve_rate_time)."""
    return f"{RESULTS}/corpus/solve_rates/{model}/chunk{chunk}.parquet"


def trained_run_pattern(methods, regimes) -> str:
    """The regular expression of a trained run's `{run}` wildcard value for these method and regime names."""
    regime = "|".join(re.escape(r) for r in [FULL_DATA, *regimes])
    method = "|".join(re.escape(m) for m in methods)
    return rf"(?:{regime})/(?:{method})/seed\d+/steps\d+"
