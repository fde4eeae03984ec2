from contextlib import redirect_stderr

from dataflex_rl.records_import import load_records
from dataflex_rl.report.regenerate import regenerate

with open(snakemake.log[0], "w") as log, redirect_stderr(log):
    regenerate(
        load_records(snakemake.input[0]),
        snakemake.params.out_dir,
        controls=snakemake.params.controls,
        confidence=snakemake.params.confidence,
        bootstrap_resamples=snakemake.params.bootstrap_resamples,
        max_subsets=snakemake.params.max_subsets,
        seed_counts=snakemake.params.seed_counts,
        pairing=snakemake.params.pairing,
    )
