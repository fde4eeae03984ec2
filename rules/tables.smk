# Every table and figure of the study from a records table alone (dataflex_rl.report.regenerate). The records are the
# study's own (results/records/records.parquet) or, with `records_file` in the config, a file from elsewhere — e.g.
# the authors' released runs:  snakemake tables --configfile config/released.yaml
# Then nothing upstream of the records is in the DAG: no training, no scoring.
from dataflex_rl.config import controls as method_controls
from dataflex_rl.report.regenerate import FIGURES, figure_paths, table_paths

TABLES_DIR = f"results/tables/{config['study']}"
STATS = config.get("stats", {})


def tables_outputs():
    return table_paths(TABLES_DIR) + figure_paths(TABLES_DIR)


rule tables:
    input:
        config.get("records_file", "results/records/records.parquet"),
    output:
        tables=table_paths(TABLES_DIR),
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
    log:
        f"logs/tables/{config['study']}.log",
    benchmark:
        f"logs/timing/tables/{config['study']}.tsv"
    conda:
        "../envs/stats.yaml"
    script:
        "../workflow_scripts/tables.py"
