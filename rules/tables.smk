# Every table and figure of the study from a records table alone (dataflex_rl.report.regenerate). The records are the
# study's own (results/records/records.parquet) or, with `records_file` in the config, a file from elsewhere — e.g.
# the authors' released runs:  snakemake tables --configfile config/released.yaml
# Then nothing upstream of the records is in the DAG: no training, no scoring.
rule tables:
    input:
        records_input,
    output:
        tables=[report_table(path) for path in table_paths(TABLES_DIR)],
        figures=[
            report(path, caption=f"../report/{Path(path).stem}.rst", category="Study tables and figures")
            for path in figure_paths(TABLES_DIR)
        ],
        # which records (by checksum) and settings built them: the audit says when they are another config's
        provenance=layout.tables_provenance(STUDY.name),
    log:
        f"logs/tables/{STUDY.name}.log",
    benchmark:
        f"logs/timing/tables/{STUDY.name}.tsv"
    conda:
        "../envs/stats.yaml"
    params:
        out_dir=lambda wildcards, output: str(Path(output.tables[0]).parent),
        controls=STUDY.controls(),
        families=STUDY.families(),
        confidence=STUDY.stats.confidence,
        bootstrap_resamples=STUDY.stats.bootstrap_resamples,
        max_subsets=STUDY.stats.seed_subsets,
        seed_counts=list(STUDY.stats.mde_seed_counts),
        pairing=STUDY.stats.pairing,
        equivalence_margin=STUDY.stats.equivalence_margin,
        max_cut_share=STUDY.evaluation.max_cut_share,
        settings=STUDY.tables_slice(),
    script:
        "../workflow_scripts/tables.py"


# The runs' per-step metrics (written by `train`), not the records: mean reward per method with a band over seeds,
# and the kept fraction of the sampled prompts. In the default targets of a study that trains, not of a records-only one.
rule training_curves:
    input:
        unpack(metrics_inputs(RUNS)),
    output:
        report(
            TRAINING_CURVES,
            caption="../report/training_curves.rst",
            category="Study tables and figures",
        ),
    log:
        f"logs/tables/{STUDY.name}_training_curves.log",
    conda:
        "../envs/stats.yaml"
    params:
        runs=FILES.metrics_runs((cell, run) for cell in STUDY.cells() for run in cell.runs),
        window=STUDY.stats.curve_window,
    script:
        "../workflow_scripts/training_curves.py"


# The prompt-selection rounds (docs/prompt_selection.md), from the round columns of the runs' per-step metrics: per
# round, the kept set's composition at the first and last round against random prompts, and the selection overhead.
rule selection_tables:
    input:
        unpack(metrics_inputs(run for cell, run in SELECTION_RUNS)),
    output:
        [report_table(path) for path in layout.selection_tables(STUDY.name)],
    log:
        f"logs/tables/{STUDY.name}_selection.log",
    conda:
        "../envs/stats.yaml"
    params:
        runs=FILES.metrics_runs(SELECTION_RUNS),
        signals={name: CATALOGUE[spec.policy].signal for name, spec in STUDY.methods.items()},
        random_methods=STUDY.random_prompt_methods(),
        confidence=STUDY.stats.confidence,
    script:
        "../workflow_scripts/selection_tables.py"


# The seed paper's scenario tables (dataflex_rl/report/scenarios.py), one per campaign training a prompt selection: per
# method the test score from the run summaries and the kept set's share of the regime's label at the first and the last
# round from the composition table, the best marked.
rule scenario_tables:
    input:
        summaries=f"{TABLES_DIR}/run_summaries.csv",
        composition=f"{TABLES_DIR}/selection_composition.csv",
        # a benchmark split into validation and test items: its items and the campaign's scores of it (Table 3)
        splits=FILES.scenario_split_inputs(),
    output:
        [report_table(path) for path in FILES.scenario_tables()],
    log:
        f"logs/tables/{STUDY.name}_scenarios.log",
    conda:
        "../envs/stats.yaml"
    params:
        specs=[spec.to_json() for spec in scenario_specs(STUDY)],
    script:
        "../workflow_scripts/scenario_tables.py"
