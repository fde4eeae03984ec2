import re
import sys
from pathlib import Path

import yaml
from snakemake.utils import validate

from dataflex_rl import layout
from dataflex_rl.backends.base import get_backend
from dataflex_rl.benchmarks.paths import benchmark_paths
from dataflex_rl.benchmarks.registry import registry_order
from dataflex_rl.config_checks import config_errors, resource_errors
from dataflex_rl.config_yaml import config_yaml_errors
from dataflex_rl.evaluate.benchmark_fit import benchmark_token_caps
from dataflex_rl.gates import pending as pending_gates
from dataflex_rl.input_digests import input_digests
from dataflex_rl.policies.catalogue import CATALOGUE
from dataflex_rl.plan import hub_benchmarks, matrix_summary, model_notes, planned_jobs
from dataflex_rl.package_versions import PROVENANCE_PACKAGES
from dataflex_rl.provenance import fingerprint
from dataflex_rl.readable import parquet_problem, record_problem, settings_problem
from dataflex_rl.report.outputs import figure_paths, table_paths
from dataflex_rl.slurm_nodes import cluster_nodes, node_fit_errors
from dataflex_rl.study import Study, row_checks
from dataflex_rl.tasks.token_caps import answer_token_cap
from dataflex_rl.tasks.training_fit import TRAINING_ANSWERS, prompt_token_cap

# Refuse a bad config before any job is planned: first a key given twice in a config file (Snakemake's loader kept the
# last one silently) or a value YAML reads as another type than it looks (`no`, `0x10`), then the schema with messages that name the key and the fix, then the checks a schema cannot
# express (dataflex_rl/config_checks.py; every refusal is listed in docs/refusals.md). Paths in the config are
# relative to the working directory (--directory).
_SCHEMA = yaml.safe_load((Path(workflow.basedir) / "config/schema.yaml").read_text())
_errors = [error for path in workflow.configfiles for error in config_yaml_errors(path)]
_errors = _errors or config_errors(config, _SCHEMA, Path.cwd())
if _errors:
    raise ValueError(f"invalid configuration ({len(_errors)} problem(s)):\n  - " + "\n  - ".join(_errors))
validate(config, schema="../config/schema.yaml")

# The study, resolved once (dataflex_rl/study.py): every default, every job's settings slice. No rule or script reads
# `config` for a setting: each job gets its slice as a `params:` value, so Snakemake reruns exactly what it changes.
STUDY = Study.from_config(config, input_digests(config, Path.cwd()))
RUNS = STUDY.runs
MODELS = list(STUDY.models)
BENCHMARKS = registry_order(STUDY.benchmarks.names)  # a reordered benchmarks.names changes no job
HUB_BENCHMARKS = hub_benchmarks(STUDY, lambda path: Path(path).is_file())
TRAINED_RUN = layout.trained_run_pattern(STUDY.methods, STUDY.regimes)


wildcard_constraints:
    model="|".join(map(re.escape, MODELS)),
    benchmark="|".join(map(re.escape, BENCHMARKS)),
    run="|".join([layout.UNTRAINED, TRAINED_RUN]),
    regime="|".join(map(re.escape, STUDY.regimes)) or "(?!)",
    data="|".join(map(re.escape, [layout.CORPUS_DATA, *BENCHMARKS])),


def backend_env(wildcards):
    """A model's jobs run in its backend's environment (envs/cpu.yaml for embedded, envs/gpu.yaml for verl)."""
    return get_backend(STUDY.models[wildcards.model].backend).conda_env


def model_env():
    """The `conda:` of a model's jobs: the path itself when every model of the study has the same backend, else
    `backend_env`. Snakemake resolves a path once per rule and a function once per job."""
    envs = {get_backend(spec.backend).conda_env for spec in STUDY.models.values()}
    return envs.pop() if len(envs) == 1 else backend_env


MODEL_ENV = model_env()


def per_model(value):
    """A params value that depends only on the model (`value(model)`): the value itself when the study has one model,
    else a function of the job's model. Snakemake calls a function once per job, after inspecting its signature."""
    if len(MODELS) == 1:
        return value(MODELS[0])
    return lambda wildcards: value(wildcards.model)


def score_files():
    """Every (run, benchmark) score, the untrained base included; listed in `all` so that a lost one is rebuilt."""
    return [layout.score(m, r, b) for m, r in STUDY.scored_runs() for b in BENCHMARKS]


