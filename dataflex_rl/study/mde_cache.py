"""The power plan's standardised minimum detectable effects, remembered in the workflow's working directory.

The plan needs one root of scipy's noncentral t power per (seeds, power, alpha) (dataflex_rl.stats.power), and
importing scipy.stats for it costs about half a second of every dry run: a tenth of the paper's once its verl check is
cached. The roots a dry run computes are kept in `.snakemake/dataflex_rl/standardised_mde.json` beside that check,
under scipy's version, and a later dry run that plans the same seeds reads them instead: the same floats (JSON keeps a
float's every bit), without importing scipy.stats. The file is only a cache: unreadable, or written under another
scipy, it is ignored and written again; nothing else reads it.
"""
from __future__ import annotations

import json
from importlib import metadata
from pathlib import Path

from dataflex_rl.artefacts.atomic import write_json

PATH = Path(".snakemake") / "dataflex_rl" / "standardised_mde.json"  # under the workflow's working directory


class RememberedMdes:
    """`dataflex_rl.stats.power.standardised_mde` for the power plan, read from the file where it has the value;
    `save` writes what was computed anew."""

    def __init__(self, workdir: str | Path):
        self.path = Path(workdir) / PATH
        self.scipy = metadata.version("scipy")
        self.values: dict[str, float] = self._read()
        self.added = False

    def _read(self) -> dict[str, float]:
        try:
            kept = json.loads(self.path.read_text())
        except (OSError, ValueError):
            return {}
        if not isinstance(kept, dict) or kept.get("scipy") != self.scipy or not isinstance(kept.get("values"), dict):
            return {}
        return {key: value for key, value in kept["values"].items() if isinstance(value, float)}

    def __call__(self, n: int, power: float, alpha: float) -> float:
        key = f"{n} {power!r} {alpha!r}"
        if key not in self.values:
            from dataflex_rl.stats.power import standardised_mde

            self.values[key] = standardised_mde(n, power, alpha)
            self.added = True
        return self.values[key]

    def save(self) -> None:
        """Write the file where this plan computed a value it lacked; a directory that cannot be written keeps the
        plan going without it."""
        if self.added:
            try:
                write_json(self.path, {"scipy": self.scipy, "values": self.values})
            except OSError:
                pass
