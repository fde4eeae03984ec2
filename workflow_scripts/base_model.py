from dataflex_rl.backends import build_base_model
from dataflex_rl.job_log import job_log

with job_log(snakemake.log[0]):
    build_base_model(
        snakemake.params.model,
        corpus=snakemake.input.corpus,
        out_dir=snakemake.output[0],
        template=snakemake.params.template,
        threads=snakemake.threads,
    )
