from contextlib import redirect_stderr

from dataflex_rl.backends import build_base_model

with open(snakemake.log[0], "w") as log, redirect_stderr(log):
    build_base_model(
        snakemake.params.model,
        corpus=snakemake.input.corpus,
        out_dir=snakemake.output[0],
        template=snakemake.params.template,
        threads=snakemake.threads,
    )
