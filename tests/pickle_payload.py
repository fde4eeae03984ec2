"""A pickle that runs code when it is loaded: its object reduces to `Path.touch(marker)`, so the marker file exists
exactly when something unpickled it with code execution allowed (as `torch.load(weights_only=False)` does)."""
import os
from pathlib import Path

import torch


class TouchOnLoad:
    def __init__(self, marker: Path):
        self.marker = Path(marker)

    def __reduce__(self):
        return Path.touch, (self.marker,)


def write_payload(path: Path, marker: Path, **state) -> None:
    """`state` with a TouchOnLoad beside it, saved by torch.save to `path` as a new file (os.replace: a hard link to
    the old one, such as a kept budget checkpoint, keeps its bytes)."""
    tmp = path.with_name(f".{path.name}.payload")
    torch.save({**state, "payload": TouchOnLoad(marker)}, tmp)
    os.replace(tmp, path)
