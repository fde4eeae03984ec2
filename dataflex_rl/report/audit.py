"""The study audit: which cells of the run matrix exist on disk, which are missing or damaged, which comparisons lack
matched seeds among the finished runs, and which artefacts and records were built under other settings or packages.

It reads what exists and never trains or scores. A cell is a (model, method, seed) run — or a model's untrained base
— with its artefacts: the base model (embedded backend), the training outputs, one score per benchmark, each with the
provenance record its job wrote (dataflex_rl.artefacts.provenance). The expectations come from the current study
(`Study.expected_artefacts`). An artefact is
  *damaged*  when a file of it is missing or its bytes differ from its record's checksum;
  *stale*    when its recorded fingerprint differs from the fingerprint of the slice the current study expects; the
             report names every config key whose value differs (recorded → current). Also when a file its job read
             (the items a score was computed on, the corpus a run trained on) holds other bytes now than the sha256
             its record holds (dataflex_rl.report.audit_inputs); the report names the file and both digests.
A record row is stale when its fingerprint is not that of the score on disk for the current study, or its
`package_versions` differ from the packages installed now. Stale results are named, so they are never reused silently.
What a run's weights were trained with that no setting fixes (the provenance `runtime` of a trained run or a built
base: the embedded thread count, verl's attention kernel) is reported beside, value by value, since runs that differ in
it are not bit-reproducible from one another.

The records table and the tables are shared outputs: another config run in the same folder (a campaign overlay)
rebuilds them for its own matrix while every cell of this study stays complete. The report's headline says so first:
the records were built from another config when they hold runs outside this study's matrix or lack any of its runs
(this config's records job records every run), and the tables when their provenance record names other settings or
other records than the records file holds now.

A file it cannot read (a truncated records table, a provenance record that is not one) is reported as such, and the
report is written all the same.

The headline also names every benchmark whose runs were scored against different item sets, with the runs of each set
(dataflex_rl.report.audit_inputs.item_sets): one study, one benchmark, two sets of items is never a fair comparison. The
reports and tables outside the cells that record what they read (`readers`: decontamination, gates, regime audits,
solve rates, records) are listed where an input's file holds other bytes now.
"""
from __future__ import annotations

import json
from pathlib import Path
from typing import Any, Mapping

import pandas as pd

from dataflex_rl.artefacts.atomic import write_json, write_text
from dataflex_rl.report.audit_inputs import (CurrentDigests, changed_inputs, changed_line, item_set_lines, item_sets,
                                     readers_changed_inputs)
from dataflex_rl.artefacts.provenance import DamagedArtefactError, damage, file_digest, fingerprint, read_provenance
from dataflex_rl.records.package_versions import package_versions
from dataflex_rl.records.imported import load_records
from dataflex_rl.report.outputs import table_paths

_MISSING = "(absent)"


def changed_keys(recorded: Mapping[str, Any], expected: Mapping[str, Any]) -> dict[str, list]:
    """{config key: [recorded value, current value]} for every key whose value differs; absent keys as '(absent)'."""
    return {key: [recorded.get(key, _MISSING), expected.get(key, _MISSING)]
            for key in sorted(set(recorded) | set(expected))
            if recorded.get(key, _MISSING) != expected.get(key, _MISSING)}


def _artefact(root: Path, artefact: Mapping[str, Any], current: CurrentDigests) -> dict[str, Any]:
    """The state of one artefact: missing, damaged, stale (with the changed keys, or the inputs whose files changed
    since its job read them) or current."""
    found = [(root / path).exists() for path in artefact["files"]]
    record_path = root / artefact["provenance"]
    entry = {"kind": artefact["kind"], "benchmark": artefact.get("benchmark"), "provenance": artefact["provenance"],
             "expected": fingerprint(artefact["settings"]), "recorded": None, "changed": {}, "damage": [],
             "runtime": {}, "inputs": {}, "changed_inputs": []}
    if not any(found) and not record_path.exists():
        return {**entry, "state": "missing"}
    try:
        record = read_provenance(record_path)
        entry["damage"] = damage(record, record_path, current.found)
    except DamagedArtefactError as error:
        return {**entry, "state": "damaged", "damage": [str(error)]}
    entry["recorded"], entry["runtime"] = record["fingerprint"], record.get("runtime", {})
    entry["inputs"] = record.get("inputs", {})
    if not all(found) or entry["damage"]:
        return {**entry, "state": "damaged"}
    entry["changed_inputs"] = changed_inputs(entry["inputs"], current)
    if record["fingerprint"] != entry["expected"]:
        return {**entry, "state": "stale", "changed": changed_keys(record["settings"], artefact["settings"])}
    return {**entry, "state": "stale" if entry["changed_inputs"] else "current"}


