from contextlib import redirect_stderr

from dataflex_rl.atomic import write_json, write_parquet
from dataflex_rl.tasks.corpus import build_corpus

with open(snakemake.log[0], "w") as log, redirect_stderr(log):
    p = snakemake.params
    corpus, audit = build_corpus(p.sources, p.items_per_domain, p.seed)
    write_parquet(snakemake.output.corpus, corpus)
    write_json(snakemake.output.audit, audit)
