"""The answer formats: one module each, holding everything that knows the format.

An item's `answer_format` names one of FORMATS. Its module has the extractor (what the format reads in a response),
the verifier, the surface forms calibration writes the gold and wrong answers in, the gold check of row validation
and, for the real benchmarks, the prompt template; `FORMAT` (an AnswerFormat) declares them. Verifier calibration
(dataflex_rl.verify.calibration), row validation (dataflex_rl.corpus.validation), prompt rendering
(dataflex_rl.corpus.prompting) and scoring read the format from here. docs/benchmarks.md says how to add one.
"""
from __future__ import annotations

from dataflex_rl.formats import exact, knights_knaves, math, multiple_choice, procedural
from dataflex_rl.formats.base import AnswerFormat

# In the order corpus-file errors list them (config/schema.yaml's enum of `corpus.files[].answer_format` is the same).
FORMATS: dict[str, AnswerFormat] = {
    module.FORMAT.name: module.FORMAT for module in (math, multiple_choice, exact, knights_knaves, procedural)
}


def get_format(name: str) -> AnswerFormat:
    try:
        return FORMATS[name]
    except KeyError:
        raise ValueError(f"no verifier for answer format {name!r}; known: {', '.join(FORMATS)}") from None

