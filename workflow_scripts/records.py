from dataflex_rl.artefacts.atomic import write_parquet
from dataflex_rl.artefacts.job_log import job_log
from dataflex_rl.records.package_versions import package_versions
from dataflex_rl.artefacts.provenance import inputs_metadata
from dataflex_rl.records.run_records import collect_records

with job_log(snakemake.log[0]):
    scores = {}
    records = collect_records(snakemake.params.sources, versions=package_versions(snakemake.params.packages),
                              min_parse_rate=snakemake.params.min_parse_rate, inputs=scores)
    write_parquet(snakemake.output[0], records, metadata=inputs_metadata(scores))
