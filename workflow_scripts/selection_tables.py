from pathlib import Path

import pandas as pd

from dataflex_rl.job_log import job_log
from dataflex_rl.report.selection import selection_composition, selection_overhead, selection_rounds
from dataflex_rl.report.tables import write_table

with job_log(snakemake.log[0]):
    metrics = pd.concat(
        [pd.read_parquet(run["path"]).assign(model=run["model"], method=run["method"], seed=run["seed"])
         for run in snakemake.params.runs],
        ignore_index=True,
    )
    rounds = selection_rounds(metrics)
    out = Path(snakemake.output[0]).parent
    write_table(rounds, out / "selection_rounds", decimals=3)
    write_table(selection_composition(rounds, snakemake.params.random_methods, snakemake.params.confidence),
                out / "selection_composition")
    write_table(selection_overhead(rounds, snakemake.params.signals), out / "selection_overhead")