def _version_changes(recorded: Any, installed: Mapping[str, str | None]) -> dict[str, list]:
    """{package: [recorded, installed]} for every package whose version differs; all of them if none was recorded."""
    if recorded is None or (isinstance(recorded, float) and pd.isna(recorded)):
        return {name: [None, version] for name, version in installed.items()}
    before = json.loads(recorded)
    return {name: [before.get(name), installed.get(name)] for name in sorted(set(before) | set(installed))
            if before.get(name) != installed.get(name)}


def _records_state(rows: pd.DataFrame, artefacts: list[dict], installed: Mapping[str, str | None]) -> dict[str, Any]:
    """Which of a cell's record rows carry another fingerprint than the current study's score, and how their
    packages differ from the ones installed now."""
    expected = {a["benchmark"]: a["expected"] for a in artefacts if a["benchmark"]}
    mismatched = sorted(b for b, fp in zip(rows["benchmark"], rows["fingerprint"]) if expected.get(b) != fp)
    versions = sorted({v for v in rows["package_versions"] if isinstance(v, str)})
    if len(versions) > 1:  # validate_records refuses this; a hand-edited table may still hold it
        changes = {"(differs between benchmarks)": versions}
    else:
        changes = _version_changes(versions[0] if versions else None, installed)
    return {"fingerprint_mismatch": mismatched, "package_changes": changes}


def _cell(root: Path, cell: Mapping[str, Any], records: pd.DataFrame | None,
          installed: Mapping[str, str | None], current: CurrentDigests) -> dict[str, Any]:
    artefacts = [_artefact(root, a, current) for a in cell["artefacts"]]
    states = [a["state"] for a in artefacts]
    status = ("complete" if all(s in ("current", "stale") for s in states)
              else "missing" if all(s == "missing" for s in states) else "partial")
    rows = records[records["run_id"] == cell["run_id"]] if records is not None else pd.DataFrame()
    recorded = sorted(set(rows["benchmark"])) if len(rows) else []
    record_state = _records_state(rows, artefacts, installed) if len(rows) else None
    stale = sorted({a["kind"] for a in artefacts if a["state"] == "stale"})
    if record_state and record_state["fingerprint_mismatch"]:
        stale.append("records")
    if record_state and record_state["package_changes"]:
        stale.append("packages")
    changed: dict[str, list] = {}
    for artefact in artefacts:
        changed.update(artefact["changed"])
    return {"model": cell["model"], "method": cell["method"], "seed": cell["seed"], "run_id": cell["run_id"],
            "status": status, "missing": [a["kind"] for a in artefacts if a["state"] == "missing"],
            "changed_inputs": [{"kind": a["kind"], **change} for a in artefacts for change in a["changed_inputs"]],
            "damaged": [line for a in artefacts for line in a["damage"]], "stale": stale, "changed_keys": changed,
            "artefacts": artefacts, "recorded_benchmarks": len(recorded),
            "runtime": next((a["runtime"] for a in artefacts if a["kind"] in ("base model", "training")), {}),
            "unrecorded_benchmarks": [b for b in cell["benchmarks"] if b not in recorded], "records": record_state}


