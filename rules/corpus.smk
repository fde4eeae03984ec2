# A quarantine file is a params path, not an output: Snakemake deletes a failed job's outputs, and the quarantined rows
# must survive the threshold failure they cause so that the researcher can inspect them.
rule corpus:
    input:
        files=[entry["path"] for entry in STUDY.corpus.files],
    output:
        corpus=layout.CORPUS_RAW,
        audit=layout.CORPUS_AUDIT,
    log:
        "logs/corpus/corpus.log",
    conda:
        "../envs/cpu.yaml"
    params:
        sources=list(STUDY.corpus.sources),
        items_per_domain=STUDY.corpus.items_per_domain,
        seed=STUDY.corpus.seed,
        files=list(STUDY.corpus.files),
        # their contents: a file replaced by other bytes rebuilds the corpus, whatever its mtime
        files_sha256=[STUDY.input_digests.get(entry["path"]) for entry in STUDY.corpus.files],
        validation=row_checks(STUDY.data_validation["corpus"]),
        quarantine=layout.CORPUS_QUARANTINE,
    script:
        "../workflow_scripts/corpus.py"


rule benchmark_items:
    input:
        benchmark_file,
    output:
        parquet=layout.benchmark_items("{benchmark}"),
        audit=layout.benchmark_audit("{benchmark}"),
    log:
        "logs/benchmarks/{benchmark}.log",
    conda:
        "../envs/cpu.yaml"
    params:
        n_items=STUDY.benchmarks.items,
        path=lambda wc: STUDY.benchmarks.files.get(wc.benchmark),
        # its files' contents (None for a generated benchmark): other bytes rebuild the items, whatever the mtime
        files_sha256=benchmark_digests,
        hub_fallback=STUDY.benchmarks.hub_fallback,
        seed=STUDY.benchmarks.seed,
        validation=row_checks(STUDY.data_validation["benchmarks"]),
        quarantine=lambda wc: layout.benchmark_quarantine(wc.benchmark),
    script:
        "../workflow_scripts/benchmark_items.py"


rule decontaminate:
    input:
        corpus=layout.CORPUS_RAW,
        benchmarks=[layout.benchmark_items(b) for b in BENCHMARKS],
    output:
        corpus=layout.CORPUS_CLEAN,
        audit=layout.DECONTAMINATION_AUDIT,
    log:
        "logs/corpus/decontaminate.log",
    conda:
        "../envs/cpu.yaml"
    params:
        benchmarks=BENCHMARKS,
        threshold=STUDY.decontamination.threshold,
    script:
        "../workflow_scripts/decontaminate.py"
