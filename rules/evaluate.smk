def score_weights(wildcards):
    if wildcards.run == UNTRAINED:
        return []
    return f"results/runs/{wildcards.model}/{wildcards.run}/weights.pt"


# A scoring job covers one (run, benchmark) on a cluster, where a benchmark is long; on the embedded default one job
# scores a run on every benchmark, since loading torch and transformers costs more than scoring 100 items.
if config.get("evaluation", {}).get("job_per_benchmark", False):
    SCORED = ["{benchmark}"]
else:
    SCORED = BENCHMARKS


# A scoring job keeps each finished benchmark in results/scores/{model}/{run}/.state/ (not an output) until it
# succeeds, so a retry copies those instead of rescoring them (dataflex_rl/evaluate/shards.py).
rule score:
    input:
        benchmark_items=[f"results/benchmarks/{b}.parquet" for b in SCORED],
        calibration=[f"results/calibration/{b}.json" for b in SCORED],
        base=base_model_input,
        weights=score_weights,
    output:
        [f"results/scores/{{model}}/{{run}}/{b}.parquet" for b in SCORED],
    params:
        model_config=lambda wc: config["models"][wc.model],
        template=lambda wc: TEMPLATE,
        evaluation=config.get("evaluation", {}),
    threads: THREADS
    log:
        "logs/scores/{model}/{run}/"
        + ("{benchmark}" if SCORED != BENCHMARKS else "all")
        + ".log",
    benchmark:
        "logs/timing/scores/{model}/{run}/"
        + ("{benchmark}" if SCORED != BENCHMARKS else "all")
        + ".tsv"
    conda:
        (
            "../envs/gpu.yaml"
            if any(m["backend"] == "verl" for m in config["models"].values())
            else "../envs/cpu.yaml"
        )
    script:
        "../workflow_scripts/score.py"
