from dataflex_rl.study.jobs import score_run
from dataflex_rl.artefacts.job_log import job_log

# Guarded: a vLLM engine starts its workers with the spawn start method (always on CPU, and on a GPU once CUDA is
# initialised), which re-runs this file as `__mp_main__` in each worker; unguarded, every worker would score again.
if __name__ == "__main__":
    with job_log(snakemake.log[0]):
        score_run(
            snakemake.params.job,
            snakemake.params.settings,
            model_dir=snakemake.input.model or None,
            model_provenance=snakemake.params.model_provenance,
            items=list(snakemake.input.benchmark_items),
            outputs=list(snakemake.output.scores),
            provenance=list(snakemake.output.provenance),
            threads=snakemake.threads,
            token_caps=snakemake.params.token_caps,
            gpus=snakemake.resources.get("gpu", 0),
        )
