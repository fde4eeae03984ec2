"""The rule every training step's draw obeys: its `training.prompts_per_step` prompts are distinct rows, so the rows a
step draws from — the training corpus, or a prompt selection's kept set of a round — must hold at least that many.
Otherwise one step trains on the same prompt more than once, and the run makes many passes over a few prompts."""
from __future__ import annotations


def repeated_draw_problem(prompts_per_step: int, rows: int, rows_named: str, fix: str) -> str | None:
    """The refusal's text when `prompts_per_step` exceeds the `rows` a step draws from (`rows_named` says what they
    are and how many), ending in `fix`; None when the step fits."""
    if prompts_per_step <= rows:
        return None
    return f"{prompts_per_step} > {rows_named}: a step would draw the same prompt more than once — {fix}"
