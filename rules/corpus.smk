rule corpus:
    output:
        corpus="results/corpus/raw.parquet",
        audit="results/corpus/raw_audit.json",
    params:
        sources=config["corpus"]["sources"],
        items_per_domain=config["corpus"]["items_per_domain"],
        seed=config["corpus"]["seed"],
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
        "results/benchmarks/{benchmark}.parquet",
    params:
        n_items=config["benchmarks"].get("items", 100),
        path=lambda wc: BENCHMARK_FILES.get(wc.benchmark),
        seed=config["benchmarks"].get("seed", 1000),
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