def _comparisons(expected: Mapping[str, Any], cells: list[dict]) -> list[dict[str, Any]]:
    finished: dict[tuple[str, str], set[int]] = {}
    for cell in cells:
        if cell["seed"] is not None and cell["status"] == "complete":
            finished.setdefault((cell["model"], cell["method"]), set()).add(cell["seed"])
    comparisons = []
    for model, methods in expected["cell_methods"].items():
        for method, control in expected["controls"].items():
            if method not in methods or control not in methods:
                continue
            ours, theirs = finished.get((model, method), set()), finished.get((model, control), set())
            comparisons.append({
                "model": model, "method": method, "control": control, "matched_seeds": sorted(ours & theirs),
                "method_only_seeds": sorted(ours - theirs), "control_only_seeds": sorted(theirs - ours),
                "matched": ours == theirs,
            })
    return comparisons


def _study_cells(expected: Mapping[str, Any], cells: list[dict]) -> list[dict[str, Any]]:
    """Completeness per study cell (a campaign's model, regime and step budget): its trained runs by status."""
    rows = []
    for name, campaign in expected["cell_campaigns"].items():
        runs = [c for c in cells if c["model"] == name and c["seed"] is not None]
        rows.append({"cell": name, "campaign": campaign, "runs": len(runs),
                     **{status: sum(c["status"] == status for c in runs) for status in ("complete", "partial",
                                                                                          "missing")}})
    return rows


def _records_origin(records_file: str, cells: list[dict], outside: list[str]) -> dict[str, Any] | None:
    """How the records table differs from the one this config's records job writes (every run of the matrix, no
    other), or None when it does not."""
    covered = sum(not cell["unrecorded_benchmarks"] for cell in cells)
    if not outside and covered == len(cells):
        return None
    return {"file": records_file, "runs_outside_matrix": len(outside), "runs_covered": covered, "runs": len(cells)}


def _tables_origin(root: Path, tables: Mapping[str, Any], records_foreign: bool) -> dict[str, Any] | None:
    """Why the study's tables were not built by this config from this config's records, or None: no provenance
    record, other settings (the keys), other records than the file holds now, the file's records when they are
    another config's (`records_foreign`), or files changed since."""
    record_path = root / tables["provenance"]
    if not record_path.exists():
        if any(Path(path).is_file() for path in table_paths(root / tables["dir"])):
            return {"dir": tables["dir"], "problems": [f"no provenance record ({tables['provenance']}): which config "
                                                       "and records built them is unknown"]}
        return None
    try:
        record = read_provenance(record_path)
    except DamagedArtefactError as error:
        return {"dir": tables["dir"], "problems": [str(error)]}
    problems = []
    if record["fingerprint"] != fingerprint(tables["settings"]):
        problems.append("built with other settings: " + "; ".join(
            f"{key}: {_value(old)} → {_value(new)}"
            for key, (old, new) in changed_keys(record["settings"], tables["settings"]).items()))
    records = root / tables["records"]
    read = record.get("inputs", {}).get("records", {}).get("sha256")
    if read != (file_digest(records) if records.is_file() else None):
        problems.append(f"built from other records than {tables['records']} holds now")
    elif records_foreign:
        problems.append(f"built from the records in {tables['records']}, which are another config's")
    problems += damage(record, record_path)
    return {"dir": tables["dir"], "problems": problems} if problems else None


