import pandas as pd

from dataflex_rl.artefacts.atomic import write_json
from dataflex_rl.artefacts.job_log import job_log
from dataflex_rl.artefacts.provenance import plain_input
from dataflex_rl.verify.parse_gate import check_base_parse_rates

with job_log(snakemake.log[0]):
    paths = dict(zip(snakemake.params.benchmarks, snakemake.input))
    scores = {name: pd.read_parquet(path) for name, path in paths.items()}
    report = check_base_parse_rates(snakemake.wildcards.model, scores, snakemake.params.min_parse_rate)
    write_json(snakemake.output[0], {**report, "inputs": {f"score:{name}": plain_input(path)
                                                          for name, path in paths.items()}})
