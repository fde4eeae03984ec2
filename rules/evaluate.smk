# A scoring job keeps each finished benchmark in results/scores/{model}/{run}/.state/ (not an output) until it
# succeeds, so a retry copies those instead of rescoring them (dataflex_rl/evaluate/shards.py).
rule score:
    input:
        unpack(score_inputs),
    output:
        scores=[layout.score("{model}", "{run}", b) for b in SCORED],
        provenance=[layout.score_provenance("{model}", "{run}", b) for b in SCORED],
    log:
        "logs/scores/{model}/{run}/" + ("{benchmark}" if STUDY.evaluation.job_per_benchmark else "all") + ".log",
    benchmark:
        "logs/timing/scores/{model}/{run}/" + ("{benchmark}" if STUDY.evaluation.job_per_benchmark else "all") + ".tsv"
    conda:
        MODEL_ENV
    threads: STUDY.threads
    resources:
        **backend_resources(STUDY, "score"),
    params:
        # derived (a function of `output`: out of Snakemake's params trigger), so that a score is reused whichever
        # layout wrote it; each score is held to its slice by its provenance record instead (rescored_when_stale)
        settings=lambda wc, output: [STUDY.score_slice(wc.model, wc.run, b) for b in scored(wc)],
        job=per_model(STUDY.score_job),
        model_provenance=lambda wc: FILES.scored_model_provenance(wc.model, wc.run),
        token_caps=lambda wc, output: STUDY.score_token_caps(wc.model),
    script:
        "../workflow_scripts/score.py"
