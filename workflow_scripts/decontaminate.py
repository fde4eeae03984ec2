from contextlib import redirect_stderr

from dataflex_rl.decontam import decontaminate_files

with open(snakemake.log[0], "w") as log, redirect_stderr(log):
    decontaminate_files(
        snakemake.input.corpus,
        list(snakemake.input.benchmarks),
        snakemake.output.corpus,
        snakemake.output.audit,
        threshold=snakemake.params.threshold,
        num_perm=snakemake.params.num_perm,
    )
