from dataflex_rl.artefacts.job_log import job_log
from dataflex_rl.artefacts.provenance import plain_input, write_provenance
from dataflex_rl.records.imported import load_records
from dataflex_rl.report.regenerate import regenerate

with job_log(snakemake.log[0]):
    regenerate(
        load_records(snakemake.input[0]),
        snakemake.params.out_dir,
        controls=snakemake.params.controls,
        confidence=snakemake.params.confidence,
        bootstrap_resamples=snakemake.params.bootstrap_resamples,
        max_subsets=snakemake.params.max_subsets,
        seed_counts=snakemake.params.seed_counts,
        pairing=snakemake.params.pairing,
        max_cut_share=snakemake.params.max_cut_share,
        equivalence_margin=snakemake.params.equivalence_margin,
        families=snakemake.params.families,
    )
    write_provenance(snakemake.output.provenance, snakemake.params.settings,
                     [*snakemake.output.tables, *snakemake.output.figures],
                     inputs={"records": plain_input(snakemake.input[0])})
