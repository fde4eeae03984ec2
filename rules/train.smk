rule base_model:
    input:
        corpus="results/corpus/clean.parquet",
        calibration=expand("results/calibration/{benchmark}.json", benchmark=BENCHMARKS),
    output:
        directory("results/models/{model}"),
    params:
        model=lambda wc: config["models"][wc.model],
        template=lambda wc: TEMPLATE,
    threads: THREADS
    log:
        "logs/models/{model}.log",
    benchmark:
        "logs/timing/models/{model}.tsv"
    conda:
        "../envs/cpu.yaml"
    script:
        "../workflow_scripts/base_model.py"


rule train:
    input:
        corpus="results/corpus/clean.parquet",
        calibration=expand("results/calibration/{benchmark}.json", benchmark=BENCHMARKS),
        parse_gate="results/calibration/parse_gate/{model}.json",
        base=base_model_input,
    output:
        weights="results/runs/{model}/{method}/seed{seed}/weights.pt",
        metrics="results/runs/{model}/{method}/seed{seed}/metrics.parquet",
    params:
        # resumable state is not a declared output: Snakemake deletes the outputs of a failed job, and a retry or
        # a Slurm requeue of this job resumes from the checkpoint here
        state_dir="results/runs/{model}/{method}/seed{seed}/state",
        model_config=lambda wc: config["models"][wc.model],
        template=lambda wc: TEMPLATE,
    threads: THREADS
    log:
        "logs/train/{model}/{method}/seed{seed}.log",
    benchmark:
        "logs/timing/train/{model}/{method}/seed{seed}.tsv"
    conda:
        "../envs/gpu.yaml" if any(m["backend"] == "verl" for m in config["models"].values()) else "../envs/cpu.yaml"
    script:
        "../workflow_scripts/train.py"
