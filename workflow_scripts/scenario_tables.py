from pathlib import Path

import pandas as pd

from dataflex_rl.artefacts.job_log import job_log
from dataflex_rl.report.scenarios import scenario_tables
from dataflex_rl.report.tables import write_table

with job_log(snakemake.log[0]):
    tables = scenario_tables(pd.read_csv(snakemake.input.summaries), pd.read_csv(snakemake.input.composition),
                             snakemake.params.specs)
    out = Path(snakemake.output[0]).parent
    for name, (table, best) in tables.items():
        write_table(table, out / f"scenario_{name}", bold=best)
