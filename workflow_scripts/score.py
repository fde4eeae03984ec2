from dataflex_rl.backends import score_run
from dataflex_rl.job_log import job_log

with job_log(snakemake.log[0]):
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