def audit_study(expected: Mapping[str, Any], root: str | Path = ".", installed: str | None = None) -> dict[str, Any]:
    """The audit report of the study whose expectations are `expected` (`Study.expected_artefacts()`) under `root`
    (the workflow's working directory). `installed`: the `package_versions.package_versions()` JSON to compare records with
    (default: this environment's)."""
    root = Path(root)
    installed_versions = json.loads(installed if installed is not None else package_versions())
    records, unreadable = _records(root, expected["records"])
    current = CurrentDigests(root)
    cells = [_cell(root, cell, records, installed_versions, current) for cell in expected["cells"]]
    known = {cell["run_id"] for cell in cells}
    extra = sorted(set(records["run_id"]) - known) if records is not None else []
    comparisons = _comparisons(expected, cells)
    stale = [c["run_id"] for c in cells if c["stale"]]
    damaged = [c["run_id"] for c in cells if c["damaged"]]
    counts = {status: sum(c["status"] == status for c in cells) for status in ("complete", "partial", "missing")}
    records_origin = _records_origin(expected["records"], cells, extra) if records is not None else None
    readers = [path for path in expected["readers"] if not (unreadable and path == expected["records"])]
    readers_changed, readers_unreadable = readers_changed_inputs(root, readers, current)
    return {
        "study": expected["study"],
        "records_file": expected["records"] if records is not None else None,
        "installed_packages": installed_versions,
        "counts": {**counts, "cells": len(cells), "stale": len(stale), "damaged": len(damaged),
                   "unmatched_comparisons": sum(not c["matched"] for c in comparisons)},
        "study_cells": _study_cells(expected, cells),
        "cells": cells,
        "comparisons": comparisons,
        "stale_runs": stale,
        "damaged_runs": damaged,
        "records_not_in_matrix": extra,
        "built_elsewhere": {"records": records_origin,
                            "tables": _tables_origin(root, expected["tables"], records_origin is not None)},
        "item_sets": item_sets(({"benchmark": a["benchmark"], "run_id": c["run_id"], "inputs": a["inputs"]}
                                for c in cells for a in c["artefacts"] if a["benchmark"]), current),
        "inputs_changed_since_read": readers_changed,
        "unreadable": unreadable + readers_unreadable,
    }


def _records(root: Path, path: str) -> tuple[pd.DataFrame | None, list[str]]:
    """The study's records table, or None when there is none yet or it cannot be read; then the second item names it
    and why (the report is written all the same, its cells without records)."""
    if not (root / path).is_file():
        return None, []
    try:
        return load_records(root / path), []
    except (OSError, ValueError) as error:  # pyarrow's ArrowInvalid is a ValueError; so is a failed validation
        return None, [f"{path}: {error}; the next `snakemake` run rebuilds it"]


def _seeds(seeds: list[int]) -> str:
    return ", ".join(map(str, seeds)) or "—"


def _value(value: Any) -> str:
    return json.dumps(value) if not isinstance(value, str) or value == _MISSING else repr(value)


def _stale_detail(cell: Mapping[str, Any]) -> str:
    detail = []
    if cell["changed_keys"]:
        detail.append("; ".join(f"{key}: {_value(old)} → {_value(new)}"
                                for key, (old, new) in cell["changed_keys"].items()))
    kinds = [a["kind"] for a in cell["artefacts"] if a["state"] == "stale" and a["recorded"] != a["expected"]]
    if kinds:
        detail.append(f"built with other settings: {', '.join(sorted(kinds))}")
    detail += [changed_line(change["kind"], change) for change in cell["changed_inputs"]]
    if "records" in cell["stale"]:
        detail.append("records of " + ", ".join(cell["records"]["fingerprint_mismatch"])
                      + " carry fingerprints other than the current study's")
    if "packages" in cell["stale"]:
        detail.append("packages " + ", ".join(f"{name} {old} → {new}" for name, (old, new)
                                              in cell["records"]["package_changes"].items()))
    return "; ".join(detail)


def _runtime_lines(cells: list[dict]) -> list[str]:
    """One line per runtime key of the cells' weights: each value with its number of runs, most runs first, naming the
    runs of every value but that first one."""
    runs: dict[str, dict[str, list[str]]] = {}
    for cell in cells:
        for key, value in cell["runtime"].items():
            runs.setdefault(key, {}).setdefault(str(value), []).append(cell["run_id"])
    lines = []
    for key, by_value in sorted(runs.items()):
        ordered = sorted(by_value.items(), key=lambda item: (-len(item[1]), item[0]))
        parts = [f"{value} ({len(ids)} run{'s' if len(ids) > 1 else ''}" + ("" if i == 0 else ": " + ", ".join(ids))
                 + ")" for i, (value, ids) in enumerate(ordered)]
        lines.append(f"- {key}: " + "; ".join(parts))
    return lines


