import pandas as pd

from dataflex_rl.artefacts.atomic import write_json
from dataflex_rl.artefacts.job_log import job_log
from dataflex_rl.artefacts.provenance import plain_input
from dataflex_rl.verify.calibration import calibrate_benchmark

with job_log(snakemake.log[0]):
    report = calibrate_benchmark(snakemake.wildcards.benchmark, pd.read_parquet(snakemake.input[0]))
    write_json(snakemake.output[0], {**report, "inputs": {"items": plain_input(snakemake.input[0])}})
