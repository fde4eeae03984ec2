# `snakemake audit --cores 1`, at any time: which (model, method, seed) cells exist on disk, which are missing, which
# comparisons lack matched seeds among the finished runs, and which recorded results are stale (another config hash or
# other packages than now) — dataflex_rl/report/audit.py. It reads what exists and never trains or scores: the rule has
# no inputs, and its reports are params rather than declared outputs, so Snakemake runs it afresh whenever it is a
# target (a rule without outputs is always run); it is not part of `all`.
localrules:
    audit,


rule audit:
    log:
        "logs/audit/audit.log",
    conda:
        "../envs/stats.yaml"
    params:
        # what every artefact of the current study should have been built with (a function: computed only when the
        # audit is asked for)
        expected=lambda wc: STUDY.expected_artefacts(),
        json=layout.AUDIT_JSON,
        md=layout.AUDIT_MD,
    script:
        "../workflow_scripts/audit.py"
