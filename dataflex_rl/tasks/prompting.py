"""One prompt template for training and evaluation alike, so that what is trained is what is scored."""
from __future__ import annotations

DEFAULT_TEMPLATE = "{question}\nAnswer:"


def render_prompt(question: str, template: str = DEFAULT_TEMPLATE) -> str:
    return template.format(question=question)


def render_target(answer: str) -> str:
    """The supervised warm-up's target text: the gold answer after one space (the model then emits end-of-text)."""
    return f" {answer}"