def run_outputs():
    return [
        path(run.model, run.name)
        for run in RUNS
        for path in (layout.run_model, layout.metrics, layout.train_provenance)
    ] + [layout.merged_model(run.model, run.name) for run in RUNS if STUDY.models[run.model].merges_checkpoint]


def benchmark_digests(wildcards):
    """The sha256 of each file of a benchmark read from files (dataflex_rl.input_digests), None for a generated one."""
    entry = STUDY.benchmarks.files.get(wildcards.benchmark)
    return [STUDY.input_digests.get(path) for path in benchmark_paths(entry)] if entry else None


def backend_resources(rule):
    """What a job of `rule` asks of its machine on the study's backends (Backend.job_resources, then the model's own
    `models.<m>.resources`), the largest value of each resource over the study's models (a partition: the one they
    share); none for the embedded backend unless a model says so, so its rules keep Snakemake's and the profile's
    defaults. A profile's set-resources or --set-resources overrides them."""
    merged, asked_by = {}, {}
    for name, model in STUDY.models.items():
        for key, value in model.job_resources(rule).items():
            if isinstance(value, str) and merged.get(key, value) != value:
                raise ValueError(
                    f"models.{asked_by[key]} and models.{name} put their {rule} jobs on other "
                    f"{key}s ({merged[key]!r}, {value!r}), and one rule has one; give both models' "
                    f"resources.{rule}.{key} the same value, or set it with --set-resources {rule}:{key}="
                )
            merged[key] = value if isinstance(value, str) else max(merged.get(key, value), value)
            asked_by.setdefault(key, name)
    return merged


def get_final_outputs():
    """Every gate and every run's artefacts are listed, not only the tables: Snakemake does not rebuild a deleted
    intermediate while the files downstream of it exist, so a lost checkpoint or score would otherwise go unnoticed.
    A config naming a `records_file` is a study regenerated from records alone: its products are the tables
    (rules/tables.smk), without the training-curves figure, which needs the runs' metrics."""
    if STUDY.records_file:
        return tables_outputs()
    return (
        gate_outputs()
        + run_outputs()
        + score_files()
        + [layout.RECORDS]
        + tables_outputs()
        + training_curves_outputs()
        + selection_outputs()
    )


def train_inputs(wildcards):
    """A train job's inputs, by name (`unpack`: one function per job instead of one per input)."""
    return {
        "corpus": training_corpus(wildcards),
        "gates": training_gates(wildcards),
        "base": base_model_input(wildcards),
        "previous": previous_budget(wildcards),
    }


def training_corpus(wildcards):
    """The corpus a run trains on: its regime's, or the clean corpus."""
    regime = layout.parse_run(wildcards.run).regime
    return layout.regime_corpus(regime, wildcards.model) if regime else layout.CORPUS_CLEAN


def previous_budget(wildcards):
    """The provenance record of the same line's next shorter step budget, if the study trains one: this run continues
    its checkpoint, so it waits for it (and the shorter run's outputs stay its own artefact)."""
    shorter = STUDY.previous_budget(STUDY.run(wildcards.model, wildcards.run))
    return [layout.train_provenance(shorter.model, shorter.name)] if shorter else []


def prompt_cap(wildcards, output):
    """The longest prompt, in tokens, the model's base build and train jobs accept (dataflex_rl/tasks/training_fit.py).
    A gate, not a setting of the result (a corpus within it trains exactly as before): a function of `output` is a
    derived param, which Snakemake leaves out of its params rerun trigger."""
    spec = STUDY.models[wildcards.model]
    configured = STUDY.data_validation["corpus"].get("max_prompt_tokens")
    return prompt_token_cap(f"models.{spec.name}", spec.settings, STUDY.training.max_new_tokens, configured)


def answer_cap(wildcards, output):
    """The longest gold answer, in tokens, the model's base build accepts (a gate, a derived param: as `prompt_cap`)."""
    spec = STUDY.models[wildcards.model]
    configured = STUDY.data_validation["corpus"].get("max_answer_tokens")
    return answer_token_cap(TRAINING_ANSWERS, f"models.{spec.name}", spec.settings, configured)


