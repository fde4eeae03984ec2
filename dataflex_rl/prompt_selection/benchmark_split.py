"""A benchmark split into validation and test items, for prompt selections whose trusted validation prompts are that
benchmark's items (the method option `validation: {benchmark: <name>}`), as the paper's low-utility scenario splits
MMLU-Pro's math category into a validation and a test set.

The validation items are positions in the benchmark's items file, drawn by the rule that draws validation prompts
from a file (candidates.validation_rows, by `validation_size` and `validation_seed`): the selector, given the items as
its validation rows, draws the same positions. The study holds the union of its methods' draws out of that
benchmark's test score in every run, whatever its method (Study.benchmark_validation_draws), so that every arm is
scored on the same test items; the scenario tables score the held-out items apart, as the validation split.
"""
from __future__ import annotations

from typing import Sequence

from dataflex_rl.prompt_selection.candidates import validation_rows


def validation_positions(benchmark: str, count: int, draws: Sequence[Sequence[int]]) -> frozenset[int]:
    """The positions of the `count` items of `benchmark` that its validation draws ([validation_size,
    validation_seed] each) hold out; a draw that leaves no test item is an error naming the fix."""
    for size, _ in draws:
        if size >= count:
            raise ValueError(f"benchmark {benchmark!r}: a validation draw of {size} items leaves none of its {count} "
                             f"items to test; lower validation_size below {count} (the rest are its test items)")
    return frozenset(row for size, seed in draws for row in validation_rows(range(count), size, seed))


def validation_item_ids(benchmark: str, item_ids: Sequence[str], draws: Sequence[Sequence[int]]) -> frozenset[str]:
    """The ids of the items (in the items file's order) that `benchmark`'s validation draws hold out."""
    ids = [str(item) for item in item_ids]
    return frozenset(ids[row] for row in validation_positions(benchmark, len(ids), draws))
