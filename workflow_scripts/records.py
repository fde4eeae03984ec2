from dataflex_rl.atomic import write_parquet
from dataflex_rl.job_log import job_log
from dataflex_rl.records import PROVENANCE_PACKAGES, collect_records, package_versions

with job_log(snakemake.log[0]):
    # A workflow parsed before the `packages` param existed still runs this script; it gets the default list.
    packages = getattr(snakemake.params, "packages", PROVENANCE_PACKAGES)
    records = collect_records(snakemake.params.sources, steps=snakemake.params.steps,
                              versions=package_versions(packages), min_parse_rate=snakemake.params.min_parse_rate)
    write_parquet(snakemake.output[0], records)
