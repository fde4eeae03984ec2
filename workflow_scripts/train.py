from dataflex_rl.backends import train_run
from dataflex_rl.config import grpo_settings, method_spec
from dataflex_rl.job_log import job_log

with job_log(snakemake.log[0]):
    w = snakemake.wildcards
    train_run(
        snakemake.params.model_config,
        base=snakemake.input.base,
        corpus=snakemake.input.corpus,
        method=method_spec(snakemake.config, w.method),
        seed=int(w.seed),
        settings=grpo_settings(snakemake.config),
        template=snakemake.params.template,
        out_weights=snakemake.output.weights,
        out_metrics=snakemake.output.metrics,
        state_dir=snakemake.params.state_dir,
        threads=snakemake.threads,
    )
