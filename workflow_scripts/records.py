from contextlib import redirect_stderr

from dataflex_rl.atomic import write_parquet
from dataflex_rl.records import collect_records

with open(snakemake.log[0], "w") as log, redirect_stderr(log):
    write_parquet(snakemake.output[0], collect_records(snakemake.params.sources, steps=snakemake.params.steps))
