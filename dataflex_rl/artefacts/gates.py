"""Which gate reports a job still waits for (rules/common.smk: `pending_gates`).

A gate (a quarantine gate, a verifier calibration, the parse gate) passes or stops the DAG and changes no artefact. A
job it guards therefore takes its report as an input only while the job must wait for it:
- a report not written yet, while the job has not written its own outputs either: a fresh study trains nothing before
  its gates pass;
- a report written for other data than the study builds now (its `data_fingerprint` is not the fingerprint of the
  data job's slice): the data are rebuilt, and the jobs that read them wait until the gate has counted the new rows.
Otherwise the report is no input. Rerunning a gate with another threshold must rebuild nothing, and Snakemake would
also skip its own rerun checks of every job downstream of a rerun gate. A lost report of a finished job is no input
either: Snakemake reruns every job downstream of an input it has to rebuild, so a deleted calibration report would
retrain and rescore the study although it comes back the same. Every gate is a target of `all`, so a changed threshold
or a lost report reruns that gate alone. Torch-free.
"""
from __future__ import annotations

import json
from pathlib import Path
from typing import Iterable, Mapping

# The key of a gate report that names the data it was written for.
DATA_FINGERPRINT = "data_fingerprint"


def written_for_other_data(report: str, data_fingerprint: str | None) -> bool:
    """Whether the gate report at `report` counted other data than those with `data_fingerprint` (None: a gate whose
    report names no data). An unreadable report counts as one on other data."""
    if data_fingerprint is None or not Path(report).is_file():
        return False
    try:
        return json.loads(Path(report).read_text()).get(DATA_FINGERPRINT) != data_fingerprint
    except (ValueError, AttributeError):
        return True


def pending(gates: Mapping[str, str | None], outputs: Iterable[str]) -> list[str]:
    """The reports among `gates` ({report path: the fingerprint of the data it must have counted, or None}) that a job
    writing `outputs` waits for."""
    stale = [path for path, data in gates.items() if written_for_other_data(path, data)]
    missing = [path for path in gates if not Path(path).exists()]
    if missing and all(Path(path).exists() for path in outputs):
        missing = []
    return stale + missing
