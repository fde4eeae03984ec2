from dataflex_rl.artefacts.atomic import write_json, write_parquet
from dataflex_rl.artefacts.job_log import job_log
from dataflex_rl.corpus.build import build_corpus
from dataflex_rl.corpus.validation_settings import ValidationSettings

with job_log(snakemake.log[0]):
    p = snakemake.params
    corpus, audit = build_corpus(p.sources, p.items_per_domain, p.seed, files=p.files,
                                 settings=ValidationSettings.for_section("corpus", p.validation), quarantine=p.quarantine)
    write_parquet(snakemake.output.corpus, corpus)
    write_json(snakemake.output.audit, audit)
