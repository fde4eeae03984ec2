from dataflex_rl.study.jobs import merge_run
from dataflex_rl.artefacts.job_log import job_log

with job_log(snakemake.log[0]):
    merge_run(
        snakemake.params.settings,
        model=snakemake.wildcards.model,
        model_dir=snakemake.input.model,
        model_provenance=snakemake.input.provenance,
        out_dir=snakemake.output[0],
    )
