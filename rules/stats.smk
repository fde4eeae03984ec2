rule records:
    input:
        scores=list(dict.fromkeys(source["path"] for source in RECORD_SOURCES)),
        provenance=list(dict.fromkeys(source["provenance"] for source in RECORD_SOURCES)),
        # the items of a benchmark split into validation and test items (prompt_selection/benchmark_split.py)
        split_items=lambda wc: built_items(FILES.split_items_files()),
    output:
        layout.RECORDS,
    log:
        "logs/records/records.log",
    conda:
        "../envs/stats.yaml"
    params:
        sources=RECORD_SOURCES,
        min_parse_rate=STUDY.evaluation.min_parse_rate,
        # Versions are read in the job itself (importlib.metadata), i.e. of the environment that built the records.
        packages=list(PROVENANCE_PACKAGES),
    script:
        "../workflow_scripts/records.py"
