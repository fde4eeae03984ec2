"""The `procedural` answer format (the reasoning-gym stand-ins): the generator's own scorer, reward 1 only at full
credit, since `score_answer` gives partial credit to near-misses such as " 2" or "2.0". Its scorer needs the
generator's entry metadata, so a researcher's corpus file cannot declare it."""
from __future__ import annotations

from functools import lru_cache
from typing import Callable, Mapping

from dataflex_rl.formats.base import NO_ANSWER, AnswerFormat, Verdict
from dataflex_rl.formats.extract import final_answer_text
from dataflex_rl.formats.forms import answer_lines, perturbed
from dataflex_rl.artefacts.items import item_metadata

FULL_CREDIT = 1.0


@lru_cache(maxsize=None)
def _reasoning_gym_scorer(dataset: str) -> Callable:
    import reasoning_gym

    return reasoning_gym.get_score_answer_fn(dataset)


def verify_procedural(response: str, item: Mapping) -> Verdict:
    answer = final_answer_text(response)
    if not answer:
        return Verdict(parsed=False, correct=False)
    metadata = item_metadata(item)
    entry = {"question": item["prompt"], "answer": item["answer"], "metadata": metadata}
    score = _reasoning_gym_scorer(metadata["source_dataset"])(answer, entry)
    return Verdict(parsed=True, correct=score is not None and float(score) >= FULL_CREDIT)


def gold_forms(answer: str, item: Mapping) -> list[str]:
    return answer_lines(answer)


def wrong_forms(answer: str, item: Mapping) -> list[str]:
    return answer_lines(perturbed(answer))


def gold_problem(item: Mapping) -> str | None:
    """None: the generator wrote the gold, and its scorer reads it."""
    return None


# The scorers decide what a non-empty answer line means, so only the empty response states no answer.
FORMAT = AnswerFormat("procedural", verify_procedural, gold_forms, wrong_forms, gold_problem, no_answer=NO_ANSWER[:1],
                      in_corpus_files=False)
