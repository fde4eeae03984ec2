"""A selection round's rollouts saved in the run's state folder as each stream (the candidates', the validation
prompts') finishes: a requeued or crashed round resumes after them instead of drawing them again (hours of GPU time at
the paper's sizes: docs/prompt_selection.md). One parquet per stream, a row per response: the corpus row, the sample
index, the response's token ids and its reward. A file whose rows or sample count differ from what the round asks
(another round's, a changed setting) is not used. The folder goes once the round's file is written (round_job.py).
"""
from __future__ import annotations

import sys
from pathlib import Path
from typing import Sequence

import pandas as pd
import torch
from torch import Tensor

from dataflex_rl.artefacts.atomic import write_parquet


def stream_file(folder: Path, stream: str) -> Path:
    return Path(folder) / f"{stream.replace(':', '_')}.parquet"


def save(path: Path, rows: Sequence[int], responses: Sequence[Sequence[Sequence[int]]], rewards: Tensor) -> None:
    """The stream's responses ([N][K] token ids) and rewards [N, K], atomically."""
    samples = rewards.shape[1]
    write_parquet(path, pd.DataFrame({
        "row": [int(row) for row in rows for _ in range(samples)],
        "sample": [j for _ in rows for j in range(samples)],
        "tokens": [[int(t) for t in response] for group in responses for response in group],
        "reward": rewards.reshape(-1).double().tolist()}))


def load(path: Path, rows: Sequence[int], samples: int) -> tuple[list[list[list[int]]], Tensor] | None:
    """The saved responses and rewards of the stream where `path` holds exactly these rows with `samples` each, else
    None (nothing saved, or another draw's)."""
    if not Path(path).exists():
        return None
    frame = pd.read_parquet(path)
    expected = [int(row) for row in rows for _ in range(samples)]
    if frame["row"].tolist() != expected or frame["sample"].tolist() != [j for _ in rows for j in range(samples)]:
        print(f"{path}: saved rollouts of other rows or sample counts than this round draws; drawing them again",
              file=sys.stderr, flush=True)
        return None
    tokens = [[int(t) for t in response] for response in frame["tokens"]]
    responses = [tokens[i * samples:(i + 1) * samples] for i in range(len(rows))]
    return responses, torch.tensor(frame["reward"].tolist(), dtype=torch.float32).reshape(len(rows), samples)
