# A data regime's training corpus (dataflex_rl/regimes, docs/regimes.md): the clean corpus through the regime's seeded
# transform, with a per-prompt record of what the transform did and an audit of its counts. One per (regime, model) a
# run trains on; a transform that reads the untrained base's solve rates (low_utility) waits for them.
rule regime_corpus:
    input:
        corpus=layout.CORPUS_CLEAN,
        solve_rates=lambda wc: FILES.solve_rates(wc.regime, wc.model),
    output:
        corpus=layout.regime_corpus("{regime}", "{model}"),
        record=layout.regime_record("{regime}", "{model}"),
        audit=layout.regime_audit("{regime}", "{model}"),
    log:
        "logs/corpus/regimes/{regime}/{model}.log",
    conda:
        "../envs/cpu.yaml"
    params:
        settings=lambda wc: STUDY.regime_slice(wc.regime, wc.model),
        job=lambda wc: STUDY.regime_job(wc.regime),
    script:
        "../workflow_scripts/regime_corpus.py"


# The untrained base's solve rate per clean-corpus prompt, K samples at the training temperature: what the low_utility
# regime picks its easy prompts by (measured, not assumed). The corpus is measured in chunks, one job each, which a
# cluster runs side by side (the backend's solve_rate_job_prompts; one chunk on the embedded backend); their number is
# fixed at dry run (dataflex_rl/study/solve_rate_time.py), and solve_rate_table puts them together.
rule solve_rates:
    input:
        corpus=layout.CORPUS_CLEAN,
        base=lambda wc: FILES.base_model(wc.model),
    output:
        layout.solve_rate_chunk("{model}", "{chunk}"),
    log:
        "logs/corpus/solve_rates/{model}/chunk{chunk}.log",
    conda:
        MODEL_ENV
    threads: STUDY.threads
    resources:
        **backend_resources(STUDY, "solve_rates"),
    params:
        settings=per_model(STUDY.solve_rates_slice),
        job=per_model(STUDY.solve_rates_job),
        chunk=lambda wc: chunk_of(STUDY, wc.model, int(wc.chunk)),
    script:
        "../workflow_scripts/solve_rates.py"


rule solve_rate_table:
    input:
        corpus=layout.CORPUS_CLEAN,
        base=lambda wc: FILES.base_model(wc.model),
        chunks=lambda wc: FILES.solve_rate_chunks(wc.model),
    output:
        layout.solve_rates("{model}"),
    log:
        "logs/corpus/solve_rates/{model}.log",
    conda:
        "../envs/cpu.yaml"
    params:
        settings=per_model(STUDY.solve_rates_slice),
    script:
        "../workflow_scripts/solve_rate_table.py"
