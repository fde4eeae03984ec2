from dataflex_rl.study.jobs import solve_rate_table
from dataflex_rl.artefacts.job_log import job_log

with job_log(snakemake.log[0]):
    solve_rate_table(
        snakemake.input.chunks,
        base=snakemake.input.base or None,
        corpus=snakemake.input.corpus,
        out=snakemake.output[0],
    )
