"""What an answer format is: the verdict its verifier returns and the parts every format module declares."""
from __future__ import annotations

from dataclasses import dataclass
from typing import Callable, Mapping

# Responses that state no answer at all: calibration requires each to come back parsed=False.
NO_ANSWER = ("", "I am not sure how to solve this.", "Let me think about it step by step.\nFirst, we list the facts.")


@dataclass(frozen=True)
class Verdict:
    parsed: bool
    correct: bool


@dataclass(frozen=True)
class AnswerFormat:
    """One answer format (an item's `answer_format`), as its module in dataflex_rl.formats declares it.

    - `verify(response, item)`: whether the response states an answer the format can read, and whether it is the gold.
    - `gold_forms(answer, item)` / `wrong_forms(answer, item)`: the stripped gold written the ways models write it,
      and wrong answers in every form the verifier accepts (verifier calibration).
    - `gold_problem(item)`: why the item's gold cannot be read in this format, or None (row validation).
    - `template`: a real benchmark's user message, with `{question}` and the fields `template_fields(item)` returns;
      it asks for the answer in the form the format's extractor reads first. None where the config's
      `prompt_template` is used (procedural items).
    - `no_answer`: responses calibration requires to be parse failures.
    - `in_corpus_files`: whether a researcher's corpus file may declare the format (config/schema.yaml's
      `corpus.files[].answer_format` lists exactly these).
    """

    name: str
    verify: Callable[[str, Mapping], Verdict]
    gold_forms: Callable[[str, Mapping], list[str]]
    wrong_forms: Callable[[str, Mapping], list[str]]
    gold_problem: Callable[[Mapping], str | None]
    template: str | None = None
    template_fields: Callable[[Mapping], Mapping[str, str]] | None = None
    no_answer: tuple[str, ...] = NO_ANSWER
    in_corpus_files: bool = True

    def user_message(self, item: Mapping) -> str:
        """The format's template filled with the item's question (and the format's own fields, e.g. the options)."""
        if self.template is None:
            raise ValueError(f"answer format {self.name!r} has no prompt template")
        fields = self.template_fields(item) if self.template_fields else {}
        return self.template.format(question=item["prompt"], **fields)
