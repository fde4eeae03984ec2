"""The `knights_knaves` answer format: the set of knight/knave assignments, one per person; the gold reads
"Zoey is a knight, Oliver is a knave"."""
from __future__ import annotations

import re
from typing import Mapping, Sequence

from dataflex_rl.formats.base import AnswerFormat, Verdict
from dataflex_rl.formats.forms import SWAPS
from dataflex_rl.artefacts.items import item_metadata

TEMPLATE = ("{question}\n\nReason step by step. Then write \"CONCLUSION:\" and, for every inhabitant, one sentence of "
            "the form \"X is a knight\" or \"X is a knave\".")

_ROLE = r"(?:is\s+an?|:|-|–|—|=)\s*(knight|knave)s?\b"
_ANY_ASSIGNMENT = re.compile(r"\b([A-Z][a-z]+)\s+is\s+an?\s+(knight|knave)\b", re.IGNORECASE)
_CONCLUSION = re.compile(r"(?i)\bconclusion\b|\bfinal\s+answer\b|\bthe\s+answer\s+is\b|\banswer\s*:")


def knights_knaves_assignments(text: str, names: Sequence[str] | None = None) -> dict[str, str]:
    """{'Zoey': 'knight', ...} from sentences such as 'Zoey is a knight, and Oliver is a knave' (or 'Zoey: knight');
    with `names`, only those people are read. A person stated twice keeps the last role."""
    if not names:
        return {name.capitalize(): role.lower() for name, role in _ANY_ASSIGNMENT.findall(text)}
    pattern = re.compile(r"\b(" + "|".join(re.escape(n) for n in names) + r")\b\**\s*" + _ROLE, re.IGNORECASE)
    canonical = {n.casefold(): n for n in names}
    return {canonical[name.casefold()]: role.lower() for name, role in pattern.findall(text)}


def stated_assignments(response: str, names: Sequence[str] | None = None) -> dict[str, str]:
    """The response's final assignments: those after its last CONCLUSION / final-answer marker, else anywhere."""
    markers = list(_CONCLUSION.finditer(response))
    if markers:
        concluded = knights_knaves_assignments(response[markers[-1].start() :], names)
        if concluded:
            return concluded
    return knights_knaves_assignments(response, names)


def _names(item: Mapping) -> list[str]:
    """The item's people: its metadata `names`, else those its gold names."""
    return item_metadata(item).get("names") or list(knights_knaves_assignments(str(item["answer"])))


def verify_knights_knaves(response: str, item: Mapping) -> Verdict:
    """Correct iff every person's stated role (the last one after the response's conclusion) is the gold role."""
    names = _names(item)
    gold = knights_knaves_assignments(str(item["answer"]), names)
    predicted = stated_assignments(response, names)
    return Verdict(parsed=bool(predicted), correct=bool(predicted) and predicted == gold)


def gold_forms(answer: str, item: Mapping) -> list[str]:
    assignments = knights_knaves_assignments(answer, _names(item))
    sentences = [f"{name} is a {role}" for name, role in assignments.items()]
    numbered = "\n".join(f"({i}) {s}" for i, s in enumerate(sentences, start=1))
    reversed_ = " and ".join(reversed(sentences))
    first, role = next(iter(assignments.items()))
    wrong_guess = f"Suppose {first} is a {SWAPS[role]}; that leads to a contradiction."
    return [
        ", ".join(sentences) + ".",
        f"CONCLUSION:\n{numbered}",
        f"{reversed_}.",
        f"{wrong_guess}\nCONCLUSION: {'. '.join(sentences)}.",
        "; ".join(f"{name}: {role}" for name, role in assignments.items()),
    ]


def wrong_forms(answer: str, item: Mapping) -> list[str]:
    """The first person's role flipped, as sentences and after a CONCLUSION line."""
    assignments = knights_knaves_assignments(answer, _names(item))
    first = next(iter(assignments))
    flipped = {**assignments, first: SWAPS[assignments[first]]}
    return [", ".join(f"{n} is a {r}" for n, r in flipped.items()) + ".",
            "CONCLUSION:\n" + "\n".join(f"{n} is a {r}" for n, r in flipped.items())]


def gold_problem(item: Mapping) -> str | None:
    answer = item["answer"]
    if knights_knaves_assignments(answer, item_metadata(item).get("names")):
        return None
    return f"no 'X is a knight/knave' assignment in {answer!r}"


FORMAT = AnswerFormat("knights_knaves", verify_knights_knaves, gold_forms, wrong_forms, gold_problem,
                      template=TEMPLATE)
