from contextlib import redirect_stderr

import pandas as pd

from dataflex_rl.stats.study import write_study_tables

with open(snakemake.log[0], "w") as log, redirect_stderr(log):
    write_study_tables(
        pd.read_parquet(snakemake.input[0]),
        out_dir=snakemake.output.headroom.rsplit("/", 1)[0],
        controls=snakemake.params.controls,
        confidence=snakemake.params.confidence,
    )
