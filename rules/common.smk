import re
import sys
from pathlib import Path

from snakemake.utils import validate

from dataflex_rl.config import expand_runs, semantic_errors
from dataflex_rl.records import UNTRAINED
from dataflex_rl.tasks.registry import get_benchmark


validate(config, schema="../config/schema.yaml")
_errors = semantic_errors(config)
if _errors:
    raise ValueError(
        "invalid configuration:\n  - " + "\n  - ".join(_errors)
    )

RUNS = expand_runs(config)
MODELS = list(config["models"])
METHODS = list(config["methods"])
SEEDS = [int(s) for s in config["seeds"]]
BENCHMARKS = list(config["benchmarks"]["names"])
THREADS = config.get("threads_per_job", 1)
TEMPLATE = config.get("prompt_template", "{question}\nAnswer:")


wildcard_constraints:
    model="|".join(map(re.escape, MODELS)),
    method="|".join(map(re.escape, METHODS)),
    seed=r"\d+",
    benchmark="|".join(map(re.escape, BENCHMARKS)),
    run="|".join([UNTRAINED] + [re.escape(m) + r"/seed\d+" for m in METHODS]),


def backend(model):
    return config["models"][model]["backend"]


def run_dirs():
    return [run.path.split("/", 1)[1] for run in RUNS]


def score_files():
    """Every (run, benchmark) score, the untrained base included; listed in `all` so that a lost one is rebuilt."""
    runs = [(m, UNTRAINED) for m in MODELS] + [
        tuple(r.path.split("/", 1)) for r in RUNS
    ]
    return [
        f"results/scores/{model}/{run}/{bench}.parquet"
        for model, run in runs
        for bench in BENCHMARKS
    ]


def run_outputs():
    return [
        f"results/runs/{run.path}/{name}"
        for run in RUNS
        for name in ("weights.pt", "metrics.parquet")
    ]


def get_final_outputs():
    """Every run's artefacts are listed, not only the tables: Snakemake does not rebuild a deleted intermediate while
    the files downstream of it exist, so a lost checkpoint or score would otherwise go unnoticed. A config naming a
    `records_file` is a study regenerated from records alone: its products are the tables (rules/tables.smk), without
    the training-curves figure, which needs the runs' metrics."""
    if "records_file" in config:
        return tables_outputs()
    return (
        run_outputs()
        + score_files()
        + ["results/records/records.parquet"]
        + tables_outputs()
        + training_curves_outputs()
    )


BENCHMARK_FILES = config["benchmarks"].get("files", {})
MISSING_BENCHMARK_FILES = {
    name: path
    for name, path in BENCHMARK_FILES.items()
    if name in BENCHMARKS and not Path(path).is_file()
}


def benchmark_file(wildcards):
    """The real benchmark's local file, as an input once it exists (procedural stand-ins have none)."""
    path = BENCHMARK_FILES.get(wildcards.benchmark)
    return [path] if path and wildcards.benchmark not in MISSING_BENCHMARK_FILES else []


def base_model_input(wildcards):
    """The embedded backend builds its base model; the verl backend reads config models.<m>.path directly."""
    if backend(wildcards.model) == "embedded":
        return f"results/models/{wildcards.model}"
    return []


def _print_matrix_summary():
    if "records_file" in config:
        print(
            f"DataFlex-RL study {config['study']!r}: tables from the records in {config['records_file']!r}; "
            "no training or scoring (target: tables)",
            file=sys.stderr,
        )
        return
    per_benchmark = config.get("evaluation", {}).get("job_per_benchmark", False)
    per_rule = {
        "train": len(RUNS),
        "score": len(score_files()) if per_benchmark else len(RUNS) + len(MODELS),
        "benchmark_items + calibrate": 2 * len(BENCHMARKS),
    }
    print(
        f"DataFlex-RL study {config['study']!r}: {len(MODELS)} model(s) × {len(METHODS)} method(s) × "
        f"{len(SEEDS)} seed(s) = {len(RUNS)} training runs; {len(BENCHMARKS)} benchmarks; backends "
        f"{sorted({backend(m) for m in MODELS})}; jobs: "
        + ", ".join(f"{k} {v}" for k, v in per_rule.items()),
        file=sys.stderr,
    )
    if MISSING_BENCHMARK_FILES:
        print(
            "WARNING: benchmark files not found (their benchmark_items jobs will fail until they are in place): "
            + ", ".join(f"{n} -> {p}" for n, p in MISSING_BENCHMARK_FILES.items()),
            file=sys.stderr,
        )


_print_matrix_summary()
