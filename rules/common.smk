import re
import sys
from pathlib import Path

import yaml
from snakemake.utils import validate

from dataflex_rl.config import expand_runs
from dataflex_rl.policies.catalogue import CATALOGUE
from dataflex_rl.config_checks import config_errors, corpus_domains, resource_errors
from dataflex_rl.records import UNTRAINED, run_id
from dataflex_rl.benchmarks.registry import get_benchmark


# Refuse a bad config before any job is planned: the schema with messages that name the key and the fix, then the
# checks a schema cannot express (dataflex_rl/config_checks.py; every refusal is listed in docs/refusals.md). Paths in
# the config are relative to the working directory (--directory). `validate` then fills the schema's defaults.
_SCHEMA = yaml.safe_load((Path(workflow.basedir) / "config/schema.yaml").read_text())
_errors = config_errors(config, _SCHEMA, Path.cwd())
if _errors:
    raise ValueError(
        f"invalid configuration ({len(_errors)} problem(s)):\n  - "
        + "\n  - ".join(_errors)
    )
validate(config, schema="../config/schema.yaml")

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


def score_files():
    """Every (run, benchmark) score, the untrained base included; listed in `all` so that a lost one is rebuilt."""
    runs = [run_id(m, UNTRAINED, None) for m in MODELS] + [run.id for run in RUNS]
    return [f"results/scores/{run}/{bench}.parquet" for run in runs for bench in BENCHMARKS]


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
# Only with benchmarks.hub_fallback (config_checks refuses a missing file otherwise): loaded from the hub by name.
HUB_BENCHMARKS = [
    name
    for name in BENCHMARKS
    if not get_benchmark(name).procedural
    and not (name in BENCHMARK_FILES and Path(BENCHMARK_FILES[name]).is_file())
]


def benchmark_file(wildcards):
    """The real benchmark's local file, as an input once it exists (procedural stand-ins have none)."""
    path = BENCHMARK_FILES.get(wildcards.benchmark)
    return [path] if path and wildcards.benchmark not in HUB_BENCHMARKS else []


def base_model_input(wildcards):
    """The embedded backend builds its base model; the verl backend reads config models.<m>.path directly."""
    if backend(wildcards.model) == "embedded":
        return f"results/models/{wildcards.model}"
    return []


# --- after every rule is defined (called at the end of the last include, rules/audit.smk) ---------------------------


def planned_jobs():
    """Jobs per rule of a run from scratch (Snakemake's own job stats, printed after the plan, count what is left)."""
    if "records_file" in config:
        return {"tables": 1}
    per_benchmark = config.get("evaluation", {}).get("job_per_benchmark", False)
    scored_runs = len(RUNS) + len(MODELS)
    return {
        "corpus": 1,
        "benchmark_items": len(BENCHMARKS),
        "calibrate": len(BENCHMARKS),
        "decontaminate": 1,
        "base_model": sum(backend(m) == "embedded" for m in MODELS),
        "train": len(RUNS),
        "score": scored_runs * len(BENCHMARKS) if per_benchmark else scored_runs,
        "parse_gate": len(MODELS),
        "records": 1,
        "tables": 1,
        "training_curves": 1,
    }


RESOURCE_NAMES = ("threads", "cpus_per_task", "mem_mb", "gpu", "runtime", "slurm_partition", "nodes")


def rule_resources(name):
    """The rule's resource values as Snakemake merged them (rule, profile default-resources / set-resources /
    set-threads, command line); a value computed per job (e.g. Snakemake's input-size default) is left out."""
    merged = workflow.get_rule(name).resources
    values = {key: merged[key].raw for key in merged if not callable(merged[key].raw)}
    values["threads"] = values.pop("_cores", None)
    return {key: values[key] for key in RESOURCE_NAMES if values.get(key) is not None}


def _methods_table():
    rows = []
    for name, entry in config["methods"].items():
        params = ", ".join(f"{k}={v}" for k, v in (entry.get("params") or {}).items())
        family = CATALOGUE[entry["policy"]].family
        control = f"vs {entry['control']}" if entry.get("control") else "(reference)"
        rows.append(f"    {name:<14} {entry['policy']:<11} {family:<12} {control:<16} {params}".rstrip())
    return rows


def _benchmarks_line():
    by_domain = {}
    for name in BENCHMARKS:
        by_domain.setdefault(get_benchmark(name).domain, []).append(name)
    return "; ".join(
        f"{domain} {len(names)} ({', '.join(names)})" for domain, names in sorted(by_domain.items())
    )


def _print_matrix_summary(jobs, resources):
    """One screen before the job list: the matrix, each method's policy/family/control, the benchmarks by domain,
    the backends, and per rule the planned jobs and the resources each job asks for."""
    lines = [f"DataFlex-RL study {config['study']!r}"]
    if "records_file" in config:
        lines.append(
            f"  tables from the records in {config['records_file']!r}: no training or scoring (target: tables)"
        )
    else:
        training = config["training"]
        lines.append(
            f"  {len(MODELS)} model(s) × {len(METHODS)} method(s) × {len(SEEDS)} seed(s) = {len(RUNS)} training "
            f"runs; seeds {', '.join(map(str, SEEDS))}"
        )
        lines.append(
            f"  GRPO {training['steps']} steps × {training['prompts_per_step']} prompts × K={training['rollouts']}; "
            f"corpus domains {', '.join(corpus_domains(config))}"
        )
    by_backend = {}
    for m in MODELS:
        path = config["models"][m].get("path")
        by_backend.setdefault(backend(m), []).append(f"{m} ({path})" if path and len(MODELS) == 1 else m)
    lines.append(
        f"  models ({len(MODELS)}): "
        + "; ".join(f"{b}: {', '.join(ms)}" for b, ms in sorted(by_backend.items()))
    )
    lines.append("  methods:    policy      family       control          params")
    lines += _methods_table()
    lines.append(f"  benchmarks ({len(BENCHMARKS)}): {_benchmarks_line()}")
    if HUB_BENCHMARKS and "records_file" not in config:
        lines.append(f"  from the hub (benchmarks.hub_fallback): {', '.join(HUB_BENCHMARKS)}")
    header = f"    {'rule':<16}{'jobs':>6}{'threads':>9}{'cpus':>6}{'mem_mb':>9}{'gpu':>5}{'runtime':>9}  partition"
    lines += ["  jobs from scratch and resources per job:", header]
    for rule, count in jobs.items():
        if count:
            r = resources[rule]
            lines.append(
                f"    {rule:<16}{count:>6}{r.get('threads', 1):>9}{r.get('cpus_per_task', '-'):>6}"
                f"{r.get('mem_mb', '-'):>9}{r.get('gpu', '-'):>5}{r.get('runtime', '-'):>9}  "
                f"{r.get('slurm_partition', '-')}"
            )
    print("\n".join(lines), file=sys.stderr)


def check_resources_and_summarise():
    """Refuse resource requests that cannot run (config_checks.resource_errors), then print the matrix summary."""
    jobs = planned_jobs()
    resources = {rule: rule_resources(rule) for rule, count in jobs.items() if count}
    errors = [] if "records_file" in config else resource_errors(config, resources)
    if errors:
        raise ValueError(
            f"invalid resources ({len(errors)} problem(s)):\n  - " + "\n  - ".join(errors)
        )
    _print_matrix_summary(jobs, resources)
