from dataflex_rl.corpus.decontam import decontaminate_files
from dataflex_rl.artefacts.job_log import job_log

with job_log(snakemake.log[0]):
    decontaminate_files(
        snakemake.input.corpus,
        list(snakemake.input.benchmarks),
        snakemake.output.corpus,
        snakemake.output.audit,
        threshold=snakemake.params.threshold,
    )
