"""Whether a Hugging Face model directory's weight files could be loaded, read without loading a weight: every shard a
weight index names is there, and every safetensors file holds a readable header whose tensors fill the file.

A download that stopped part-way leaves exactly these: an index beside some of its shards, a 0-byte file, a file cut
short. verl and vLLM find them only when a train or score job on the cluster opens the weights.
"""
from __future__ import annotations

import json
import struct
from pathlib import Path

INDEX_PATTERNS = ("*.safetensors.index.json", "*.bin.index.json")
NAMED_SHARDS = 3  # the missing shards a problem names; it counts the rest


def index_problems(index: Path) -> list[str]:
    """Why the weight index `index` (model.safetensors.index.json and the like) cannot be followed: it is not a
    weight index, or it names shards its directory lacks (the first few named)."""
    try:
        shards = json.loads(index.read_text(encoding="utf-8"))["weight_map"].values()
        names = sorted({str(name) for name in shards})
    except (OSError, ValueError, KeyError, TypeError, AttributeError) as error:
        return [f"{index.name} is not a weight index with a weight_map ({type(error).__name__}: {error})"]
    missing = [name for name in names if not (index.parent / name).is_file()]
    if not missing:
        return []
    more = f" and {len(missing) - NAMED_SHARDS} more" if len(missing) > NAMED_SHARDS else ""
    return [f"{index.name} names {len(names)} shard(s), {len(missing)} of them not in the directory: "
            f"{', '.join(missing[:NAMED_SHARDS])}{more}"]


def safetensors_problem(path: Path) -> str | None:
    """Why `path` is not a readable safetensors file, from its header alone: an 8-byte little-endian header length,
    that many bytes of JSON, then the tensor data the header's data_offsets place (exactly filling the file, as the
    safetensors loader requires)."""
    try:
        size = path.stat().st_size
        with path.open("rb") as file:
            head = file.read(8)
            (length,) = struct.unpack("<Q", head) if len(head) == 8 else (None,)
            text = file.read(length) if length is not None and length <= size - 8 else b""
    except OSError as error:
        return f"{path.name} cannot be read ({type(error).__name__}: {error})"
    if size == 0:
        return f"{path.name} is empty (0 bytes)"
    if length is None:
        return f"{path.name} has {size} byte(s), fewer than the 8 of a safetensors header's length"
    if length > size - 8:
        return (f"{path.name}: unreadable safetensors header: its length field says {length} bytes, but the file has "
                f"{size - 8} after it")
    try:
        header = json.loads(text.decode("utf-8"))
        ends = [int(entry["data_offsets"][1]) for name, entry in header.items() if name != "__metadata__"]
    except (ValueError, KeyError, TypeError, IndexError, AttributeError) as error:
        return f"{path.name}: unreadable safetensors header ({type(error).__name__}: {error})"
    data = size - 8 - length
    if max(ends, default=0) != data:
        return (f"{path.name}: its safetensors header places {max(ends, default=0)} bytes of tensor data, but the file "
                f"holds {data} after the header (cut short, or not written as one safetensors file)")
    return None


def weight_file_problems(directory: Path) -> list[str]:
    """What in `directory`'s weight files a loader would fail on: its weight indexes' missing shards, and each
    safetensors file whose header is unreadable or does not match its size."""
    problems = [problem for pattern in INDEX_PATTERNS for index in sorted(directory.glob(pattern))
                for problem in index_problems(index)]
    return problems + [problem for path in sorted(directory.glob("*.safetensors")) if path.is_file()
                       for problem in [safetensors_problem(path)] if problem]
