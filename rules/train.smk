rule base_model:
    input:
        corpus=layout.CORPUS_CLEAN,
        gates=lambda wc: FILES.base_model_gates(wc.model),
    output:
        directory(layout.base_model("{model}")),
    log:
        "logs/models/{model}.log",
    benchmark:
        "logs/timing/models/{model}.tsv"
    conda:
        "../envs/cpu.yaml"
    threads: STUDY.threads
    params:
        settings=per_model(STUDY.base_slice),
        job=per_model(STUDY.base_job),
        token_caps=lambda wc, output: STUDY.training_token_caps(wc.model),
    script:
        "../workflow_scripts/base_model.py"


rule train:
    input:
        unpack(train_inputs),
    output:
        model=directory(layout.run_model("{model}", "{run}")),
        metrics=layout.metrics("{model}", "{run}"),
        provenance=layout.train_provenance("{model}", "{run}"),
    log:
        "logs/train/{model}/{run}.log",
    benchmark:
        "logs/timing/train/{model}/{run}.tsv"
    wildcard_constraints:
        run=TRAINED_RUN,
    conda:
        MODEL_ENV
    threads: STUDY.threads
    resources:
        **backend_resources(STUDY, "train"),
    params:
        settings=lambda wc: STUDY.train_slice(STUDY.run(wc.model, wc.run)),
        job=lambda wc: STUDY.train_job(STUDY.run(wc.model, wc.run)),
        # Result-neutral (a resumed run is bit-identical), so it must not rerun finished runs: a function of `output`
        # is a derived param, which Snakemake leaves out of its params rerun trigger.
        checkpoint_every=lambda wc, output: STUDY.training.checkpoint_every,
        # resumable state is not a declared output: Snakemake deletes the outputs of a failed job, and a retry or
        # a Slurm requeue of this job resumes from the checkpoint here (one folder per state key)
        state_dir=lambda wc: layout.train_state(wc.model, wc.run),
        token_caps=lambda wc, output: STUDY.training_token_caps(wc.model),
    script:
        "../workflow_scripts/train.py"


# A verl run's final FSDP checkpoint merged into the Hugging Face directory vLLM scores (dataflex_rl/backends/verl/
# merge.py): a job of its own, on CPUs, so that a failed merge or scoring job never retrains. Only the runs of a
# backend that merges (Backend.merge) ask for it, through the score rule's input.
rule merge:
    input:
        model=layout.run_model("{model}", "{run}"),
        provenance=layout.train_provenance("{model}", "{run}"),
    output:
        directory(layout.merged_model("{model}", "{run}")),
    log:
        "logs/merge/{model}/{run}.log",
    benchmark:
        "logs/timing/merge/{model}/{run}.tsv"
    wildcard_constraints:
        run=TRAINED_RUN,
    conda:
        MODEL_ENV
    resources:
        **backend_resources(STUDY, "merge"),
    params:
        settings=lambda wc: STUDY.train_slice(STUDY.run(wc.model, wc.run)),
    script:
        "../workflow_scripts/merge.py"
