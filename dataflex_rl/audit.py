"""The study audit: which cells of the run matrix exist on disk, which are missing, which comparisons lack matched
seeds among the finished runs, and which recorded results were built under another config or other packages.

It reads what exists and never trains or scores. A cell is a (model, method, seed) run — or a model's untrained base —
with its artefacts: weights and metrics (trained runs), one score file per benchmark, and its rows in the records
table. A recorded run is *stale* when its `config_hash` differs from the hash of the current config
(`records.config_hash`, the function the records rule stamps them with) or its `package_versions` differ from the
packages installed now; stale results are named in the report, so they are never reused silently.
"""
from __future__ import annotations

import json
from pathlib import Path
from typing import Any, Mapping

import pandas as pd

from dataflex_rl.atomic import write_json, write_text
from dataflex_rl.config import controls, expand_runs
from dataflex_rl.records import UNTRAINED, config_hash, package_versions, run_id

RECORDS = "results/records/records.parquet"


def _cell_paths(model: str, method: str, seed: int | None, benchmarks: list[str]) -> dict[str, Any]:
    run = run_id(model, method, seed)  # "{model}/{method}/seed{seed}" or "{model}/untrained": the run's directory
    paths: dict[str, Any] = {}
    if seed is not None:
        paths["weights"] = f"results/runs/{run}/weights.pt"
        paths["metrics"] = f"results/runs/{run}/metrics.parquet"
    paths["scores"] = {b: f"results/scores/{run}/{b}.parquet" for b in benchmarks}
    return paths


def _read_records(root: Path) -> pd.DataFrame | None:
    path = root / RECORDS
    if not path.is_file():
        return None
    frame = pd.read_parquet(path)
    for column in ("config_hash", "package_versions"):
        if column not in frame.columns:  # a table written before provenance was recorded
            frame[column] = None
    return frame


def _version_changes(recorded: Any, installed: Mapping[str, str | None]) -> dict[str, list]:
    """{package: [recorded, installed]} for every package whose version differs; all of them if none was recorded."""
    if recorded is None or (isinstance(recorded, float) and pd.isna(recorded)):
        return {name: [None, version] for name, version in installed.items()}
    before = json.loads(recorded)
    return {name: [before.get(name), installed.get(name)] for name in sorted(set(before) | set(installed))
            if before.get(name) != installed.get(name)}


def _provenance(rows: pd.DataFrame, expected_hash: str, installed: Mapping[str, str | None]) -> dict[str, Any]:
    hashes = sorted({h for h in rows["config_hash"] if isinstance(h, str)})
    stale = []
    if hashes != [expected_hash]:
        stale.append("config" if hashes else "config (no config_hash recorded)")
    versions = sorted({v for v in rows["package_versions"] if isinstance(v, str)})
    if len(versions) > 1:  # validate_records refuses this; a hand-edited table may still hold it
        changes = {"(differs between benchmarks)": versions}
    else:
        changes = _version_changes(versions[0] if versions else None, installed)
    if changes:
        stale.append("packages")
    return {"recorded_config_hash": hashes[0] if len(hashes) == 1 else hashes or None,
            "expected_config_hash": expected_hash, "package_changes": changes, "stale": stale}


def _cell(config: Mapping[str, Any], root: Path, records: pd.DataFrame | None, installed: Mapping[str, str | None],
          model: str, method: str, seed: int | None) -> dict[str, Any]:
    benchmarks = list(config["benchmarks"]["names"])
    paths = _cell_paths(model, method, seed, benchmarks)
    present = {key: (root / paths[key]).is_file() for key in ("weights", "metrics") if key in paths}
    scores = {b: (root / p).is_file() for b, p in paths["scores"].items()}
    missing = [key for key, ok in present.items() if not ok] + [f"score:{b}" for b, ok in scores.items() if not ok]
    found = sum(present.values()) + sum(scores.values())
    status = "complete" if not missing else ("missing" if found == 0 else "partial")
    rid = run_id(model, method, seed)
    rows = records[records["run_id"] == rid] if records is not None else pd.DataFrame()
    recorded = sorted(set(rows["benchmark"])) if len(rows) else []
    cell = {"model": model, "method": method, "seed": seed, "run_id": rid, "status": status, "missing": missing,
            "recorded_benchmarks": len(recorded),
            "unrecorded_benchmarks": [b for b in benchmarks if b not in recorded]}
    cell["provenance"] = _provenance(rows, config_hash(config, model, method), installed) if len(rows) else None
    return cell


