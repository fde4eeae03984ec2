"""The item schemas every stage shares: a training or benchmark item, and a scored item.

A corpus row (training) has CORPUS_COLUMNS: id, domain (one of DOMAINS), source, prompt (the raw question; templates
are applied when it is rendered), answer (the gold, in the form its answer format's verifier reads), answer_format
(a name in dataflex_rl.formats) and metadata (JSON text the verifier and the template need, e.g. reasoning-gym's entry
metadata, a real benchmark's `options` or `names`). A benchmark item has the same columns after `benchmark`. A scored
item (one per benchmark item and run, dataflex_rl.evaluate) has SCORED_ITEM_COLUMNS.
"""
from __future__ import annotations

import json
from typing import Mapping

DOMAINS = ("math", "logic", "science")
CORPUS_COLUMNS = ("id", "domain", "source", "prompt", "answer", "answer_format", "metadata")
BENCHMARK_ITEM_COLUMNS = ("benchmark", *CORPUS_COLUMNS)
SCORED_ITEM_COLUMNS = ("prompt_id", "response", "length", "correct", "parsed")

# The letters of lettered options (A-J: MMLU-Pro has up to ten options).
LETTERS = "ABCDEFGHIJ"


def item_metadata(item: Mapping) -> dict:
    """An item's metadata as a dict (stored as JSON text in the parquet files; absent in hand-made items)."""
    metadata = item.get("metadata")
    if isinstance(metadata, str):
        return json.loads(metadata) if metadata else {}
    return dict(metadata or {})


def type_name(value) -> str:
    """What a data file's field holds, as a reader would say it: 'a list', 'an object', 'a boolean', ..."""
    if isinstance(value, (list, tuple)) or type(value).__name__ == "ndarray":  # parquet list columns are arrays
        return "a list"
    if isinstance(value, dict):
        return "an object"
    if isinstance(value, bool) or type(value).__name__ == "bool_":
        return "a boolean"
    return f"a {type(value).__name__}"


def wrong_type(field: str, value, expected: str) -> str:
    """The detail of a field holding the wrong type: its name, the type found (with the start of the value), and the
    type expected."""
    shown = repr(value.tolist() if hasattr(value, "tolist") else value)
    shown = shown if len(shown) <= 60 else shown[:57] + "..."
    return f"field {field!r} holds {type_name(value)} ({shown}), expected {expected}"
