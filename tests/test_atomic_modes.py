"""Files the atomic writer puts in place are readable as the umask says (issue 36 item 4), not mkstemp's 0600."""
from __future__ import annotations

import contextlib
import os
import stat

import pandas as pd
import pytest

from dataflex_rl.artefacts import atomic


@contextlib.contextmanager
def umask(value: int):
    previous = os.umask(value)
    try:
        yield
    finally:
        os.umask(previous)


def mode(path) -> int:
    return stat.S_IMODE(os.stat(path).st_mode)


@pytest.mark.parametrize("mask, expected", [(0o022, 0o644), (0o027, 0o640)])
def test_atomic_writes_get_the_mode_open_would_give(tmp_path, mask, expected):
    with umask(mask):
        atomic.write_text(tmp_path / "a.txt", "x\n")
        atomic.write_json(tmp_path / "b.json", {"a": 1})
        atomic.write_parquet(tmp_path / "c.parquet", pd.DataFrame({"a": [1]}), metadata={"k": "v"})
        atomic.write_csv(tmp_path / "d.csv", pd.DataFrame({"a": [1]}))
        with atomic.atomic_directory(tmp_path / "model") as folder:
            (folder / "w.txt").write_text("w")
    for name in ("a.txt", "b.json", "c.parquet", "d.csv", "model/w.txt"):
        assert mode(tmp_path / name) == expected, name
    assert mode(tmp_path / "model") == expected | 0o111 & ~mask


def test_reading_the_umask_restores_it():
    with umask(0o027):
        assert atomic._umask() == 0o027
        assert atomic._umask() == 0o027
        assert os.umask(0o027) == 0o027
