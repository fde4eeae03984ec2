from dataflex_rl.report.audit import audit_study, write_audit
from dataflex_rl.artefacts.job_log import job_log

with job_log(snakemake.log[0]):
    write_audit(audit_study(snakemake.params.expected), snakemake.params.json, snakemake.params.md)
