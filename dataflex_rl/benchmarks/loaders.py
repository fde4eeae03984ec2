"""Native-schema readers for the paper's 12 real benchmarks, from a local JSONL/parquet file or the Hugging Face hub.

Each benchmark is read in its own column names (the registry's `columns`; a file without them is an error naming the
file, the missing columns and the expected schema) and turned into benchmark item rows: `prompt` is the question as
the benchmark states it (the family template adds the options and the instruction when the prompt is rendered),
`answer` the gold in the form its verifier reads, and `metadata` every other native column plus what the verifier and
the template need (`options`, `names`) and the row's position in the source (`source_index`).

Gold conversions: GSM8K's "... #### 1,234" → "1234"; OlympiadBench's `final_answer` list → its answers joined by ", ";
Knights&Knaves' `names` + `solution` booleans → "Zoey is a knight, Oliver is a knave"; ZebraLogic's answer text and
MMLU-Pro's `answer_index` → the option letter; GPQA's correct answer → its letter after a seeded shuffle of the four
options (the displayed order of the source columns is kept in metadata `option_sources`).

The hub is used only when asked (`benchmarks.hub_fallback`), through the optional `datasets` package
(`pip install 'dataflex-rl[hub]'`), imported here and nowhere else.
"""
from __future__ import annotations

import json
import math
import random
import re
import warnings
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable, Mapping

import numpy as np
import pandas as pd

from dataflex_rl.benchmarks.templates import LETTERS
from dataflex_rl.tasks.registry import Benchmark

ITEM_COLUMNS = ["benchmark", "id", "domain", "source", "prompt", "answer", "answer_format", "metadata"]
GPQA_SHUFFLE_SEED = 42


class BenchmarkSchemaError(ValueError):
    """A benchmark file or hub split that does not have the benchmark's native columns, or a row it cannot read."""


class BenchmarkSizeWarning(UserWarning):
    """A real benchmark loaded with another number of items than the paper's authors scored."""


@dataclass(frozen=True)
class NativeItem:
    """One row read in its benchmark's schema: the prompt, the gold answer, and what the reader derived."""

    prompt: str
    answer: str
    derived: dict = field(default_factory=dict)


@dataclass(frozen=True)
class Reader:
    """How one benchmark's rows become items: `read` a row; `consumed` the native columns it turns into the prompt,
    the answer or derived metadata (the other columns go to metadata as they are); `id_column` the native id, used
    when the file has it; `renames` the column names of a known variant of the schema."""

    read: Callable[[Mapping], NativeItem]
    consumed: tuple[str, ...]
    id_column: str | None = None
    renames: Mapping[str, str] = field(default_factory=dict)


def _text(value) -> str:
    """A native field as text; a missing one (null, NaN) as '', which row validation quarantines as missing."""
    if value is None or (isinstance(value, (float, np.floating)) and math.isnan(value)):
        return ""
    if isinstance(value, (float, np.floating)) and float(value).is_integer():
        return str(int(value))
    return str(value).strip()


def _sequence(value) -> list:
    if isinstance(value, str):
        value = json.loads(value) if value.strip().startswith("[") else [value]
    return list(value)


def _strip_dollars(text: str) -> str:
    text = text.strip()
    if len(text) > 1 and text.startswith("$") and text.endswith("$"):
        return text.strip("$").strip()
    return text


def _math(question: str, answer: str) -> Callable[[Mapping], NativeItem]:
    return lambda row: NativeItem(_text(row[question]), _text(row[answer]))


def _gsm8k(row: Mapping) -> NativeItem:
    """GSM8K's gold is the number after '####' at the end of the worked solution (commas are thousands separators)."""
    solution = _text(row["answer"])
    final = solution.rsplit("####", 1)[-1].strip().replace(",", "")
    return NativeItem(_text(row["question"]), final, {"solution": solution} if "####" in solution else {})


def _olympiad(row: Mapping) -> NativeItem:
    answers = [_strip_dollars(_text(a)) for a in _sequence(row["final_answer"])]
    return NativeItem(_text(row["question"]), ", ".join(answers))


def kk_gold(names: list[str], solution: list) -> str:
    """'Zoey is a knight, Oliver is a knave': K&K's solution booleans (True = knight) in the verifier's sentence form."""
    return ", ".join(f"{name} is a {'knight' if bool(is_knight) else 'knave'}" for name, is_knight in
                     zip(names, solution, strict=True))


