"""One prompt rendering for training and evaluation alike, so that what is trained is what is scored.

A procedural item's question goes into the config's `prompt_template` (`{question}`); a real benchmark's item into
its answer format's template (dataflex_rl.formats: the options, the answer instruction). The text is then sent
as one user turn through the tokenizer's chat template when the tokenizer has one (instruct and Qwen2.5 base
tokenizers do); the embedded tiny tokenizer has none, so its prompts are the template's text exactly.
"""
from __future__ import annotations

from typing import Mapping

from dataflex_rl.item_sources.registry import REGISTRY
from dataflex_rl.formats import get_format

DEFAULT_TEMPLATE = "{question}\nAnswer:"


def as_chat(text: str, tokenizer=None) -> str:
    """`text` as a single user turn of the tokenizer's chat template, with the assistant's turn opened; `text`
    itself when there is no tokenizer or it has no chat template."""
    if tokenizer is None or not getattr(tokenizer, "chat_template", None):
        return text
    return tokenizer.apply_chat_template([{"role": "user", "content": text}], tokenize=False,
                                         add_generation_prompt=True)


def render_prompt(question: str, template: str = DEFAULT_TEMPLATE, tokenizer=None) -> str:
    return as_chat(template.format(question=question), tokenizer)


def render_item_prompt(item: Mapping, template: str = DEFAULT_TEMPLATE, tokenizer=None) -> str:
    """A benchmark item's prompt: its real benchmark's answer-format template (with the options from its metadata), or
    the config `template` for a procedural item or a training row (which has no `benchmark`)."""
    benchmark = REGISTRY.get(item.get("benchmark"))
    if benchmark is None or benchmark.procedural:
        return render_prompt(item["prompt"], template, tokenizer)
    return as_chat(get_format(benchmark.answer_format).user_message(item), tokenizer)


def render_target(answer: str) -> str:
    """The supervised warm-up's target text: the gold answer after one space (the model then emits end-of-text)."""
    return f" {answer}"
