"""Run records: one tidy row per (run, benchmark), the only input the statistics read.

Per-item score files (parquet, one per run and benchmark) are reduced here to counts, so every summary downstream can
be recomputed from a small table, and `validate_records` refuses a table that would make a summary silently wrong.
"""
from __future__ import annotations

import json
from pathlib import Path
from typing import Iterable, Mapping, Sequence

import pandas as pd

from dataflex_rl.artefacts.items import SCORED_ITEM_COLUMNS
from dataflex_rl.artefacts.layout import UNTRAINED, run_id
from dataflex_rl.artefacts.provenance import DamagedArtefactError, damage, read_provenance
from dataflex_rl.prompt_selection.benchmark_split import validation_item_ids

# The tidy schema, one row per (run, benchmark):
#   model, method   what was trained and under which data policy ("untrained" for the base model)
#   seed            matched training seed; nullable Int64, NA for the untrained base
#   run_id          "{model}/{method}/seed{seed}", or "{model}/untrained"
#   benchmark, domain
#   n, correct, score  items scored, items solved, and the share solved in [0, 1]; every summary except the pooled
#                   Item one (and the efficiency table's per-item ratios) reads `score`
#   counts_inferred false where n and correct were counted from scored items: then score = correct / n exactly.
#                   True for records imported from a table that printed only scores (dataflex_rl.records.imported):
#                   score is the value as printed, n the benchmark size inferred from the printed values and correct the
#                   count nearest score · n; validation checks |score · n - correct| <= 0.5 there instead
#   mean_length     mean response length in tokens; mean_chars = mean response length in characters (the unit of the
#                   efficiency table, comparable across tokenizers); parse_rate = share of responses whose answer could
#                   be extracted; all NaN where the source did not report them (tables imported from elsewhere)
#   parse_flagged   parse_rate below the study's `evaluation.min_parse_rate` (nullable boolean, NA where unknown): the
#                   score says more about the answer format than the skill. The tables report every flag and leave
#                   out of a cell's summaries a benchmark flagged in every trained run (dataflex_rl.stats.parse_flags)
#   cut_share       share of responses cut at the answer-length cap (evaluation.max_new_tokens) rather than ended by
#                   the model (cut_share below); NaN where the source did not report lengths (imported tables). The
#                   tables flag a (run, benchmark) above evaluation.max_cut_share (dataflex_rl.stats.cut_flags)
#   steps           optimiser steps the evaluated checkpoint had taken (nullable Int64)
#   fingerprint     provenance: the fingerprint of the score this row was reduced from, copied from the provenance
#                   record its scoring job wrote (dataflex_rl.artefacts.provenance: sha256, 64 hex digits, of the
#                   score's settings slice, which includes the weights' and the benchmark's). Missing (NA) for
#                   imported records.
#   package_versions  provenance: compact JSON object {distribution: version or null} of PROVENANCE_PACKAGES in the
#                   environment that built the records (dataflex_rl.records.package_versions). Missing (NA) for
#                   imported records.
RECORD_COLUMNS = ("model", "method", "seed", "run_id", "benchmark", "domain", "n", "correct", "score",
                  "counts_inferred", "mean_length", "mean_chars", "parse_rate", "parse_flagged", "cut_share", "steps",
                  "fingerprint", "package_versions")
PROVENANCE_COLUMNS = ("fingerprint", "package_versions")


def cut_share(items: pd.DataFrame, max_new_tokens: int | None) -> float:
    """The share of responses cut at the length cap. vLLM reports it per answer (finish_reason "length", against
    "stop" for an answer ended by a stop token). The embedded generator reports only a length, which counts the
    generated tokens up to and including its end-of-text token (dataflex_rl.backends.embedded.generation.decode): a
    length below the cap ended at end-of-text; a length at the cap is counted as cut, though it may also be an
    answer whose end-of-text fell on the last allowed token (its score file keeps no token ids, so the share is an
    upper bound there). NaN without a finish_reason column or a cap."""
    if "finish_reason" in items.columns:
        return float((items["finish_reason"] == "length").mean())
    if max_new_tokens is None:
        return float("nan")
    return float((items["length"] >= max_new_tokens).mean())