def score_token_caps(wildcards, output):
    """The prompt and answer caps, in tokens, a score job holds its benchmarks to at its start
    (dataflex_rl/evaluate/benchmark_fit.py; a gate, a derived param: as `prompt_cap`)."""
    spec = STUDY.models[wildcards.model]
    return benchmark_token_caps(
        f"models.{spec.name}", spec.settings, STUDY.evaluation.max_new_tokens, STUDY.data_validation["benchmarks"]
    )


def base_model_input(wildcards):
    """The embedded backend builds its base model; the verl backend reads models.<m>.path directly."""
    return layout.base_model(wildcards.model) if STUDY.models[wildcards.model].builds_base_model else []


# Gates are inputs of the jobs they guard only while those must wait for them (`pending_gates`: dataflex_rl/gates.py),
# each given as {report: the fingerprint of the data its gate counts, or None}.
def calibration_gates(benchmarks):
    return dict.fromkeys(layout.calibration(b) for b in benchmarks)


def quarantine_gates(data):
    """The quarantine gates of `data` (layout.CORPUS_DATA or benchmark names), each with the fingerprint of its data
    job's slice."""
    return {layout.quarantine_gate(name): data_fingerprint(name) for name in data}


def data_fingerprint(data):
    return fingerprint(STUDY.corpus_slice() if data == layout.CORPUS_DATA else STUDY.benchmark_slice(data))


def data_section(wildcards):
    """The `data_validation` section of a quarantine gate's data."""
    return "corpus" if wildcards.data == layout.CORPUS_DATA else "benchmarks"


def base_model_gates(wildcards):
    return pending_gates(calibration_gates(BENCHMARKS), [layout.base_model(wildcards.model)])


def training_gates(wildcards):
    """The gates a run's training still waits for: every benchmark's calibration, and its model's parse gate unless
    `calibration.min_base_parse_rate` is 0 (no parse rate is below it, so that gate cannot stop anything and training
    starts beside the untrained base's scoring instead of after it; the gate still runs and reports)."""
    gates = calibration_gates(BENCHMARKS)
    if STUDY.calibration.min_base_parse_rate > 0:
        gates[layout.parse_gate(wildcards.model)] = None
    model, run = wildcards.model, wildcards.run
    return pending_gates(
        gates, [layout.run_model(model, run), layout.metrics(model, run), layout.train_provenance(model, run)]
    )


def gate_outputs():
    return (
        [layout.quarantine_gate(name) for name in [layout.CORPUS_DATA, *BENCHMARKS]]
        + [layout.calibration(b) for b in BENCHMARKS]
        + [layout.parse_gate(m) for m in MODELS]
    )


def benchmark_file(wildcards):
    """The real benchmark's local file(s), as inputs once they exist (procedural stand-ins have none)."""
    path = STUDY.benchmarks.files.get(wildcards.benchmark)
    return benchmark_paths(path) if path and wildcards.benchmark not in HUB_BENCHMARKS else []


def scored_model(wildcards):
    """The model directory a run is scored with: a trained run's final model (its merged Hugging Face directory where
    the backend merges), or the base the backend built (none for a backend that loads the untrained model from its
    `path`)."""
    if wildcards.run != layout.UNTRAINED and STUDY.models[wildcards.model].merges_checkpoint:
        return layout.merged_model(wildcards.model, wildcards.run)
    if wildcards.run != layout.UNTRAINED or STUDY.models[wildcards.model].builds_base_model:
        return layout.scored_model(wildcards.model, wildcards.run)
    return []


def score_inputs(wildcards):
    """A scoring job's inputs, by name (`unpack`: one function per job instead of one per input)."""
    benchmarks = scored(wildcards)
    outputs = [
        path(wildcards.model, wildcards.run, b) for b in benchmarks for path in (layout.score, layout.score_provenance)
    ]
    rescored_when_stale(wildcards, benchmarks, outputs)
    return {
        "benchmark_items": [layout.benchmark_items(b) for b in benchmarks],
        "gates": pending_gates(calibration_gates(benchmarks), outputs),
        "model": scored_model(wildcards),
        "record": trained_run_record(wildcards),
    }


def trained_run_record(wildcards):
    """A trained run's provenance record, an input of its scoring job (a base keeps its record inside its directory);
    a damaged one retrains the run (`rebuilt_when_damaged`), which resumes from its final checkpoint."""
    if wildcards.run == layout.UNTRAINED:
        return []
    return rebuilt_when_damaged(layout.train_provenance(wildcards.model, wildcards.run), record_problem)


