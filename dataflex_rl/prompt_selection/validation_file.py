"""A prompt selection's trusted validation prompts from their own file (the method option `validation`), as the paper
and the released loop score candidates against a separate validation set rather than corpus rows; or from a
benchmark's items (`validation: {benchmark: <name>}`, prompt_selection.benchmark_split).

The file is a corpus file: JSONL or parquet rows in the `corpus.files` row format (`prompt` or `question`, `answer`,
`answer_format`, `domain`, `id`), and the option is written like a `corpus.files` entry (`path`, and the `domain`,
`answer_format` and `source` its rows may leave out). Every row must pass the corpus's row checks: a validation set
is trusted, so a bad row is refused rather than quarantined. Its prompts must not be test items: a row whose id is
a benchmark item's, or whose prompt the decontamination would remove from the corpus for a benchmark item (the same
normalised text, or the item inside a template: dataflex_rl.corpus.decontam.containing), is refused at dry run.
"""
from __future__ import annotations

from pathlib import Path
from typing import Any, Mapping

import pandas as pd

from dataflex_rl.artefacts.items import CORPUS_COLUMNS
from dataflex_rl.corpus.decontam import containing
from dataflex_rl.corpus.build import CorpusFile, load_corpus_file
from dataflex_rl.corpus.validation import KeptRows
from dataflex_rl.corpus.validation_settings import ValidationSettings

def read_validation_file(entry: Mapping[str, Any], workdir: str | Path = ".") -> pd.DataFrame:
    """The file's rows as corpus rows (dataflex_rl.artefacts.items.CORPUS_COLUMNS), in file order; an unreadable file or
    any row the corpus checks would quarantine is an error naming the file, the line and the reason."""
    spec = CorpusFile.from_config(dict(entry))
    located = CorpusFile(str(Path(workdir) / spec.path), spec.source, spec.domain, spec.answer_format)
    rows, report = load_corpus_file(located, KeptRows(set(), set()), ValidationSettings.for_section("corpus"))
    where = f"validation file {spec.path}"
    if report.unreadable:
        raise ValueError(f"{where}: {report.unreadable}")
    if report.quarantined:
        first = report.quarantined[0]
        raise ValueError(f"{where}: {len(report.quarantined)} row(s) fail the corpus row checks, the first at line "
                         f"{first['line']} ({first['reason']}: {first['detail']}); fix or remove them — a trusted "
                         "validation set has no quarantine")
    if rows.empty:
        raise ValueError(f"{where}: no rows; give at least validation_size prompts")
    return rows


def read_benchmark_items(path: str | Path) -> pd.DataFrame:
    """A benchmark's items file (dataflex_rl.artefacts.items.BENCHMARK_ITEM_COLUMNS) as corpus rows, in file order: the
    validation rows of a prompt selection that draws them from that benchmark (prompt_selection.benchmark_split)."""
    return pd.read_parquet(path, columns=list(CORPUS_COLUMNS))


def overlaps_with_tests(validation: pd.DataFrame, tests: pd.DataFrame,
                        threshold: float) -> list[tuple[str, str, str, str]]:
    """(validation row id, benchmark, test item id, how) of every validation row that is a test item or holds one:
    the same id (how "id"), or a prompt the decontamination would remove from the corpus for that item at `threshold`
    (dataflex_rl.corpus.decontam.containing: how "exact", "contained" or "near"); `tests` holds benchmark items
    (columns benchmark, id, prompt)."""
    by_id: dict[str, tuple[str, str]] = {}
    for benchmark, item_id in zip(tests["benchmark"], tests["id"]):
        by_id.setdefault(str(item_id), (benchmark, str(item_id)))
    held = containing(validation["prompt"].tolist(), tests["prompt"].tolist(), threshold)
    benchmarks, items = tests["benchmark"].tolist(), tests["id"].map(str).tolist()
    overlaps = []
    for i, row_id in enumerate(validation["id"].map(str)):
        if row_id in by_id:
            overlaps.append((row_id, *by_id[row_id], "id"))
        elif i in held:
            item, how = held[i][0], held[i][1]
            overlaps.append((row_id, benchmarks[item], items[item], how))
    return overlaps
