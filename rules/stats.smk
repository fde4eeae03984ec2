rule records:
    input:
        scores=score_files(),
        provenance=[layout.score_provenance(m, r, b) for m, r in STUDY.scored_runs() for b in BENCHMARKS],
    output:
        layout.RECORDS,
    log:
        "logs/records/records.log",
    conda:
        "../envs/stats.yaml"
    params:
        sources=record_sources(),
        min_parse_rate=STUDY.evaluation.min_parse_rate,
        # Versions are read in the job itself (importlib.metadata), i.e. of the environment that built the records.
        packages=list(PROVENANCE_PACKAGES),
    script:
        "../workflow_scripts/records.py"