# What each artefact checked while the DAG is built was found to be: None (intact or absent) or its damage.
DAMAGE = {}


def rebuilt_when_damaged(path, problem_of):
    """`path`, after checking it once (`problem_of`, dataflex_rl/readable.py) while Snakemake builds the DAG: a damaged
    artefact the study builds is rebuilt as a missing one would be, its job forced before any job runs, so that no
    job downstream deletes its valid outputs and then fails on it (Snakemake's own --rerun-incomplete forces an
    incomplete output the same way). Said on stderr, once per file."""
    if path not in DAMAGE:
        DAMAGE[path] = problem_of(path) if Path(path).is_file() else None
        if DAMAGE[path]:
            workflow.dag.forcefiles.add(path)
            print(f"damaged: {DAMAGE[path]}\n  its job is planned again to rebuild it", file=sys.stderr)
    return path


def records_input(wildcards):
    """The records table the tables are built from: a `records_file` (refused with the config when damaged: nothing
    here builds it), or the study's own, whose footer is read while the DAG is built and rebuilt when damaged."""
    return STUDY.records_file or rebuilt_when_damaged(layout.RECORDS, parquet_problem)


def scored_model_provenance(wildcards):
    if wildcards.run != layout.UNTRAINED and STUDY.models[wildcards.model].merges_checkpoint:
        return f"{layout.merged_model(wildcards.model, wildcards.run)}/{layout.PROVENANCE}"
    return layout.scored_model_provenance(wildcards.model, wildcards.run) if scored_model(wildcards) else None


# A scoring job covers one (run, benchmark) on a cluster, where a benchmark is long; on the embedded default one job
# scores a run on every benchmark, since loading torch and transformers costs more than scoring 100 items. Either way
# it writes one score file per (run, benchmark), byte for byte the same: the layout is not a setting of the scores
# (`rescored_when_stale`).
SCORED = ["{benchmark}"] if STUDY.evaluation.job_per_benchmark else BENCHMARKS


# The settings problems already said on stderr, each once.
SAID = set()


def rescored_when_stale(wildcards, benchmarks, outputs):
    """Force a scoring job (its `outputs`) when the provenance record of any of its `benchmarks`' scores was written
    with other settings than that score's slice now, or is damaged (readable.settings_problem).

    Why not Snakemake's params, as every other job: Snakemake records a job's params with each of its outputs and
    reruns the job when they differ, so a score file written by a one-job-per-run scoring job carries the slices of all
    the run's benchmarks, and one written under `evaluation.job_per_benchmark` the slice of its own. Any params that
    keep one benchmark's change from rescoring the run's other benchmarks therefore differ between the two layouts,
    and toggling the layout, which changes no score, would rescore the whole study. The slices are derived params
    instead (rule score), out of Snakemake's params trigger, and each score is held to its own slice here, by the
    fingerprint its record carries: the same check in both layouts, so a score is reused whichever layout wrote it
    and rescored when its own slice changes. Costs a small JSON read per finished score while the DAG is built."""
    for benchmark in benchmarks:
        record = layout.score_provenance(wildcards.model, wildcards.run, benchmark)
        if not Path(record).is_file():
            continue
        problem = settings_problem(record, STUDY.score_slice(wildcards.model, wildcards.run, benchmark))
        if problem:
            workflow.dag.forcefiles.update(outputs)
            if problem not in SAID:
                SAID.add(problem)
                print(f"scores {problem}: their scoring jobs are planned again", file=sys.stderr)


def scored(wildcards):
    """The benchmarks of one scoring job."""
    return [wildcards.benchmark] if STUDY.evaluation.job_per_benchmark else BENCHMARKS


def record_sources():
    """(score file, its provenance record, model, method, seed, benchmark, extras) of every score the records table is
    built from, per study cell (`model` is the cell's name; a run in several cells is recorded in each); each row's
    fingerprint and step count are copied from the provenance its scoring job wrote."""
    return [
        {
            "path": layout.score(cell.model, run, bench),
            "provenance": layout.score_provenance(cell.model, run, bench),
            "model": cell.name,
            "method": method,
            "seed": seed,
            "benchmark": bench,
            "extras": cell.extras,
        }
        for cell in STUDY.cells()
        for method, seed, run in STUDY.cell_runs(cell)
        for bench in BENCHMARKS
    ]


