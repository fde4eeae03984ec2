from dataflex_rl.records import PROVENANCE_PACKAGES, config_hash, run_id


def record_sources():
    """(score file, model, method, seed, benchmark, config hash) for every score the records table is built from; the
    hash covers the config sections that determine the run (dataflex_rl.records.run_config), once per run."""
    runs = [(m, UNTRAINED, None) for m in MODELS] + [(r.model, r.method, r.seed) for r in RUNS]
    sources = []
    for model, method, seed in runs:
        run_hash = config_hash(config, model, method)
        sources.extend(
            {
                "path": f"results/scores/{run_id(model, method, seed)}/{bench}.parquet",
                "model": model,
                "method": method,
                "seed": seed,
                "benchmark": bench,
                "config_hash": run_hash,
            }
            for bench in BENCHMARKS
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
        min_parse_rate=config.get("evaluation", {}).get("min_parse_rate", 0.5),
        # Versions are read in the job itself (importlib.metadata), i.e. of the environment that built the records.
        packages=list(PROVENANCE_PACKAGES),
    log:
        "logs/records/records.log",
    conda:
        "../envs/stats.yaml"
    script:
        "../workflow_scripts/records.py"
