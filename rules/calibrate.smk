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
