from dataflex_rl.study.jobs import train_run
from dataflex_rl.artefacts.job_log import job_log

with job_log(snakemake.log[0]):
    train_run(
        snakemake.params.job,
        snakemake.params.settings,
        base=snakemake.input.base or None,
        corpus=snakemake.input.corpus,
        checkpoint_every=snakemake.params.checkpoint_every,
        out_model=snakemake.output.model,
        out_metrics=snakemake.output.metrics,
        out_provenance=snakemake.output.provenance,
        state_dir=snakemake.params.state_dir,
        threads=snakemake.threads,
        token_caps=snakemake.params.token_caps,
        gpus=snakemake.resources.get("gpu", 0),
    )
