# A quarantine file is a params path, not an output: Snakemake deletes a failed job's outputs, and the quarantined rows
# must survive the threshold failure they cause so that the researcher can inspect them.
rule corpus:
    input:
        files=[entry["path"] for entry in config["corpus"].get("files", [])],
    output:
        corpus="results/corpus/raw.parquet",
        audit="results/corpus/raw_audit.json",
    params:
        sources=config["corpus"]["sources"],
        items_per_domain=config["corpus"]["items_per_domain"],
        seed=config["corpus"]["seed"],
        files=config["corpus"].get("files", []),
        validation=config.get("data_validation", {}).get("corpus", {}),
        quarantine="results/corpus/quarantine.jsonl",
    log:
        "logs/corpus/corpus.log",
    conda:
        "../envs/cpu.yaml"
    script:
        "../workflow_scripts/corpus.py"


rule benchmark_items:
    input:
        benchmark_file,
    output:
        parquet="results/benchmarks/{benchmark}.parquet",
        audit="results/benchmarks/{benchmark}.audit.json",
    params:
        n_items=config["benchmarks"].get("items", 100),
        path=lambda wc: BENCHMARK_FILES.get(wc.benchmark),
        hub_fallback=config["benchmarks"].get("hub_fallback", False),
        seed=config["benchmarks"].get("seed", 1000),
        validation=config.get("data_validation", {}).get("benchmarks", {}),
        quarantine=lambda wc: f"results/benchmarks/{wc.benchmark}.quarantine.jsonl",
    log:
        "logs/benchmarks/{benchmark}.log",
    conda:
        "../envs/cpu.yaml"
    script:
        "../workflow_scripts/benchmark_items.py"


rule decontaminate:
    input:
        corpus="results/corpus/raw.parquet",
        benchmarks=expand("results/benchmarks/{benchmark}.parquet", benchmark=BENCHMARKS),
    output:
        corpus="results/corpus/clean.parquet",
        audit="results/corpus/decontamination.json",
    params:
        threshold=config.get("decontamination", {}).get("threshold", 0.8),
        num_perm=config.get("decontamination", {}).get("num_perm", 128),
    log:
        "logs/corpus/decontaminate.log",
    conda:
        "../envs/cpu.yaml"
    script:
        "../workflow_scripts/decontaminate.py"
