from dataflex_rl.study.jobs import measure_base_solve_rates
from dataflex_rl.artefacts.job_log import job_log

# Guarded, as workflow_scripts/score.py is: the verl backend samples the rates in a vLLM engine, whose spawned
# workers re-run this file as `__mp_main__`.
if __name__ == "__main__":
    with job_log(snakemake.log[0]):
        measure_base_solve_rates(
            snakemake.params.job,
            snakemake.params.chunk,
            base=snakemake.input.base or None,
            corpus=snakemake.input.corpus,
            out=snakemake.output[0],
            threads=snakemake.threads,
            gpus=snakemake.resources.get("gpu", 0),
        )
