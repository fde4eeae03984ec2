"""Whether a training corpus fits its run, checked where the rows and the model's tokenizer are known: every rendered
prompt within the prompt-token cap (by the embedded base model's build, the first job that has the tokenizer, and
again at train start, on the corpus the run trains on), and at least one step's worth of prompts (at train start,
after exact duplicates, decontamination and the run's regime have shrunk the corpus).

Both are gates: a corpus that passes trains exactly as before, one that fails stops the job before its first update
with a message naming the rows, the cap or the size, the config keys and the fix. The dry run checks what it knows
earlier (dataflex_rl.config_checks): the cap against the model's positions, the corpus's size bound against
training.prompts_per_step. Torch-free: the callers tokenize.
"""
from __future__ import annotations

from typing import Any, Mapping, Sequence

CAP_KEY = "data_validation.corpus.max_prompt_tokens"
EXAMPLES = 3  # over-long rows named in the message (all are counted)


class TrainingCorpusError(ValueError):
    """The training corpus holds a prompt longer than the token cap, or fewer prompts than one step draws."""


def prompt_token_cap(model_key: str, model: Mapping[str, Any], max_new_tokens: int,
                     configured: int | None = None) -> dict[str, Any] | None:
    """The longest prompt, in tokens after the template, a model of `model` settings (a backend's `model_settings`)
    trains on, and where that number comes from: `configured` (CAP_KEY), else what the model's positions leave beside
    a response of `max_new_tokens`. None for a model without a built shape (verl loads its own and caps prompts with
    its own data settings)."""
    shape = model.get("shape")
    if shape is None:
        return None
    if configured is not None:
        return {"tokens": int(configured), "source": CAP_KEY}
    positions = shape["max_position_embeddings"]
    return {"tokens": positions - max_new_tokens,
            "source": f"{model_key}.shape.max_position_embeddings {positions} − training.max_new_tokens "
                      f"{max_new_tokens}, the default of {CAP_KEY}"}


def check_prompt_tokens(ids: Sequence[str], lengths: Sequence[int], cap: Mapping[str, Any] | None,
                        corpus: str) -> None:
    """Refuse every prompt of `corpus` longer than `cap` tokens, naming the first EXAMPLES with their lengths."""
    if cap is None:
        return
    over = [(row_id, length) for row_id, length in zip(ids, lengths, strict=True) if length > cap["tokens"]]
    if not over:
        return
    named = ", ".join(f"{row_id!r} ({length} tokens)" for row_id, length in over[:EXAMPLES])
    more = f" and {len(over) - EXAMPLES} more" if len(over) > EXAMPLES else ""
    raise TrainingCorpusError(
        f"{corpus}: {len(over)} of {len(lengths)} prompts are longer than {cap['tokens']} tokens after the template "
        f"({cap['source']}): {named}{more}. A longer prompt would run past the model's positions and the memory its "
        f"jobs were sized for. Shorten or remove those rows (data_validation.corpus.max_prompt_chars quarantines long "
        f"prompts when the corpus is built), raise the model's max_position_embeddings, or set {CAP_KEY}")


def check_prompts_per_step(rows: int, prompts_per_step: int, corpus: str) -> None:
    """Refuse a corpus with fewer rows than one step draws: the prompt stream would repeat a prompt within a step
    (or, with no row at all, have nothing to draw)."""
    if rows >= prompts_per_step:
        return
    lower = f"lower training.prompts_per_step to at most {rows}, or " if rows else ""
    raise TrainingCorpusError(
        f"training.prompts_per_step: {prompts_per_step} > the {rows} rows of the training corpus {corpus} (what "
        f"training sees, after exact duplicates, decontamination and the run's regime): a step would draw the same "
        f"prompt more than once — {lower}raise corpus.items_per_domain or add corpus.files (the audits in "
        f"results/corpus/ say what was dropped)")