def summarise_items(items: pd.DataFrame, *, model: str, method: str, seed: int | None, benchmark: str, domain: str,
                    steps: int | None, fingerprint: str | None = None, package_versions: str | None = None,
                    min_parse_rate: float | None = None, max_new_tokens: int | None = None) -> dict:
    """Reduce one (run, benchmark) item file to its record row; the provenance columns are passed through.
    `min_parse_rate` sets `parse_flagged` (None leaves it unknown); `max_new_tokens` is the score job's answer cap
    (for `cut_share`)."""
    missing = [c for c in SCORED_ITEM_COLUMNS if c not in items.columns]
    if missing:
        raise ValueError(f"{benchmark}: item file lacks columns {missing}")
    if items.empty:
        raise ValueError(f"{benchmark}: item file has no rows, so its score is undefined")
    duplicated = items["prompt_id"][items["prompt_id"].duplicated()].unique().tolist()
    if duplicated:
        raise ValueError(f"{benchmark}: prompt ids scored more than once: {duplicated[:5]}")
    correct = items["correct"].astype("int64")
    if not correct.isin([0, 1]).all():
        raise ValueError(f"{benchmark}: 'correct' must be 0/1")
    n, solved = len(items), int(correct.sum())
    parse_rate = float(items["parsed"].astype(bool).mean())
    return {
        "model": model,
        "method": method,
        "seed": None if seed is None else int(seed),
        "run_id": run_id(model, method, seed),
        "benchmark": benchmark,
        "domain": domain,
        "n": n,
        "correct": solved,
        "score": solved / n,
        "counts_inferred": False,
        "mean_length": float(items["length"].mean()),
        "mean_chars": float(items["response"].fillna("").str.len().mean()),
        "parse_rate": parse_rate,
        "parse_flagged": None if min_parse_rate is None else parse_rate < min_parse_rate,
        "cut_share": cut_share(items, max_new_tokens),
        "steps": None if steps is None else int(steps),
        "fingerprint": fingerprint,
        "package_versions": package_versions,
    }


def records_frame(rows: Iterable[Mapping], extras: Sequence[str] = ()) -> pd.DataFrame:
    """Build a validated records table from record rows, with nullable integer seeds and steps; `extras` are the
    columns after RECORD_COLUMNS that say what a study cell is (base_model, campaign, regime)."""
    frame = pd.DataFrame(list(rows), columns=[*RECORD_COLUMNS, *extras])
    frame = frame.astype({"seed": "Int64", "steps": "Int64", "n": "int64", "correct": "int64",
                          "counts_inferred": "bool", "parse_flagged": "boolean"})
    validate_records(frame)
    return frame


def _problem(mask: pd.Series, what: str) -> list[str]:
    rows = mask[mask].index.tolist()
    return [f"{what} (rows {rows[:5]}{' …' if len(rows) > 5 else ''})"] if rows else []


def _is_version_map(text) -> bool:
    if pd.isna(text):
        return True
    try:
        value = json.loads(text)
    except (TypeError, ValueError):
        return False
    return isinstance(value, dict) and all(isinstance(k, str) and (v is None or isinstance(v, str))
                                           for k, v in value.items())


def validate_records(df: pd.DataFrame) -> None:
    """Raise ValueError listing every way `df` breaks the record schema; a summary over such a table would mislead."""
    missing = [c for c in RECORD_COLUMNS if c not in df.columns]
    if missing:
        raise ValueError(f"records lack columns {missing}")
    problems: list[str] = []
    for column in ("model", "method", "run_id", "benchmark", "domain", "n", "correct", "score"):
        problems += _problem(df[column].isna(), f"{column} is missing")
    n = pd.to_numeric(df["n"], errors="coerce")
    correct = pd.to_numeric(df["correct"], errors="coerce")
    score = pd.to_numeric(df["score"], errors="coerce")
    problems += _problem(~(n > 0), "n must be a positive count")
    problems += _problem(~((correct >= 0) & (correct <= n)), "correct must lie in [0, n]")
    problems += _problem(score.notna() & ~score.between(0, 1), "score must lie in [0, 1]")
    problems += _problem(~df["counts_inferred"].isin([True, False]), "counts_inferred must be true or false")
    inferred = df["counts_inferred"].isin([True])
    problems += _problem(~inferred & ~((score - correct / n).abs() <= 1e-9),
                         "score must equal correct / n where counts are measured")
    problems += _problem(inferred & ~((score * n - correct).abs() <= 0.5 + 1e-9),
                         "correct must be the count nearest score · n where counts are inferred")
    parse_rate = pd.to_numeric(df["parse_rate"], errors="coerce")
    # Missing lengths and parse rates are allowed (not every source reports them); present ones must be in range.
    problems += _problem(df["parse_rate"].notna() & ~parse_rate.between(0, 1), "parse_rate must lie in [0, 1]")
    flagged = df["parse_flagged"]
    problems += _problem(flagged.notna() & ~flagged.isin([True, False]), "parse_flagged must be true, false or missing")
    problems += _problem(flagged.notna() & df["parse_rate"].isna(), "parse_flagged needs a parse_rate")
    cut = pd.to_numeric(df["cut_share"], errors="coerce")
    problems += _problem(df["cut_share"].notna() & ~cut.between(0, 1), "cut_share must lie in [0, 1]")
    for column in ("mean_length", "mean_chars"):
        length = pd.to_numeric(df[column], errors="coerce")
        problems += _problem(df[column].notna() & ~(length >= 0), f"{column} must be >= 0")
    seed = pd.to_numeric(df["seed"], errors="coerce")
    problems += _problem(df["seed"].notna() & ~((seed >= 0) & (seed % 1 == 0)), "seed must be a non-negative integer")
    untrained = df["method"] == UNTRAINED
    consistent = untrained == seed.isna()
    problems += _problem(~consistent, "seed must be missing exactly for the untrained base")
    expected = [run_id(m, t, None if pd.isna(s) else int(s)) if ok else r
                for m, t, s, r, ok in zip(df["model"], df["method"], seed, df["run_id"], consistent)]
    problems += _problem(df["run_id"] != pd.Series(expected, index=df.index, dtype=object),
                         "run_id must be {model}/{method}/seed{seed} or {model}/untrained")
    problems += _problem(df.duplicated(["run_id", "benchmark"], keep=False), "a (run_id, benchmark) pair repeats")
    fingerprints = df["fingerprint"]
    problems += _problem(fingerprints.notna() & ~fingerprints.astype(str).str.fullmatch(r"[0-9a-f]{64}"),
                         "fingerprint must be 64 lowercase hex digits (sha256) or missing")
    problems += _problem(df["package_versions"].notna() & ~df["package_versions"].map(_is_version_map),
                         "package_versions must be a JSON object {package: version or null} or missing")
    varying = df.groupby("run_id")["package_versions"].nunique(dropna=False)
    problems += [f"package_versions differs between the benchmarks of run {r!r}"
                 for r in varying[varying > 1].index[:5]]
    domains = df.groupby("benchmark")["domain"].nunique()
    problems += [f"benchmark {b!r} is filed under several domains" for b in domains[domains > 1].index]
    if problems:
        raise ValueError("invalid records: " + "; ".join(problems))


