"""An item's verdict and reward: the verifier of the answer format the item names (dataflex_rl.formats), which reports
whether it parsed an answer at all, separately from correctness."""
from __future__ import annotations

from typing import Callable, Mapping

from dataflex_rl.formats import get_format
from dataflex_rl.formats.base import Verdict


def get_verifier(answer_format: str) -> Callable[[str, Mapping], Verdict]:
    return get_format(answer_format).verify


def reward(response: str, item: Mapping) -> float:
    """Binary verifiable reward: 1.0 iff the item's verifier says correct."""
    return 1.0 if get_verifier(item["answer_format"])(response, item).correct else 0.0
