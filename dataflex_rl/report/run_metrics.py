"""The runs' per-step metrics as the training-curves figure and the selection tables read them.

Each file is checked against its run's train provenance record before it is read — the check the audit makes
(dataflex_rl.artefacts.provenance.damage), restricted to the metrics so that a run's model is not hashed — so an edited
or damaged metrics file is refused with its path instead of plotted.
"""
from __future__ import annotations

from typing import Any, Iterable, Mapping

import pandas as pd

from dataflex_rl.artefacts.provenance import verified_input


def read_run_metrics(runs: Iterable[Mapping[str, Any]]) -> pd.DataFrame:
    """The metrics of `runs` ({path, provenance, model, method, seed} each) stacked, with model, method and seed
    columns; raises DamagedArtefactError naming any file whose bytes are not those its train job recorded."""
    frames = []
    for run in runs:
        verified_input(run["path"], run["provenance"], whole_record=False)
        frames.append(pd.read_parquet(run["path"]).assign(model=run["model"], method=run["method"], seed=run["seed"]))
    return pd.concat(frames, ignore_index=True)
