from contextlib import redirect_stderr

from dataflex_rl.atomic import write_parquet
from dataflex_rl.backends import score_run

with open(snakemake.log[0], "w") as log, redirect_stderr(log):
    for items, output in zip(snakemake.input.benchmark_items, snakemake.output):
        scores = score_run(
            snakemake.params.model_config,
            base=snakemake.input.base,
            weights=snakemake.input.weights or None,
            items=items,
            template=snakemake.params.template,
            evaluation=snakemake.params.evaluation,
            threads=snakemake.threads,
        )
        write_parquet(output, scores)