def held_out_items(benchmark: str, split: Mapping) -> frozenset[str]:
    """The ids of the items of `benchmark` its validation draws hold out (`split`: {items, draws};
    prompt_selection.benchmark_split)."""
    return validation_item_ids(benchmark, pd.read_parquet(split["items"], columns=["id"])["id"], split["draws"])


def collect_records(sources: Iterable[Mapping], *, versions: str | None = None,
                    min_parse_rate: float | None = None, inputs: dict | None = None) -> pd.DataFrame:
    """The records table from score files; each source names its path, its provenance record, model, method, seed (None:
    base), benchmark and optionally `extras` (the study cell's base_model, campaign and regime columns). A row's
    fingerprint and step count are copied from the provenance record, after the score file is checked against it (a
    damaged one is refused, naming it); nothing is recomputed from the current config. A source with a
    `validation_split` ({items, draws}: StudyFiles.validation_split) is recorded on its benchmark's test items
    only: the items the study's prompt selections hold out as validation prompts are left out (read once per
    benchmark). `versions` (a `package_versions` string) is stamped on every row; `min_parse_rate` sets every row's `parse_flagged`. `inputs` collects
    {score path: {path, sha256}} of the score files read, as hashed by that check (the records job writes them into
    the table's metadata)."""
    from dataflex_rl.item_sources.registry import get_benchmark

    rows, extras, found, held_out = [], {}, {}, {}
    inputs = {} if inputs is None else inputs
    for source in sources:
        extras.update(dict.fromkeys(source.get("extras") or {}))
        provenance = read_provenance(source["provenance"])
        problems = damage(provenance, source["provenance"], found)
        if problems:
            raise DamagedArtefactError("a score file is not the one its job wrote:\n  " + "\n  ".join(problems))
        inputs[source["path"]] = {"path": source["path"], "sha256": found[Path(source["path"]).resolve()]}
        scored = pd.read_parquet(source["path"])
        if split := source.get("validation_split"):
            if source["benchmark"] not in held_out:
                held_out[source["benchmark"]] = held_out_items(source["benchmark"], split)
            scored = scored[~scored["prompt_id"].astype(str).isin(held_out[source["benchmark"]])]
        rows.append(summarise_items(
            scored, model=source["model"], method=source["method"], seed=source["seed"],
            benchmark=source["benchmark"], domain=get_benchmark(source["benchmark"]).domain,
            steps=provenance["settings"].get("training.steps", 0), fingerprint=provenance["fingerprint"],
            package_versions=versions, min_parse_rate=min_parse_rate,
            max_new_tokens=provenance["settings"].get("evaluation.max_new_tokens"),
        ) | dict(source.get("extras") or {}))
    return records_frame(rows, list(extras))
