rule calibrate:
    input:
        benchmark_items=lambda wc: built_items([layout.benchmark_items(wc.benchmark)]),
        gates=lambda wc: FILES.calibration_gates(wc.benchmark),
    output:
        layout.calibration("{benchmark}"),
    log:
        "logs/calibration/{benchmark}.log",
    conda:
        "../envs/cpu.yaml"
    script:
        "../workflow_scripts/calibrate.py"


# The untrained base's own answers must be readable before anything is trained (dataflex_rl/verify/parse_gate.py):
# its scores hold, per item, whether an answer was parsed. At a threshold of 0 it only reports (training_gates).
rule parse_gate:
    input:
        lambda wc: [layout.score(wc.model, layout.UNTRAINED, b) for b in BENCHMARKS],
    output:
        layout.parse_gate("{model}"),
    log:
        "logs/calibration/parse_gate_{model}.log",
    conda:
        "../envs/stats.yaml"
    params:
        benchmarks=BENCHMARKS,
        min_parse_rate=STUDY.calibration.min_base_parse_rate,
    script:
        "../workflow_scripts/parse_gate.py"