RECORD_SOURCES = record_sources()
TABLES_DIR = layout.tables_dir(STUDY.name)


def tables_outputs():
    return table_paths(TABLES_DIR) + figure_paths(TABLES_DIR)


REPORTED_TABLE_FORMATS = {"csv": "CSV", "md": "Markdown"}


def report_table(path):
    """The CSV and Markdown tables go into `snakemake --report` (the HTML report embeds them as downloads, since it
    renders only images, HTML and PDF inline); the LaTeX bodies are for the paper and stay out of it."""
    name, _, ext = Path(path).name.rpartition(".")
    if ext not in REPORTED_TABLE_FORMATS:
        return path
    return report(
        path,
        caption="../report/tables.rst",
        category="Study tables",
        subcategory=REPORTED_TABLE_FORMATS[ext],
        labels={"table": name, "format": REPORTED_TABLE_FORMATS[ext]},
    )


TRAINING_CURVES = layout.training_curves(STUDY.name)


def training_curves_outputs():
    """The training-curves figure reads the runs' per-step metrics, so only a study that trains has one: a
    records-only config (`records_file`) has no metrics."""
    return [] if STUDY.records_file else [TRAINING_CURVES]


def metrics_inputs(runs):
    """The per-step metrics of `runs` and the train provenance records the job verifies them against
    (dataflex_rl/report/run_metrics.py), by name; a damaged record retrains its run (`rebuilt_when_damaged`)."""
    runs = list(dict.fromkeys(runs))
    return lambda wildcards: {
        "metrics": [layout.metrics(run.model, run.name) for run in runs],
        "provenance": [
            rebuilt_when_damaged(layout.train_provenance(run.model, run.name), record_problem) for run in runs
        ],
    }


# The runs whose method's family adds the selection tables (prompt selection: the tables read its round metrics; no
# such run: no such tables).
SELECTION_RUNS = [
    (cell, run)
    for cell in STUDY.cells()
    for run in cell.runs
    if STUDY.methods[run.method].family.tables == layout.SELECTION_TABLES
]


def selection_outputs():
    return layout.selection_tables(STUDY.name) if SELECTION_RUNS and not STUDY.records_file else []


# --- after every rule is defined (called from the Snakefile) ---------------------------------------------------------


RESOURCE_NAMES = (
    "threads",
    "cpus_per_task",
    "mem_mb",
    "gpu",
    "runtime",
    "slurm_partition",
    "nodes",
)


def rule_resources(name):
    """The rule's resource values as Snakemake merged them (rule, profile default-resources / set-resources /
    set-threads, command line); a value computed per job (e.g. Snakemake's input-size default) is left out."""
    merged = workflow.get_rule(name).resources
    values = {key: merged[key].raw for key in merged if not callable(merged[key].raw)}
    values["threads"] = values.pop("_cores", None)
    return {key: values[key] for key in RESOURCE_NAMES if values.get(key) is not None}


def cluster_fit_errors(resources):
    """Jobs meant for Slurm (their resources name a slurm_partition) that no node of the cluster `sinfo` answers for
    can run (slurm_nodes); nothing where the study gives cluster.partitions itself or sinfo does not answer."""
    if (config.get("cluster") or {}).get("partitions") or not any("slurm_partition" in r for r in resources.values()):
        return []
    nodes = cluster_nodes()
    return node_fit_errors(resources, nodes) if nodes else []


def check_resources_and_summarise():
    """Refuse resource requests that cannot run (config_checks.resource_errors), then print the matrix summary."""
    jobs = planned_jobs(STUDY)
    resources = {rule: rule_resources(rule) for rule, count in jobs.items() if count}
    errors = (
        [] if STUDY.records_file else resource_errors(config, resources, Path.cwd()) + cluster_fit_errors(resources)
    )
    if errors:
        raise ValueError(f"invalid resources ({len(errors)} problem(s)):\n  - " + "\n  - ".join(errors))
    summary = matrix_summary(STUDY, config, jobs, resources, HUB_BENCHMARKS, model_notes(STUDY, Path.cwd()))
    print(summary, file=sys.stderr)
