"""Real benchmarks' items, from local files or the Hugging Face hub, read in each benchmark's native schema by its
reader (dataflex_rl.item_sources.readers): a file without the reader's columns is an error naming the file, the missing
columns and the expected schema. A benchmark's file may be JSONL or parquet (the hub's export, the Qwen2.5-Math
evaluation harness's data), a JSON list of rows or an object holding them under `examples` (MMLU-Pro's released
results; the official BBH files, {canary, examples}), or CSV (GPQA's distribution); a benchmark given as several files
(BBH's three, five and seven object files) is their rows in the order listed. Every item row has
dataflex_rl.artefacts.items.BENCHMARK_ITEM_COLUMNS; `metadata` holds every other native column, what the reader derived
(`options`, `names`) and the row's position in the source (`source_index`). Where the paper's authors scored a seeded
subset, the loader keeps the same rows.

The hub is used only when asked (`benchmarks.hub_fallback`), through the optional `datasets` package
(`pip install 'dataflex-rl[hub]'`), imported here and nowhere else.
"""
from __future__ import annotations

import json
import math
import random
import warnings
from pathlib import Path
from typing import Sequence

import numpy as np
import pandas as pd

from dataflex_rl.item_sources.paths import benchmark_paths
from dataflex_rl.item_sources.readers import BenchmarkSchemaError, UnreadableRowError, text_field
from dataflex_rl.item_sources.registry import PAPER_BENCHMARKS, Benchmark
from dataflex_rl.artefacts.items import BENCHMARK_ITEM_COLUMNS


class BenchmarkSizeWarning(UserWarning):
    """A real benchmark loaded with another number of items than the paper's authors scored."""


# The frame's `attrs` key under which native_items leaves the rows it could not read (a field of the wrong type), each
# {"source_index", "detail", "row"}: they travel with the items so that row validation quarantines them
# (dataflex_rl.corpus.validation.validated_benchmark_items), while every caller keeps receiving one frame.
UNREADABLE_ROWS = "unreadable_rows"


TABLE_SUFFIXES = (".jsonl", ".parquet", ".json", ".csv")
# UTF-8, with or without the byte-order mark that Windows editors write at the start of a file
TEXT_ENCODING = "utf-8-sig"


def _json_rows(path: Path) -> list:
    """A .json benchmark file's rows: the file's list, or the list under `examples` (the official BBH files)."""
    data = json.loads(path.read_text(encoding=TEXT_ENCODING))
    rows = data.get("examples") if isinstance(data, dict) else data
    if not isinstance(rows, list) or not all(isinstance(row, dict) for row in rows):
        found = f"an object with keys {sorted(data)[:8]}" if isinstance(data, dict) else f"a JSON {type(data).__name__}"
        raise BenchmarkSchemaError(f"{path}: expected a JSON list of row objects, or an object with an `examples` list "
                                   f"of them (the official BBH files), found {found}; give the file as released")
    return rows


def read_table(path: str | Path) -> pd.DataFrame:
    """A benchmark file as a frame, values as the file holds them: JSONL read line by line and JSON as parsed, so that
    pandas does not turn ids into numbers or 'created_at' columns into dates; CSV cells as text ('' when empty)."""
    path = Path(path)
    if path.suffix == ".parquet":
        return pd.read_parquet(path)
    if path.suffix == ".jsonl":
        with path.open(encoding=TEXT_ENCODING) as handle:
            return pd.DataFrame.from_records([json.loads(line) for line in handle if line.strip()])
    if path.suffix == ".json":
        return pd.DataFrame.from_records(_json_rows(path))
    if path.suffix == ".csv":
        return pd.read_csv(path, dtype=str, keep_default_na=False, encoding=TEXT_ENCODING)
    raise ValueError(f"{path}: a benchmark file must be {', '.join(TABLE_SUFFIXES)}; found suffix {path.suffix!r}")


def read_tables(paths: Sequence[str | Path]) -> pd.DataFrame:
    """The rows of a benchmark's files in the order listed; where there are several, a `source_file` column names
    each row's file."""
    frames = [read_table(path) for path in paths]
    if len(frames) > 1:
        frames = [frame.assign(source_file=Path(path).name) for frame, path in zip(frames, paths)]
    return pd.concat(frames, ignore_index=True)


def _jsonable(value):
    if isinstance(value, np.ndarray):
        return [_jsonable(v) for v in value.tolist()]
    if isinstance(value, (list, tuple)):
        return [_jsonable(v) for v in value]
    if isinstance(value, dict):
        return {str(k): _jsonable(v) for k, v in value.items()}
    if isinstance(value, np.generic):
        value = value.item()
    if isinstance(value, float) and math.isnan(value):
        return None
    if value is None or isinstance(value, (str, int, float, bool)):
        return value
    return str(value)


def paper_subset(n_rows: int, benchmark: Benchmark) -> list[int]:
    """The row positions the authors scored: all of them, or — where they sampled `evaluated_size` of more rows —
    the first `evaluated_size` of the positions shuffled by random.Random(subset_seed), in file order."""
    if benchmark.subset_seed is None or benchmark.evaluated_size is None or n_rows <= benchmark.evaluated_size:
        return list(range(n_rows))
    positions = list(range(n_rows))
    random.Random(benchmark.subset_seed).shuffle(positions)
    return sorted(positions[: benchmark.evaluated_size])


