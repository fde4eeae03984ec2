# A quarantine file is a params path, not an output: Snakemake deletes a failed job's outputs, and the quarantined rows
# must survive a failure (an unreadable file, one without a usable row) so that the researcher can inspect them. The
# quarantine threshold is not a param: rule quarantine_gate holds the counts of the audit to it.
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
        validation=STUDY.data_validation["corpus"].row_checks(),
        quarantine=layout.CORPUS_QUARANTINE,
    script:
        "../workflow_scripts/corpus.py"


rule benchmark_items:
    input:
        lambda wc: FILES.benchmark_files(wc.benchmark),
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
        files_sha256=lambda wc: FILES.benchmark_digests(wc.benchmark),
        hub_fallback=lambda wc: STUDY.hub_fallback(wc.benchmark),
        seed=STUDY.benchmarks.seed,
        validation=STUDY.data_validation["benchmarks"].row_checks(),
        quarantine=lambda wc: layout.benchmark_quarantine(wc.benchmark),
    script:
        "../workflow_scripts/benchmark_items.py"


# A data file's quarantined share against data_validation.<section>.max_quarantine_fraction
# (dataflex_rl/corpus/quarantine_gate.py): a gate, so the threshold is in no data job's params, and a changed one reruns
# this job alone. The fingerprint of the data job's slice tells a report on other data (dataflex_rl/artefacts/gates.py).
rule quarantine_gate:
    input:
        audit=lambda wc: layout.data_audit(wc.data),
    output:
        layout.quarantine_gate("{data}"),
    log:
        "logs/gates/quarantine_{data}.log",
    conda:
        "../envs/cpu.yaml"
    params:
        section=lambda wc: FILES.data_section(wc.data),
        max_fraction=lambda wc: STUDY.max_quarantine_fraction(FILES.data_section(wc.data)),
        data_fingerprint=lambda wc: FILES.data_fingerprint(wc.data),
    script:
        "../workflow_scripts/quarantine_gate.py"


rule decontaminate:
    input:
        corpus=layout.CORPUS_RAW,
        benchmarks=lambda wc: built_items([layout.benchmark_items(b) for b in BENCHMARKS]),
        gates=FILES.decontamination_gates(),
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
