"""What a transform hands back besides the transformed corpus: one row per prompt saying what it did to it."""
from __future__ import annotations

import pandas as pd

# One row per prompt of the input corpus: its id, the action taken, and the gold before and after where it changed.
RECORD_COLUMNS = ("id", "action", "old_answer", "new_answer")


def kept_or_dropped(corpus: pd.DataFrame, kept: pd.Index) -> tuple[pd.DataFrame, pd.DataFrame]:
    """The rows of `corpus` whose index labels are in `kept` (in corpus order, reindexed), and the record saying
    'kept' or 'dropped' for every prompt."""
    is_kept = corpus.index.isin(kept)
    record = pd.DataFrame({"id": corpus["id"].to_numpy(), "action": ["kept" if k else "dropped" for k in is_kept],
                           "old_answer": None, "new_answer": None}, columns=list(RECORD_COLUMNS))
    return corpus[is_kept].reset_index(drop=True), record


def rows_per_domain(corpus: pd.DataFrame) -> dict[str, int]:
    return {str(domain): int(n) for domain, n in corpus["domain"].value_counts().sort_index().items()}