def native_items(benchmark: Benchmark, frame: pd.DataFrame, origin: str) -> pd.DataFrame:
    """Benchmark item rows from `frame`, the benchmark's rows in its native schema (`origin` names the file or hub
    split in errors)."""
    reader = benchmark.reader
    if reader is None:
        raise ValueError(f"{benchmark.name!r} has no native reader; real benchmarks: {', '.join(PAPER_BENCHMARKS)}")
    frame = frame.rename(columns={old: new for old, new in reader.renames.items()
                                  if old in frame.columns and new not in frame.columns})
    if frame.empty:
        raise BenchmarkSchemaError(f"benchmark {benchmark.name!r}: {origin} has no rows")
    missing = [c for c in reader.columns if c not in frame.columns and reader.alternatives.get(c) not in frame.columns]
    if missing:
        hub = f" of {benchmark.hub.name}" if benchmark.hub else ""
        raise BenchmarkSchemaError(
            f"benchmark {benchmark.name!r}: {origin} lacks column(s) {missing}; expected the native schema{hub} "
            f"with columns {list(reader.columns)}, found {list(frame.columns)} (docs/benchmarks.md)")
    category = benchmark.hub.category if benchmark.hub else None
    if category is not None:  # MMLU-Pro: one file or split holds every subject
        frame = frame[frame["category"] == category].reset_index(drop=True)
        if frame.empty:
            raise BenchmarkSchemaError(f"benchmark {benchmark.name!r}: {origin} has no row of category {category!r}")
    rows, unreadable = [], []
    records = frame.to_dict("records")
    for position in paper_subset(len(records), benchmark):
        record = records[position]
        try:
            item = reader.read(record)
            item_id = text_field(record.get(reader.id_column), reader.id_column) or f"{benchmark.name}-{position:06d}"
        except UnreadableRowError as error:
            unreadable.append({"source_index": position, "reason": error.reason, "detail": str(error),
                               "row": _jsonable(record)})
            continue
        except (BenchmarkSchemaError, KeyError, TypeError, ValueError) as error:
            raise BenchmarkSchemaError(f"benchmark {benchmark.name!r}: {origin} row {position}: {error}") from error
        extra = {k: v for k, v in record.items() if k not in reader.consumed and k != reader.id_column}
        metadata = {**_jsonable(extra), **item.derived, "source_index": position}
        rows.append({"benchmark": benchmark.name, "id": item_id, "domain": benchmark.domain,
                     "source": benchmark.name, "prompt": item.prompt, "answer": item.answer,
                     "answer_format": benchmark.answer_format,
                     "metadata": json.dumps(metadata, sort_keys=True, ensure_ascii=False)})
    read = len(rows) + len(unreadable)
    if benchmark.evaluated_size is not None and read != benchmark.evaluated_size:
        warnings.warn(f"benchmark {benchmark.name!r}: {read} items from {origin}; the paper's authors scored "
                      f"{benchmark.evaluated_size}", BenchmarkSizeWarning, stacklevel=2)
    items = pd.DataFrame(rows, columns=list(BENCHMARK_ITEM_COLUMNS))
    if unreadable:
        items.attrs[UNREADABLE_ROWS] = unreadable
    return items


def load_file_items(benchmark: Benchmark, paths: str | Path | Sequence[str | Path]) -> pd.DataFrame:
    """A real benchmark's items from its local file(s) in the native schema."""
    paths = [Path(path) for path in benchmark_paths(paths)]
    for path in paths:
        if not path.exists():
            hub = f" or set benchmarks.hub_fallback: true to load {benchmark.hub.name}" if benchmark.hub else ""
            raise FileNotFoundError(f"benchmark {benchmark.name!r}: file {path} does not exist; put the benchmark "
                                    f"there{hub}")
    return native_items(benchmark, read_tables(paths), ", ".join(str(path) for path in paths))


def load_hub_frame(benchmark: Benchmark) -> pd.DataFrame:
    """The benchmark's native rows from the Hugging Face hub: its (configuration, split) parts, concatenated; a
    `hub_part` column names each row's part where there are several."""
    hub = benchmark.hub
    if hub is None:
        raise ValueError(f"benchmark {benchmark.name!r} has no Hugging Face hub source")
    try:
        import datasets
    except ImportError as error:
        raise ImportError(f"benchmark {benchmark.name!r}: loading {hub.name} from the Hugging Face hub needs the "
                          "optional `datasets` package: pip install 'dataflex-rl[hub]' (or put the benchmark's "
                          "file at its benchmarks.files path)") from error
    frames = []
    for config, split in hub.parts:
        try:
            part = datasets.load_dataset(hub.name, config, split=split)
        except Exception as error:  # connection, authentication and missing-split errors all mean the same here
            raise RuntimeError(
                f"benchmark {benchmark.name!r}: could not load {hub.name} (configuration {config}, split {split}) "
                f"from the Hugging Face hub: {error}. The machine must be online (HF_HUB_OFFLINE unset) and, for a "
                "gated dataset, logged in with its terms accepted; or put the file at its benchmarks.files path"
            ) from error
        frame = part.to_pandas()
        if len(hub.parts) > 1:
            frame["hub_part"] = f"{config}/{split}"
        frames.append(frame)
    return pd.concat(frames, ignore_index=True)


def load_hub_items(benchmark: Benchmark) -> pd.DataFrame:
    """A real benchmark's items from the Hugging Face hub, by the registry's dataset name, configuration and split."""
    return native_items(benchmark, load_hub_frame(benchmark), f"hub dataset {benchmark.hub.name}")


def local_source(entry: str | Sequence[str] | None, hub_fallback: bool) -> str | list[str] | None:
    """The local file(s) to read, or None when the benchmark is to come from the hub: none of its files is there and
    the config sets benchmarks.hub_fallback (a directory there is read, and reported, as the file it should be)."""
    if entry is not None and hub_fallback and not any(Path(path).exists() for path in benchmark_paths(entry)):
        return None
    return entry
