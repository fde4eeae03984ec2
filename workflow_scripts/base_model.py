from dataflex_rl.study.jobs import build_base_model
from dataflex_rl.artefacts.job_log import job_log

with job_log(snakemake.log[0]):
    build_base_model(
        snakemake.params.job,
        snakemake.params.settings,
        corpus=snakemake.input.corpus,
        out_dir=snakemake.output[0],
        threads=snakemake.threads,
        token_caps=snakemake.params.token_caps,
    )
