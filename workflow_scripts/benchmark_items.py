from dataflex_rl.artefacts.atomic import write_json, write_parquet
from dataflex_rl.item_sources.loaders import local_source
from dataflex_rl.artefacts.job_log import job_log
from dataflex_rl.corpus.build import benchmark_items
from dataflex_rl.corpus.validation import validated_benchmark_items
from dataflex_rl.corpus.validation_settings import ValidationSettings

with job_log(snakemake.log[0]):
    path = local_source(snakemake.params.path, snakemake.params.hub_fallback)
    items, audit = validated_benchmark_items(
        lambda path: benchmark_items(
            snakemake.wildcards.benchmark,
            n_items=snakemake.params.n_items,
            seed=snakemake.params.seed,
            path=path,
            hub_fallback=snakemake.params.hub_fallback,
        ),
        snakemake.wildcards.benchmark,
        path,
        ValidationSettings.for_section("benchmarks", snakemake.params.validation),
        snakemake.params.quarantine,
    )
    write_parquet(snakemake.output.parquet, items)
    write_json(snakemake.output.audit, audit)
