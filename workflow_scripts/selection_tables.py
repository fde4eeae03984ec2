from pathlib import Path

from dataflex_rl.artefacts.job_log import job_log
from dataflex_rl.report.run_metrics import read_run_metrics
from dataflex_rl.report.selection import selection_composition, selection_overhead, selection_rounds
from dataflex_rl.report.tables import write_table

with job_log(snakemake.log[0]):
    rounds = selection_rounds(read_run_metrics(snakemake.params.runs))
    out = Path(snakemake.output[0]).parent
    write_table(rounds, out / "selection_rounds", decimals=3)
    write_table(selection_composition(rounds, snakemake.params.random_methods, snakemake.params.confidence),
                out / "selection_composition")
    write_table(selection_overhead(rounds, snakemake.params.signals), out / "selection_overhead")
