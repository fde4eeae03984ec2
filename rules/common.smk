import re
import sys
from pathlib import Path

import yaml
from snakemake.utils import validate

from dataflex_rl.artefacts import layout
from dataflex_rl.item_sources.registry import registry_order
from dataflex_rl.study.config_checks import planned_resource_errors, shape_errors, study_errors
from dataflex_rl.config.yaml_nodes import config_yaml_errors
from dataflex_rl.study.input_digests import input_digests
from dataflex_rl.policies.catalogue import CATALOGUE
from dataflex_rl.study.plan import hub_benchmarks, matrix_summary, model_notes, planned_jobs
from dataflex_rl.study.power_plan import power_lines
from dataflex_rl.records.package_versions import PROVENANCE_PACKAGES
from dataflex_rl.artefacts.readable import parquet_problem, record_problem, records_problem
from dataflex_rl.study.replans import Replans
from dataflex_rl.report.outputs import figure_paths, table_paths
from dataflex_rl.report.scenario_specs import scenario_specs
from dataflex_rl.study.rule_resources import backend_resources, merged_values
from dataflex_rl.study.solve_rate_time import chunk_of
from dataflex_rl.study.resolved import Study
from dataflex_rl.study.files import StudyFiles

# Refuse a bad config before any job is planned: first a key given twice in a config file (Snakemake's loader kept the
# last one silently) or a value YAML reads as another type than it looks (`no`, `0x10`), then the schema with messages that name the key and the fix, then the checks a schema cannot
# express (dataflex_rl/study/config_checks.py; every refusal is listed in docs/refusals.md). Paths in the config are
# relative to the working directory (--directory).
_SCHEMA = yaml.safe_load((Path(workflow.basedir) / "config/schema.yaml").read_text())
_errors = [error for path in workflow.configfiles for error in config_yaml_errors(path)]
_errors = _errors or shape_errors(config, _SCHEMA)
# The study, resolved once (dataflex_rl/study/resolved.py): every default, every job's settings slice. No rule, script
# or check reads `config` for a setting: each job gets its slice as a `params:` value, so Snakemake reruns exactly what
# it changes.
STUDY = None if _errors else Study.from_config(config)
_errors = _errors or study_errors(STUDY, Path.cwd())
if _errors:
    raise ValueError(f"invalid configuration ({len(_errors)} problem(s)):\n  - " + "\n  - ".join(_errors))
validate(config, schema="../config/schema.yaml")
STUDY = STUDY.with_input_digests(input_digests(STUDY, Path.cwd()))
RUNS = STUDY.runs
MODELS = list(STUDY.models)
BENCHMARKS = registry_order(STUDY.benchmarks.names)  # a reordered benchmarks.names changes no job
HUB_BENCHMARKS = hub_benchmarks(STUDY, lambda path: Path(path).is_file())
TRAINED_RUN = layout.trained_run_pattern(STUDY.methods, STUDY.regimes)
FILES = StudyFiles(STUDY, BENCHMARKS, HUB_BENCHMARKS)
REPLANS = Replans(STUDY, lambda paths: workflow.dag.forcefiles.update(paths))
# One scoring job per (run, benchmark) on a cluster, where a benchmark is long; on the embedded default one per run,
# since loading torch and transformers costs more than scoring 100 items. Either way one score file per (run,
# benchmark), byte for byte the same: the layout is not a setting of the scores (dataflex_rl/study/replans.py).
SCORED = ["{benchmark}"] if STUDY.evaluation.job_per_benchmark else BENCHMARKS
RECORD_SOURCES = FILES.record_sources()
TABLES_DIR = FILES.tables_dir()
TRAINING_CURVES = layout.training_curves(STUDY.name)


wildcard_constraints:
    model="|".join(map(re.escape, MODELS)),
    benchmark="|".join(map(re.escape, BENCHMARKS)),
    run="|".join([layout.UNTRAINED, TRAINED_RUN]),
    regime="|".join(map(re.escape, STUDY.regimes)) or "(?!)",
    data="|".join(map(re.escape, [layout.CORPUS_DATA, *BENCHMARKS])),
    chunk=r"\d+",


def model_env():
    """The `conda:` of a model's jobs: the path itself when every model of the study has the same backend, else a
    function of the job's model. Snakemake resolves a path once per rule and a function once per job."""
    envs = set(map(FILES.conda_env, MODELS))
    return envs.pop() if len(envs) == 1 else lambda wildcards: FILES.conda_env(wildcards.model)


def per_model(value):
    """A params value that depends only on the model (`value(model)`): the value itself when the study has one model,
    else a function of the job's model. Snakemake calls a function once per job, after inspecting its signature."""
    if len(MODELS) == 1:
        return value(MODELS[0])
    return lambda wildcards: value(wildcards.model)


MODEL_ENV = model_env()


def train_inputs(wildcards):
    """A train job's inputs, by name (`unpack`: one function per job instead of one per input)."""
    model, run = wildcards.model, wildcards.run
    planned = STUDY.run(model, run)
    validation = STUDY.validation_files(planned)  # a prompt selection's own validation file, or a benchmark's items
    if STUDY.methods[planned.method].validation_benchmark():
        validation = built_items(validation)
    return {
        "corpus": FILES.training_corpus(model, run),
        "gates": FILES.training_gates(model, run),
        "base": base_input(model, [layout.train_provenance(model, run)]),
        "previous": FILES.previous_budget(model, run),
        **({"validation": validation} if validation else {}),
    }


