"""A `benchmarks.files` config entry as its list of paths. Apart from the loaders (which import pandas) so that the
workflow's parse path, which checks and plans these files, stays free of pandas."""
from __future__ import annotations

from pathlib import Path
from typing import Sequence


def benchmark_paths(entry: str | Path | Sequence[str | Path]) -> list[str]:
    """A `benchmarks.files` entry as its list of paths: one file, or the several files that make one benchmark."""
    return [str(entry)] if isinstance(entry, (str, Path)) else [str(path) for path in entry]
