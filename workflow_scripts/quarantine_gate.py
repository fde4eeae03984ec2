import json
from pathlib import Path

from dataflex_rl.artefacts.atomic import write_json
from dataflex_rl.artefacts.job_log import job_log
from dataflex_rl.corpus.quarantine_gate import check_quarantine

with job_log(snakemake.log[0]):
    audit = json.loads(Path(snakemake.input.audit).read_text())
    report = check_quarantine(audit, snakemake.input.audit, snakemake.params.section, snakemake.params.max_fraction,
                              snakemake.params.data_fingerprint)
    write_json(snakemake.output[0], report)