def _knights_knaves(row: Mapping) -> NativeItem:
    names, solution = [_text(n) for n in _sequence(row["names"])], _sequence(row["solution"])
    if len(names) != len(solution):
        raise BenchmarkSchemaError(f"{len(names)} names but {len(solution)} solution values")
    return NativeItem(_text(row["quiz"]), kk_gold(names, solution), {"names": names})


_BBH_OPTION = re.compile(r"^\(([A-J])\)\s*(.+?)\s*$", re.MULTILINE)


def bbh_options(question: str) -> list[str]:
    """The '(A) text' lines of a BBH input, in letter order ([] unless they run A, B, C, ... without a gap)."""
    found = dict(_BBH_OPTION.findall(question))
    letters = LETTERS[: len(found)]
    return [found[letter] for letter in letters] if set(found) == set(letters) else []


def _bbh(row: Mapping) -> NativeItem:
    question, target = _text(row["input"]), _text(row["target"])
    options = bbh_options(question)
    return NativeItem(question, target, {"options": options} if options else {})


def _zebra(row: Mapping) -> NativeItem:
    choices = [_text(c) for c in _sequence(row["choices"])]
    answer = _text(row["answer"])
    if answer not in choices:
        raise BenchmarkSchemaError(f"answer {answer!r} is not one of the choices {choices}")
    prompt = f"{_text(row['puzzle'])}\n\n{_text(row['question'])}"
    return NativeItem(prompt, LETTERS[choices.index(answer)], {"options": choices})


def _mmlu_pro(row: Mapping) -> NativeItem:
    """MMLU-Pro pads some option lists with 'N/A': those are dropped and the gold letter taken from answer_index."""
    options = [_text(o) for o in _sequence(row["options"])]
    index = int(row["answer_index"])
    if LETTERS[index] != _text(row["answer"]):
        raise BenchmarkSchemaError(f"answer {row['answer']!r} disagrees with answer_index {index}")
    kept = [i for i, option in enumerate(options) if option != "N/A" or i == index]
    return NativeItem(_text(row["question"]), LETTERS[kept.index(index)], {"options": [options[i] for i in kept]})


_GPQA_OPTION_COLUMNS = ("Correct Answer", "Incorrect Answer 1", "Incorrect Answer 2", "Incorrect Answer 3")


def gpqa_order(key: str, seed: int = GPQA_SHUFFLE_SEED) -> list[int]:
    """The displayed order of GPQA's four option columns for the item `key`: a shuffle seeded by (seed, key), so an
    item's letters do not depend on which other items the file holds or their order."""
    order = list(range(len(_GPQA_OPTION_COLUMNS)))
    random.Random(f"{seed}:{key}").shuffle(order)
    return order


def _gpqa(row: Mapping) -> NativeItem:
    key = _text(row["Record ID"]) if "Record ID" in row else _text(row["Question"])
    order = gpqa_order(key)
    options = [" ".join(_text(row[_GPQA_OPTION_COLUMNS[i]]).split()) for i in order]
    return NativeItem(_text(row["Question"]), LETTERS[order.index(0)],
                      {"options": options, "option_sources": [_GPQA_OPTION_COLUMNS[i] for i in order],
                       "shuffle_seed": GPQA_SHUFFLE_SEED})


_MMLU_PRO = Reader(_mmlu_pro, ("question", "options", "answer", "answer_index"), "question_id")
_BBH = Reader(_bbh, ("input", "target"))

READERS: dict[str, Reader] = {
    "MATH-500": Reader(_math("problem", "answer"), ("problem", "answer"), "unique_id"),
    "AIME-2024": Reader(_math("problem", "answer"), ("problem", "answer"), "id",
                        renames={"Problem": "problem", "Answer": "answer", "ID": "id", "Solution": "solution"}),
    "OlympiadBench": Reader(_olympiad, ("question", "final_answer"), "id"),
    "Minerva-Math": Reader(_math("question", "answer"), ("question", "answer")),
    "GSM8K": Reader(_gsm8k, ("question", "answer")),
    "Knights&Knaves": Reader(_knights_knaves, ("quiz", "names", "solution")),
    "BBH-logical-deduction": _BBH,
    "BBH-tracking-shuffled-objects": _BBH,
    "ZebraLogic": Reader(_zebra, ("puzzle", "question", "choices", "answer"), "id"),
    "MMLU-Pro-chemistry": _MMLU_PRO,
    "MMLU-Pro-physics": _MMLU_PRO,
    "GPQA-Diamond": Reader(_gpqa, ("Question", *_GPQA_OPTION_COLUMNS), "Record ID"),
}


