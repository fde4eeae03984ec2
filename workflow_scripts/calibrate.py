from contextlib import redirect_stderr

import pandas as pd

from dataflex_rl.atomic import write_json
from dataflex_rl.verify.calibration import calibrate_benchmark

with open(snakemake.log[0], "w") as log, redirect_stderr(log):
    report = calibrate_benchmark(
        snakemake.wildcards.benchmark, pd.read_parquet(snakemake.input[0]), snakemake.params.max_items
    )
    write_json(snakemake.output[0], report)