def base_input(model, records):
    """The base a model's jobs start from (FILES.base_model) as the input of the job whose provenance `records` name
    the bytes it read: ancient while the base holds those bytes, so that a base rebuilt byte for byte retrains
    nothing (REPLANS.kept_when_unchanged)."""
    base = FILES.base_model(model)
    return REPLANS.kept_when_unchanged(base, records, ancient) if base else base


def score_inputs(wildcards):
    """A scoring job's inputs, by name (`unpack`: one function per job instead of one per input); a score written
    with other settings than its slice now is scored again (dataflex_rl/study/replans.py)."""
    model, run = wildcards.model, wildcards.run
    benchmarks = scored(wildcards)
    outputs = FILES.score_outputs(model, run, benchmarks)
    REPLANS.rescored_when_stale(model, run, benchmarks, outputs)
    return {
        "benchmark_items": built_items([layout.benchmark_items(b) for b in benchmarks]),
        "gates": FILES.score_gates(benchmarks, outputs),
        "model": scored_model_input(model, run, benchmarks),
        "record": trained_run_record(wildcards),
    }


def built_items(paths):
    """Benchmark items files as a job's input. Each one's parquet footer is read while the DAG is built, and a damaged
    one is planned again (its benchmark_items job forced) instead of being read by this job, which would first delete
    its own outputs (the clean corpus, a calibration report) and then fail on it. Meanwhile its readers take it as
    `ancient`: Snakemake reruns whatever reads a file it rebuilds, and the items come back byte for byte (seeded draws
    from the same files), so the rebuild alone heals the study. Were they to come back other, the next run reruns their
    readers: Snakemake compares the checksum each reader recorded of them (under 1 MB) with the file's."""
    checked = [REPLANS.rebuilt_when_damaged(path, parquet_problem, ITEMS_REBUILT) for path in paths]
    return [ancient(path) if REPLANS.damaged(path) else path for path in checked]


ITEMS_REBUILT = (
    " alone: the jobs that read it are not rerun for it (the items come back byte for byte; if not, the next run "
    "reruns them)"
)


def scored_model_input(model, run, benchmarks):
    """The model a scoring job scores (FILES.scored_model): the untrained run's is the base (base_input)."""
    if run == layout.UNTRAINED:
        return base_input(model, [layout.score_provenance(model, run, b) for b in benchmarks])
    return FILES.scored_model(model, run)


def scored(wildcards):
    """The benchmarks of one scoring job."""
    return FILES.scored_benchmarks(wildcards.get("benchmark"))


def trained_run_record(wildcards):
    """A trained run's provenance record, an input of its scoring job (a base keeps its record inside its directory);
    a damaged one retrains the run, which resumes from its final checkpoint."""
    if wildcards.run == layout.UNTRAINED:
        return []
    return REPLANS.rebuilt_when_damaged(layout.train_provenance(wildcards.model, wildcards.run), record_problem)


def records_input(wildcards):
    """The records table the tables are built from: a `records_file` (refused with the config when damaged: nothing
    here builds it), or the study's own, whose footer is read while the DAG is built and rebuilt when damaged or built
    from other scores than this config's (copied from another study, whose newer mtime replans nothing)."""
    if STUDY.records_file:
        return STUDY.records_file
    scores = {source["path"]: source["provenance"] for source in RECORD_SOURCES}
    return REPLANS.rebuilt_when_damaged(layout.RECORDS, lambda path: records_problem(path, scores))


def metrics_inputs(runs):
    """The per-step metrics of `runs` and the train provenance records the job verifies them against
    (dataflex_rl/report/run_metrics.py), by name; a damaged record retrains its run."""
    runs = list(dict.fromkeys(runs))
    return lambda wildcards: {
        "metrics": [layout.metrics(run.model, run.name) for run in runs],
        "provenance": [
            REPLANS.rebuilt_when_damaged(layout.train_provenance(run.model, run.name), record_problem) for run in runs
        ],
    }


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


# The runs whose method's family adds the selection tables (prompt selection: they read its round metrics).
SELECTION_RUNS = FILES.selection_runs()


# --- after every rule is defined (called from the Snakefile) ---------------------------------------------------------


def check_resources_and_summarise():
    """Refuse resource requests that cannot run (config_checks.planned_resource_errors), then print the matrix summary
    and the power plan beside its cost plan (dataflex_rl/study/power_plan.py); each rule's resources as Snakemake
    merged them (rule, profile, command line: dataflex_rl/study/rule_resources.py)."""
    jobs = planned_jobs(STUDY)
    resources = {rule: merged_values(workflow.get_rule(rule).resources) for rule, count in jobs.items() if count}
    errors = planned_resource_errors(STUDY, resources, Path.cwd())
    if errors:
        raise ValueError(f"invalid resources ({len(errors)} problem(s)):\n  - " + "\n  - ".join(errors))
    summary = matrix_summary(STUDY, jobs, resources, HUB_BENCHMARKS, model_notes(STUDY, Path.cwd()))
    print("\n".join([summary, *power_lines(STUDY, resources, Path.cwd())]), file=sys.stderr)
