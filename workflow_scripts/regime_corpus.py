import pandas as pd

from dataflex_rl.artefacts.atomic import write_json, write_parquet
from dataflex_rl.artefacts.job_log import job_log
from dataflex_rl.artefacts.provenance import plain_input
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
    read = {"corpus": snakemake.input.corpus, **({"solve_rates": snakemake.input.solve_rates[0]}
                                                 if snakemake.input.solve_rates else {})}
    write_json(snakemake.output.audit, {**audit, "inputs": {role: plain_input(path) for role, path in read.items()}})
    write_parquet(snakemake.output.corpus, corpus)
