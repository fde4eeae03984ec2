"""What the audit reads in the inputs the study's jobs recorded ({role: {path, sha256}},
dataflex_rl.artefacts.provenance).

Two findings, both about content rather than settings, which no fingerprint can show:
  *changed inputs*  an input whose recorded sha256 is not that of the file on disk now: the artefact was built from
                    other bytes than the study holds (a benchmark parquet replaced after runs were scored, under an
                    older mtime that replans nothing);
  *item sets*       a benchmark whose runs were scored against different items (their score records' `items`
                    digests differ), so its scores are not comparable across those runs.
Each file on disk is hashed once per audit. Directory inputs (model weights) are not rehashed here: the records of
the jobs that built them check their files.
"""
from __future__ import annotations

import json
from pathlib import Path
from typing import Any, Iterable, Mapping

from dataflex_rl.artefacts.provenance import file_digest, parquet_inputs

ITEMS_ROLE = "items"


class CurrentDigests:
    """The sha256 of files on disk now, by path as recorded (relative to the study's working directory `root`), each
    file hashed at most once per audit: `found` ({resolved path: digest}) is shared with the damage checks
    (dataflex_rl.artefacts.provenance.damage), so a score file the audit checked against its record is not read
    again."""

    def __init__(self, root: str | Path) -> None:
        self.root = Path(root)
        self.found: dict[Path, str] = {}

    def __call__(self, path: str) -> str | None:
        """None where there is no regular file at `path` (absent, or a directory)."""
        file = self.root / path
        if not file.is_file():
            return None
        key = file.resolve()
        if key not in self.found:
            self.found[key] = file_digest(file)
        return self.found[key]


def changed_inputs(inputs: Mapping[str, Mapping[str, str]], current: CurrentDigests) -> list[dict[str, str]]:
    """[{role, path, recorded, now}] for every recorded input that is a file on disk whose bytes differ now (an input
    that is gone is not reported here: the job that reads it next rebuilds or refuses it)."""
    changed = []
    for role, entry in inputs.items():
        now = current(entry["path"])
        if now is not None and now != entry.get("sha256"):
            changed.append({"role": role, "path": entry["path"], "recorded": entry.get("sha256"), "now": now})
    return changed


def recorded_inputs(path: Path) -> dict[str, dict[str, str]]:
    """The inputs a report (JSON, its `inputs` key) or a table (parquet metadata) recorded; {} when it recorded none.
    Raises OSError or ValueError for a file that cannot be read."""
    if path.suffix == ".parquet":
        return parquet_inputs(path)
    report = json.loads(path.read_text())
    return report.get("inputs", {}) if isinstance(report, dict) else {}


def readers_changed_inputs(root: Path, readers: Iterable[str],
                           current: CurrentDigests) -> tuple[list[dict[str, str]], list[str]]:
    """[{reader, role, path, recorded, now}] for every input of the `readers` (paths relative to `root`; absent ones
    skipped) whose file holds other bytes now; and one line per reader that cannot be read."""
    changed, unreadable = [], []
    for reader in readers:
        if not (root / reader).is_file():
            continue
        try:
            inputs = recorded_inputs(root / reader)
        except (OSError, ValueError) as error:
            unreadable.append(f"{reader}: {error}; the next `snakemake` run rebuilds it")
            continue
        changed += [{"reader": reader, **change} for change in changed_inputs(inputs, current)]
    return changed, unreadable


def item_sets(scores: Iterable[Mapping[str, Any]], current: CurrentDigests) -> list[dict[str, Any]]:
    """Every benchmark whose scores were computed against more than one item set. `scores`: {benchmark, run_id,
    inputs} of each score record read. Per benchmark: its item file's path and one entry per set — {sha256, runs,
    on_disk: whether the file holds these items now} — most runs first."""
    runs: dict[str, dict[str, list[str]]] = {}
    paths: dict[str, str] = {}
    for score in scores:
        items = score["inputs"].get(ITEMS_ROLE)
        if items and items.get("sha256"):
            runs.setdefault(score["benchmark"], {}).setdefault(items["sha256"], []).append(score["run_id"])
            paths.setdefault(score["benchmark"], items["path"])
    split = []
    for benchmark, by_digest in runs.items():
        if len(by_digest) < 2:
            continue
        now = current(paths[benchmark])
        sets = [{"sha256": digest, "runs": ids, "on_disk": digest == now}
                for digest, ids in sorted(by_digest.items(), key=lambda item: (-len(item[1]), item[0]))]
        split.append({"benchmark": benchmark, "path": paths[benchmark], "sets": sets})
    return split


def short(digest: str | None) -> str:
    """A digest as the report prints it."""
    return f"{digest[:12]}…" if digest else "(none)"


def changed_line(reader: str, change: Mapping[str, str]) -> str:
    """One report line: what read which input (its role, unless that is its path: a score the records read) as which
    digest, and the digest its file has now."""
    role = "" if change["role"] == change["path"] else f"{change['role']} "
    return (f"{reader} read {role}`{change['path']}` as sha256 {short(change['recorded'])}, which holds "
            f"{short(change['now'])} now")


def item_set_lines(split: list[dict[str, Any]]) -> list[str]:
    """The report's headline lines for `item_sets`: one per benchmark, naming the runs of every set."""
    lines = []
    for entry in split:
        parts = [f"sha256 {short(s['sha256'])}" + (f" (the items in `{entry['path']}` now)" if s["on_disk"] else "")
                 + f": {', '.join(s['runs'])}" for s in entry["sets"]]
        lines.append(f"- `{entry['benchmark']}` scored against {len(entry['sets'])} item sets — " + "; ".join(parts))
    return lines
