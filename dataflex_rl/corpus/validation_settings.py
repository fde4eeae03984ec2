"""A study's `data_validation` settings, with their defaults: each section (`corpus`, `benchmarks`) resolves to one
`ValidationSettings`.

Its row checks (`ROW_CHECKS`: the character caps, a benchmark's `allow_duplicates`) decide which rows a data job keeps,
so they are in the data job's params and in the slices downstream of it (dataflex_rl.study.resolved), each only where it
differs from its default: a config that writes a default out builds the same data as one that leaves it out. Its gates
(the token caps, the quarantine threshold) decide whether the study goes on, never what the data hold, so they are in
no slice (dataflex_rl.corpus.token_caps, dataflex_rl.corpus.quarantine_gate). Light: the study imports it at parse time.
"""
from __future__ import annotations

from dataclasses import dataclass, fields
from typing import Any, Mapping

# Length caps (characters) of a row's prompt and gold answer, corpus files and benchmarks alike: far above every
# procedural item and every item of the public real benchmark files (the longest: an OlympiadBench question of 4,415
# characters, an OlympiadBench gold of 202), far below a runaway row (a 1 MB prompt makes the tokenizer build take
# minutes).
MAX_PROMPT_CHARS = 20_000
MAX_ANSWER_CHARS = 2_000
# The quarantine gate's threshold per section. A benchmark that loses an item changes its denominator: by default any
# quarantined benchmark row stops the study.
MAX_QUARANTINE_FRACTION = {"corpus": 0.05, "benchmarks": 0.0}
# The settings that decide what a data job keeps (the rest are gates).
ROW_CHECKS = ("max_prompt_chars", "max_answer_chars", "allow_duplicates")


@dataclass(frozen=True)
class ValidationSettings:
    """One `data_validation` section with every default filled in. `allow_duplicates` is a benchmark setting (the
    schema refuses it under `corpus`); a token cap left at None is what the model's positions leave
    (dataflex_rl.corpus.token_caps)."""

    max_quarantine_fraction: float
    max_prompt_chars: int = MAX_PROMPT_CHARS
    max_answer_chars: int = MAX_ANSWER_CHARS
    allow_duplicates: bool = False
    max_prompt_tokens: int | None = None
    max_answer_tokens: int | None = None

    @classmethod
    def for_section(cls, section: str, entry: Mapping[str, Any] | None = None) -> "ValidationSettings":
        """The settings of config section `data_validation.<section>` (`entry`; None or {}: every default)."""
        return cls(**{"max_quarantine_fraction": MAX_QUARANTINE_FRACTION[section], **(entry or {})})

    def row_checks(self) -> dict[str, Any]:
        """{setting: value} of the row checks that differ from their defaults, in sorted order: what a data job's
        params and the slices carry (`for_section` of it gives back the row checks)."""
        defaults = {field.name: field.default for field in fields(self)}
        return {key: getattr(self, key) for key in sorted(ROW_CHECKS) if getattr(self, key) != defaults[key]}