def get_reader(benchmark: Benchmark) -> Reader:
    try:
        return READERS[benchmark.name]
    except KeyError:
        raise ValueError(f"{benchmark.name!r} has no native reader; real benchmarks: {', '.join(READERS)}") from None


def read_table(path: str | Path) -> pd.DataFrame:
    """A JSONL or parquet file as a frame, values as the file holds them (JSONL read line by line, so that pandas
    does not turn ids into numbers or 'created_at' columns into dates)."""
    path = Path(path)
    if path.suffix == ".parquet":
        return pd.read_parquet(path)
    if path.suffix == ".jsonl":
        with path.open(encoding="utf-8") as handle:
            return pd.DataFrame.from_records([json.loads(line) for line in handle if line.strip()])
    raise ValueError(f"{path}: a benchmark file must be .jsonl or .parquet")


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
    reader = get_reader(benchmark)
    frame = frame.rename(columns={old: new for old, new in reader.renames.items()
                                  if old in frame.columns and new not in frame.columns})
    if frame.empty:
        raise BenchmarkSchemaError(f"benchmark {benchmark.name!r}: {origin} has no rows")
    missing = [c for c in benchmark.columns if c not in frame.columns]
    if missing:
        hub = f" of {benchmark.hub.name}" if benchmark.hub else ""
        raise BenchmarkSchemaError(
            f"benchmark {benchmark.name!r}: {origin} lacks column(s) {missing}; expected the native schema{hub} "
            f"with columns {list(benchmark.columns)}, found {list(frame.columns)} (docs/benchmarks.md)")
    category = benchmark.hub.category if benchmark.hub else None
    if category is not None:  # MMLU-Pro: one file or split holds every subject
        frame = frame[frame["category"] == category].reset_index(drop=True)
        if frame.empty:
            raise BenchmarkSchemaError(f"benchmark {benchmark.name!r}: {origin} has no row of category {category!r}")
    rows = []
    records = frame.to_dict("records")
    for position in paper_subset(len(records), benchmark):
        record = records[position]
        try:
            item = reader.read(record)
        except (BenchmarkSchemaError, KeyError, TypeError, ValueError) as error:
            raise BenchmarkSchemaError(f"benchmark {benchmark.name!r}: {origin} row {position}: {error}") from error
        item_id = _text(record.get(reader.id_column)) or f"{benchmark.name}-{position:06d}"
        extra = {k: v for k, v in record.items() if k not in reader.consumed and k != reader.id_column}
        metadata = {**_jsonable(extra), **item.derived, "source_index": position}
        rows.append({"benchmark": benchmark.name, "id": item_id, "domain": benchmark.domain,
                     "source": benchmark.name, "prompt": item.prompt, "answer": item.answer,
                     "answer_format": benchmark.answer_format,
                     "metadata": json.dumps(metadata, sort_keys=True, ensure_ascii=False)})
    if benchmark.evaluated_size is not None and len(rows) != benchmark.evaluated_size:
        warnings.warn(f"benchmark {benchmark.name!r}: {len(rows)} items from {origin}; the paper's authors scored "
                      f"{benchmark.evaluated_size}", BenchmarkSizeWarning, stacklevel=2)
    return pd.DataFrame(rows, columns=ITEM_COLUMNS)


def load_file_items(benchmark: Benchmark, path: str | Path) -> pd.DataFrame:
    """A real benchmark's items from its local file in the native schema."""
    path = Path(path)
    if not path.is_file():
        hub = f" or set benchmarks.hub_fallback: true to load {benchmark.hub.name}" if benchmark.hub else ""
        raise FileNotFoundError(f"benchmark {benchmark.name!r}: file {path} does not exist; put the benchmark "
                                f"there{hub}")
    return native_items(benchmark, read_table(path), str(path))


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


def local_source(path: str | None, hub_fallback: bool) -> str | None:
    """The local file to read, or None when the benchmark is to come from the hub: its file is absent and the config
    sets benchmarks.hub_fallback."""
    if path is not None and hub_fallback and not Path(path).is_file():
        return None
    return path
