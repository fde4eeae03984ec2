def record_sources():
    """(score file, model, method, seed, benchmark) for every score the records table is built from."""
    sources = []
    for path in score_files():
        model, rest = path[len("results/scores/"):].split("/", 1)
        run, bench = rest.rsplit("/", 1)
        method, _, seed = run.partition("/seed")
        sources.append(
            {
                "path": path,
                "model": model,
                "method": method,
                "seed": int(seed) if seed else None,
                "benchmark": bench[: -len(".parquet")],
            }
        )
    return sources


rule records:
    input:
        score_files(),
    output:
        "results/records/records.parquet",
    params:
        sources=record_sources(),
        steps=config["training"]["steps"],
    log:
        "logs/records/records.log",
    conda:
        "../envs/stats.yaml"
    script:
        "../workflow_scripts/records.py"
