rule calibrate:
    input:
        "results/benchmarks/{benchmark}.parquet",
    output:
        "results/calibration/{benchmark}.json",
    params:
        max_items=config.get("calibration", {}).get("max_items", 100),
    log:
        "logs/calibration/{benchmark}.log",
    conda:
        "../envs/cpu.yaml"
    script:
        "../workflow_scripts/calibrate.py"


# The untrained base's own answers must be readable before anything is trained (dataflex_rl/verify/parse_gate.py):
# its scores hold, per item, whether an answer was parsed.
rule parse_gate:
    input:
        lambda wc: [f"results/scores/{wc.model}/{UNTRAINED}/{b}.parquet" for b in BENCHMARKS],
    output:
        "results/calibration/parse_gate/{model}.json",
    params:
        benchmarks=BENCHMARKS,
        min_parse_rate=config.get("calibration", {}).get("min_base_parse_rate", 0.0),
    log:
        "logs/calibration/parse_gate_{model}.log",
    conda:
        "../envs/stats.yaml"
    script:
        "../workflow_scripts/parse_gate.py"