def _comparisons(config: Mapping[str, Any], cells: list[dict]) -> list[dict[str, Any]]:
    finished: dict[tuple[str, str], set[int]] = {}
    for cell in cells:
        if cell["seed"] is not None and cell["status"] == "complete":
            finished.setdefault((cell["model"], cell["method"]), set()).add(cell["seed"])
    comparisons = []
    for model in config["models"]:
        for method, control in controls(config).items():
            ours, theirs = finished.get((model, method), set()), finished.get((model, control), set())
            comparisons.append({
                "model": model, "method": method, "control": control, "matched_seeds": sorted(ours & theirs),
                "method_only_seeds": sorted(ours - theirs), "control_only_seeds": sorted(theirs - ours),
                "matched": ours == theirs,
            })
    return comparisons


def audit_study(config: Mapping[str, Any], root: str | Path = ".", installed: str | None = None) -> dict[str, Any]:
    """The audit report of `config`'s matrix under `root` (the workflow's working directory). `installed`: the
    `records.package_versions()` JSON to compare records with (default: this environment's)."""
    root = Path(root)
    installed_versions = json.loads(installed if installed is not None else package_versions())
    records = _read_records(root)
    cells = [_cell(config, root, records, installed_versions, model, UNTRAINED, None) for model in config["models"]]
    cells += [_cell(config, root, records, installed_versions, r.model, r.method, r.seed) for r in expand_runs(config)]
    known = {cell["run_id"] for cell in cells}
    extra = sorted(set(records["run_id"]) - known) if records is not None else []
    comparisons = _comparisons(config, cells)
    stale = [c["run_id"] for c in cells if c["provenance"] and c["provenance"]["stale"]]
    counts = {status: sum(c["status"] == status for c in cells) for status in ("complete", "partial", "missing")}
    return {
        "study": config["study"],
        "records_file": RECORDS if records is not None else None,
        "installed_packages": installed_versions,
        "counts": {**counts, "cells": len(cells), "stale": len(stale),
                   "unmatched_comparisons": sum(not c["matched"] for c in comparisons)},
        "cells": cells,
        "comparisons": comparisons,
        "stale_runs": stale,
        "records_not_in_matrix": extra,
    }


def _seeds(seeds: list[int]) -> str:
    return ", ".join(map(str, seeds)) or "—"


def render_markdown(report: Mapping[str, Any]) -> str:
    counts = report["counts"]
    lines = [
        f"# Audit of study `{report['study']}`", "",
        f"{counts['cells']} cells (runs and untrained bases): {counts['complete']} complete, {counts['partial']} "
        f"partial, {counts['missing']} missing; {counts['stale']} stale; {counts['unmatched_comparisons']} "
        f"comparison(s) with unmatched seeds. Records: {report['records_file'] or 'none yet'}.", "",
        "## Cells", "", "| run | status | missing | recorded benchmarks | stale |", "|---|---|---|---|---|",
    ]
    for cell in report["cells"]:
        missing = ", ".join(cell["missing"][:4]) + (" …" if len(cell["missing"]) > 4 else "")
        stale = ", ".join(cell["provenance"]["stale"]) if cell["provenance"] else "not recorded"
        lines.append(f"| {cell['run_id']} | {cell['status']} | {missing or '—'} | {cell['recorded_benchmarks']} | "
                     f"{stale or '—'} |")
    lines += ["", "## Comparisons (finished runs)", "",
              "| model | method | control | matched seeds | method only | control only |", "|---|---|---|---|---|---|"]
    for c in report["comparisons"]:
        lines.append(f"| {c['model']} | {c['method']} | {c['control']} | {_seeds(c['matched_seeds'])} | "
                     f"{_seeds(c['method_only_seeds'])} | {_seeds(c['control_only_seeds'])} |")
    lines += ["", "## Stale results", ""]
    for cell in report["cells"]:
        provenance = cell["provenance"]
        if provenance and provenance["stale"]:
            detail = []
            if any(s.startswith("config") for s in provenance["stale"]):
                detail.append(f"config_hash {provenance['recorded_config_hash']} ≠ current "
                              f"{provenance['expected_config_hash']}")
            if provenance["package_changes"]:
                detail.append("packages " + ", ".join(f"{name} {old} → {new}" for name, (old, new)
                                                      in provenance["package_changes"].items()))
            lines.append(f"- {cell['run_id']}: " + "; ".join(detail))
    if not report["stale_runs"]:
        lines.append("none")
    if report["records_not_in_matrix"]:
        lines += ["", "## Records of runs outside the current matrix", "",
                  *[f"- {rid}" for rid in report["records_not_in_matrix"]]]
    return "\n".join(lines) + "\n"


def write_audit(report: Mapping[str, Any], json_path: str | Path, md_path: str | Path) -> None:
    """Write the report as JSON and Markdown, each atomically."""
    write_json(json_path, report)
    write_text(md_path, render_markdown(report))
