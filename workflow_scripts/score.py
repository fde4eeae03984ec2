from contextlib import redirect_stderr

from dataflex_rl.backends import score_run

with open(snakemake.log[0], "w") as log, redirect_stderr(log):
    score_run(
        snakemake.params.model_config,
        base=snakemake.input.base,
        weights=snakemake.input.weights or None,
        items=list(snakemake.input.benchmark_items),
        outputs=list(snakemake.output),
        template=snakemake.params.template,
        evaluation=snakemake.params.evaluation,
        threads=snakemake.threads,
    )
