"""How a refusal names what was meant: the closest known name, and the known names in one line."""
from __future__ import annotations

import difflib


def did_you_mean(word: str, known) -> str:
    match = difflib.get_close_matches(str(word), [str(k) for k in known], n=1, cutoff=0.6)
    return f"; did you mean {match[0]!r}?" if match else ""


def known(names) -> str:
    return ", ".join(sorted(map(str, names)))
