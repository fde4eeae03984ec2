"""The quarantine gate: a data file may lose at most `data_validation.<section>.max_quarantine_fraction` of its rows.

The data jobs (rule `corpus`, rule `benchmark_items`) quarantine bad rows and count them per file in their audit
(dataflex_rl.corpus.validation); this gate holds those counts to the threshold in a job of its own (rule
`quarantine_gate`). The threshold decides whether the study goes on, never what the data hold, so it is in no job's
slice or data job's params: changing it reruns the gate alone, not the data job and everything trained on its output.
Torch-free.
"""
from __future__ import annotations

from typing import Any, Mapping

from dataflex_rl.artefacts.gates import DATA_FINGERPRINT

class QuarantineGateError(ValueError):
    """A data file lost a larger share of its rows to quarantine than its section's threshold allows."""


def threshold_key(section: str) -> str:
    return f"data_validation.{section}.max_quarantine_fraction"


def quarantine_report(audit: Mapping[str, Any], section: str, max_fraction: float,
                      data_fingerprint: str) -> dict[str, Any]:
    """Per data file of a data job's `audit`: its counts, the share quarantined and whether it is within
    `max_fraction`; `failed` lists the files beyond it. `data_fingerprint`, the fingerprint of the data job's slice,
    tells a report on other data (dataflex_rl.artefacts.gates)."""
    files = {}
    for path, counts in audit["files"].items():
        share = counts["rows_quarantined"] / counts["rows_in"] if counts["rows_in"] else 0.0
        files[path] = {**counts, "quarantined_share": share, "passed": share <= max_fraction}
    return {"threshold": threshold_key(section), "max_quarantine_fraction": max_fraction, "files": files,
            "quarantine": audit["quarantine"]["path"], "failed": [path for path, f in files.items() if not f["passed"]],
            DATA_FINGERPRINT: data_fingerprint}


def check_quarantine(audit: Mapping[str, Any], audit_path: str, section: str, max_fraction: float,
                     data_fingerprint: str) -> dict[str, Any]:
    """The report of `quarantine_report`; raises QuarantineGateError naming each file beyond the threshold, its counts
    per reason, the audit they were read from, the quarantine file to inspect and the fix."""
    report = quarantine_report(audit, section, max_fraction, data_fingerprint)
    if not report["failed"]:
        return report
    key, lines = threshold_key(section), []
    for path in report["failed"]:
        entry = report["files"][path]
        reasons = ", ".join(f"{reason} {n}" for reason, n in entry["quarantined_by_reason"].items())
        lines.append(f"{path}: {entry['rows_quarantined']} of {entry['rows_in']} rows quarantined "
                     f"({entry['quarantined_share']:.1%}) > {key} = {max_fraction} (quarantined: {reasons}); "
                     f"inspect {report['quarantine']}")
    raise QuarantineGateError(
        f"quarantine gate failed ({audit_path}): {len(lines)} file(s) lost more rows than {key} allows:\n  "
        + "\n  ".join(lines) + f"\nFix the rows, or raise {key}: only this gate reruns, the data stay as built")
