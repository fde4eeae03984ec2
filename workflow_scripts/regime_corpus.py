import pandas as pd

from dataflex_rl.atomic import write_json, write_parquet
from dataflex_rl.job_log import job_log
from dataflex_rl.regimes.registry import apply_regime

with job_log(snakemake.log[0]):
    job = snakemake.params.job
    solve_rates = None
    if snakemake.input.solve_rates:
        rates = pd.read_parquet(snakemake.input.solve_rates[0])
        solve_rates = dict(zip(rates["id"], rates["solve_rate"]))
    corpus, record, audit = apply_regime(job["transform"], job["params"], pd.read_parquet(snakemake.input.corpus),
                                         job["seed"], solve_rates=solve_rates)
    write_parquet(snakemake.output.record, record)
    write_json(snakemake.output.audit, audit)
    write_parquet(snakemake.output.corpus, corpus)