def _headline(built_elsewhere: Mapping[str, Any], split: list[dict[str, Any]]) -> list[str]:
    """The lines that come before the counts: which benchmarks were scored against several item sets, and which
    shared outputs another config built."""
    split_lines = ["**Scored against different items — these runs are not comparable on these benchmarks.** Rescore "
                   "the runs whose items are not those on disk now (`snakemake --cores N -f <their score files>`), "
                   "or put back the items they were scored on.", "", *item_set_lines(split), ""] if split else []
    records, tables = built_elsewhere["records"], built_elsewhere["tables"]
    lines = []
    if records:
        lines.append(f"- `{records['file']}` was built from another config: it holds the records of "
                     f"{records['runs_outside_matrix']} run(s) outside this study's matrix and covers "
                     f"{records['runs_covered']} of its {records['runs']} runs.")
    if tables:
        lines.append(f"- The tables in `{tables['dir']}` are not this config's: {'; '.join(tables['problems'])}.")
    if not lines:
        return split_lines
    return [*split_lines, "**Built from another config — not this study's results.** Rebuild them with this config "
            "(`snakemake --cores N --configfile <this config>`) before reading them.", "", *lines, ""]


def render_markdown(report: Mapping[str, Any]) -> str:
    counts = report["counts"]
    lines = [
        f"# Audit of study `{report['study']}`", "",
        *_headline(report["built_elsewhere"], report["item_sets"]),
        f"{counts['cells']} cells (runs and untrained bases): {counts['complete']} complete, {counts['partial']} "
        f"partial, {counts['missing']} missing; {counts['stale']} stale; {counts['damaged']} damaged; "
        f"{counts['unmatched_comparisons']} comparison(s) with unmatched seeds. "
        f"Records: {report['records_file'] or ('unreadable' if report['unreadable'] else 'none yet')}.", "",
        *(["## Unreadable artefacts", "", *[f"- {line}" for line in report["unreadable"]], ""]
          if report["unreadable"] else []),
        "## Study cells (trained runs)", "", "| cell | campaign | runs | complete | partial | missing |",
        "|---|---|---|---|---|---|",
        *[f"| {c['cell']} | {c['campaign'] or '—'} | {c['runs']} | {c['complete']} | {c['partial']} | "
          f"{c['missing']} |" for c in report["study_cells"]], "",
        "## Cells", "", "| run | status | missing | recorded benchmarks | stale |", "|---|---|---|---|---|",
    ]
    for cell in report["cells"]:
        missing = ", ".join(cell["missing"][:4]) + (" …" if len(cell["missing"]) > 4 else "")
        lines.append(f"| {cell['run_id']} | {cell['status']} | {missing or '—'} | {cell['recorded_benchmarks']} | "
                     f"{', '.join(cell['stale']) or '—'} |")
    lines += ["", "## Comparisons (finished runs)", "",
              "| model | method | control | matched seeds | method only | control only |", "|---|---|---|---|---|---|"]
    for c in report["comparisons"]:
        lines.append(f"| {c['model']} | {c['method']} | {c['control']} | {_seeds(c['matched_seeds'])} | "
                     f"{_seeds(c['method_only_seeds'])} | {_seeds(c['control_only_seeds'])} |")
    lines += ["", "## Stale results", ""]
    lines += [f"- {cell['run_id']}: {_stale_detail(cell)}" for cell in report["cells"] if cell["stale"]]
    if not report["stale_runs"]:
        lines.append("none")
    if report["inputs_changed_since_read"]:
        lines += ["", "## Inputs changed since they were read (reports and tables)", "",
                  *[f"- {changed_line(change['reader'], change)}" for change in report["inputs_changed_since_read"]]]
    lines += ["", "## Damaged artefacts", ""]
    lines += [f"- {line}" for cell in report["cells"] for line in cell["damaged"]] or ["none"]
    runtime = _runtime_lines(report["cells"])
    if runtime:
        lines += ["", "## Training runtime (recorded in provenance, fixed by no setting)", "", *runtime]
    if report["records_not_in_matrix"]:
        lines += ["", "## Records of runs outside the current matrix", "",
                  *[f"- {rid}" for rid in report["records_not_in_matrix"]]]
    return "\n".join(lines) + "\n"


def write_audit(report: Mapping[str, Any], json_path: str | Path, md_path: str | Path) -> None:
    """Write the report as JSON and Markdown, each atomically."""
    write_json(json_path, report)
    write_text(md_path, render_markdown(report))
