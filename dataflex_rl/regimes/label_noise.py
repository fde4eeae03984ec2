"""`label_noise(fraction)`: round(fraction·N) prompts get a wrong gold answer of the same answer format (the seed
paper's 20% label noise).

A wrong gold must be one the item's own verifier (dataflex_rl.formats) reads as a gold and under which it rejects the
true answer in every form the format's calibration writes it, so no new gold is equivalent to the old one ('0.5' for
'1/2'). Candidates, first qualifying one wins: the other golds of the prompt's source in the corpus, in a seeded
order (a wrong gold that looks like the source's golds: another number, another option letter, another relation),
then the format's own wrong answers (a number moved by one, the first person's role flipped, another letter).
"""
from __future__ import annotations

from typing import Iterator, Mapping

import numpy as np
import pandas as pd

from dataflex_rl.formats import get_format
from dataflex_rl.regimes.record import RECORD_COLUMNS, rows_per_domain
from dataflex_rl.regimes.shares import rounded
from dataflex_rl.verify.verifiers import reward


def is_wrong_gold(candidate: str, item: Mapping) -> bool:
    """Whether `candidate` as the item's gold is readable by its format and rejects the true gold in all its forms."""
    answer_format = get_format(item["answer_format"])
    relabelled = {**item, "answer": candidate}
    if answer_format.gold_problem(relabelled) is not None or reward(candidate, relabelled) != 1.0:
        return False
    return all(reward(form, relabelled) == 0.0 for form in answer_format.gold_forms(str(item["answer"]), item))


def _candidates(item: Mapping, source_golds: list[str], rng: np.random.Generator) -> Iterator[tuple[str, str]]:
    """(candidate, where it came from): the source's other golds in a seeded order, then the format's wrong answers."""
    others = [gold for gold in source_golds if gold != item["answer"]]
    for position in rng.permutation(len(others)):
        yield others[position], "corpus"
    for wrong in get_format(item["answer_format"]).wrong_forms(str(item["answer"]), item):
        yield wrong, "format"


def wrong_gold(item: Mapping, source_golds: list[str], rng: np.random.Generator) -> tuple[str, str]:
    """The first candidate that `is_wrong_gold`, and where it came from."""
    for candidate, origin in _candidates(item, source_golds, rng):
        if is_wrong_gold(candidate, item):
            return candidate, origin
    raise ValueError(f"regime label_noise: no wrong gold for prompt {item['id']!r} (format {item['answer_format']}, "
                     f"gold {item['answer']!r}): neither the other golds of source {item['source']!r} nor the "
                     "format's wrong answers are golds its verifier reads and that reject the true answer; remove the "
                     "prompt from the corpus or fix the format's wrong_forms (dataflex_rl/formats/)")


def label_noise(corpus: pd.DataFrame, params: Mapping, rng: np.random.Generator,
                solve_rates: Mapping[str, float] | None) -> tuple[pd.DataFrame, pd.DataFrame, dict]:
    """round(fraction·N) prompts (half up), drawn uniformly, each get `wrong_gold`."""
    out = corpus.reset_index(drop=True).copy()
    chosen = np.sort(rng.choice(len(out), size=rounded(params["fraction"] * len(out)), replace=False))
    golds = {source: sorted(set(group)) for source, group in out.groupby("source")["answer"]}
    record = pd.DataFrame({"id": out["id"].to_numpy(), "action": "kept", "old_answer": None, "new_answer": None},
                          columns=list(RECORD_COLUMNS))
    origins = {"corpus": 0, "format": 0}
    for row in chosen:
        item = out.loc[row].to_dict()
        new, origin = wrong_gold(item, golds[item["source"]], rng)
        origins[origin] += 1
        out.loc[row, "answer"] = new
        record.loc[row, ["action", "old_answer", "new_answer"]] = ["wrong_gold", item["answer"], new]
    return out, record, {"changed": len(chosen), "changed_per_domain": rows_per_domain(out.loc[chosen]),
                         "wrong_gold_from": origins}
