# Every table and figure of the study from a records table alone (dataflex_rl.report.regenerate). The records are the
# study's own (results/records/records.parquet) or, with `records_file` in the config, a file from elsewhere — e.g.
# the authors' released runs:  snakemake tables --configfile config/released.yaml
# Then nothing upstream of the records is in the DAG: no training, no scoring.
from dataflex_rl.config import controls as method_controls
from dataflex_rl.report.outputs import FIGURES, figure_paths, table_paths

TABLES_DIR = f"results/tables/{config['study']}"
STATS = config.get("stats", {})


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


TRAINING_CURVES = f"{TABLES_DIR}/figures/training_curves.png"


def training_curves_outputs():
    """The training-curves figure reads the runs' per-step metrics, so only a study that trains has one: a
    records-only config (`records_file`) has no metrics."""
    return [] if "records_file" in config else [TRAINING_CURVES]


rule tables:
    input:
        config.get("records_file", "results/records/records.parquet"),
    output:
        tables=[report_table(path) for path in table_paths(TABLES_DIR)],
        figures=[
            report(path, caption=f"../report/{Path(path).stem}.rst", category="Study tables and figures")
            for path in figure_paths(TABLES_DIR)
        ],
    params:
        out_dir=TABLES_DIR,
        controls=method_controls(config),
        confidence=STATS.get("confidence", 0.95),
        bootstrap_resamples=STATS.get("bootstrap_resamples", 9999),
        max_subsets=STATS.get("seed_subsets", 200),
        seed_counts=STATS.get("mde_seed_counts", [3, 6, 12]),
        pairing=STATS.get("pairing", "paired"),
    log:
        f"logs/tables/{config['study']}.log",
    benchmark:
        f"logs/timing/tables/{config['study']}.tsv"
    conda:
        "../envs/stats.yaml"
    script:
        "../workflow_scripts/tables.py"


# The runs' per-step metrics (written by `train`), not the records: mean reward per method with a band over seeds,
# and the kept fraction of the sampled prompts. In the default targets of a study that trains, not of a records-only one.
rule training_curves:
    input:
        [f"results/runs/{run.path}/metrics.parquet" for run in RUNS],
    output:
        report(
            TRAINING_CURVES,
            caption="../report/training_curves.rst",
            category="Study tables and figures",
        ),
    params:
        runs=[
            {
                "path": f"results/runs/{run.path}/metrics.parquet",
                "model": run.model,
                "method": run.method,
                "seed": run.seed,
            }
            for run in RUNS
        ],
        window=STATS.get("curve_window", 10),
    log:
        f"logs/tables/{config['study']}_training_curves.log",
    conda:
        "../envs/stats.yaml"
    script:
        "../workflow_scripts/training_curves.py"
