from contextlib import redirect_stderr

import pandas as pd

from dataflex_rl.report.figures import forest_plot

with open(snakemake.log[0], "w") as log, redirect_stderr(log):
    comparisons = pd.read_csv(snakemake.input[0])
    forest_plot(comparisons, snakemake.output[0], metric=comparisons["metric"].iloc[0])
