from dataflex_rl.records import PROVENANCE_PACKAGES, config_hash


def record_sources():
    """(score file, model, method, seed, benchmark, config hash) for every score the records table is built from; the
    hash covers the config sections that determine the run (dataflex_rl.records.run_config)."""
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
                "config_hash": config_hash(config, model, method),
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
        # Versions are read in the job itself (importlib.metadata), i.e. of the environment that built the records.
        packages=list(PROVENANCE_PACKAGES),
    log:
        "logs/records/records.log",
    conda:
        "../envs/stats.yaml"
    script:
        "../workflow_scripts/records.py"
