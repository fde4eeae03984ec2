from contextlib import redirect_stderr

from dataflex_rl.atomic import write_parquet
from dataflex_rl.tasks.corpus import benchmark_items

with open(snakemake.log[0], "w") as log, redirect_stderr(log):
    items = benchmark_items(
        snakemake.wildcards.benchmark,
        n_items=snakemake.params.n_items,
        seed=snakemake.params.seed,
        path=snakemake.params.path,
    )
    write_parquet(snakemake.output[0], items)
