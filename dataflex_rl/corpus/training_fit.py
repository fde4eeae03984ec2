"""Whether a training corpus fits its run, checked where the rows and the model's tokenizer are known: every rendered
prompt within the prompt-token cap (by the embedded base model's build, the first job that has the tokenizer, and
again at train start, on the corpus the run trains on), every gold answer within the answer-token cap (by the base
model's build, whose warm-up trains on the answers), and at least one step's worth of prompts (at train start,
after exact duplicates, decontamination and the run's regime have shrunk the corpus).

Both are gates: a corpus that passes trains exactly as before, one that fails stops the job before its first update
with a message naming the rows, the cap or the size, the config keys and the fix. The dry run checks what it knows
earlier (dataflex_rl.study.config_checks): the cap against the model's positions, the corpus's size bound against
training.prompts_per_step. Torch-free: the callers tokenize.
"""
from __future__ import annotations

from typing import Any, Mapping

from dataflex_rl.corpus.token_caps import CappedText, TokenCap, TokenCaps, answer_token_cap, token_cap
from dataflex_rl.corpus.validation_settings import ValidationSettings

CAP_KEY = "data_validation.corpus.max_prompt_tokens"


class TrainingCorpusError(ValueError):
    """The training corpus holds a prompt longer than the token cap, or fewer prompts than one step draws."""


TRAINING_PROMPTS = CappedText(CAP_KEY, TrainingCorpusError)
TRAINING_ANSWERS = CappedText("data_validation.corpus.max_answer_tokens", TrainingCorpusError)


def prompt_token_cap(model_key: str, model: Mapping[str, Any], max_new_tokens: int,
                     configured: int | None = None, length_key: str = "training.max_new_tokens") -> TokenCap | None:
    """The longest prompt, in tokens after the template, a model of `model` settings trains on (CAP_KEY), by default
    what the model's positions leave beside a response of `max_new_tokens` (the setting `length_key`: the study's, or
    the model's own); None for a model without a built shape."""
    return token_cap(TRAINING_PROMPTS, model_key, model, f"{length_key} {max_new_tokens}", max_new_tokens, configured)


def corpus_token_caps(model_key: str, model: Mapping[str, Any], max_new_tokens: int,
                      section: ValidationSettings, length_key: str = "training.max_new_tokens") -> TokenCaps | None:
    """The caps of a model's base build and train jobs, configured in `data_validation.corpus` (`section`): its
    prompts (`prompt_token_cap`) and its gold answers (the base's warm-up trains on them); None for a model without a
    built shape."""
    prompt = prompt_token_cap(model_key, model, max_new_tokens, section.max_prompt_tokens, length_key)
    if prompt is None:
        return None
    return TokenCaps(prompt, answer_token_cap(TRAINING_ANSWERS, model_key, model, section.max_answer_tokens))


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
