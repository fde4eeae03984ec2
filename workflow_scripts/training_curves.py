import pandas as pd

from dataflex_rl.job_log import job_log
from dataflex_rl.report.figures import training_curves, training_curves_plot

with job_log(snakemake.log[0]):
    runs = pd.concat(
        [pd.read_parquet(run["path"]).assign(model=run["model"], method=run["method"], seed=run["seed"])
         for run in snakemake.params.runs],
        ignore_index=True,
    )
    window = snakemake.params.window
    training_curves_plot(training_curves(runs, window=window), snakemake.output[0], window=window)
