"""Token caps on the texts a job feeds a built model (prompts after the template, gold answers), checked where the
model's tokenizer exists. A cap is a gate, not a filter: texts within it run exactly as before, and one text over it
stops the job before it computes anything, naming how many texts are over, the first few with their lengths, the
cap, where the cap comes from and the fix. Being a gate, a cap is in no settings slice (dataflex_rl.study.resolved):
changing it reruns no finished job. Torch-free: the callers tokenize.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Mapping, Sequence, TypedDict

EXAMPLES = 3  # over-long texts named in the message (all are counted)

# Per kind of text: what the message calls them, how they are measured, why a longer one cannot run.
_KINDS = {
    "prompt": ("prompts", "after the template",
               "A longer prompt would run past the model's positions and the memory its jobs were sized for"),
    "answer": ("gold answers", "as the tokenizer spells them",
               "A longer gold answer leaves no room in the model's positions to write it or to train on it"),
}
# Per data_validation section: the first step of the fix, and when its character caps quarantine rows.
_SECTIONS = {"corpus": ("Shorten or remove those rows", "the corpus is built"),
             "benchmarks": ("Remove those items from the benchmark file", "the items are loaded")}


class TokenCap(TypedDict):
    """One cap: the most tokens a text may have, and where the number comes from (the config key, or the model
    positions it is derived from), which a refusal names."""

    tokens: int
    source: str


@dataclass(frozen=True)
class TokenCaps:
    """The prompt and gold-answer caps a job holds its texts to (the corpus's for a base build and a train job, the
    benchmarks' for a score job): one value from the rule's params to the backend and the fit checks. A job of a
    backend without a built shape gets None instead (verl loads its own model and caps with its own data settings)."""

    prompt: TokenCap
    answer: TokenCap


@dataclass(frozen=True)
class CappedText:
    """The texts a token cap bounds, named by the cap's config key (`data_validation.<corpus|benchmarks>.
    max_<prompt|answer>_tokens`), and the error a job raises for one over it."""

    key: str
    error: type[ValueError]

    def refusal(self, where: str, over: Sequence[tuple[str, int]], total: int, cap: TokenCap) -> str:
        section, name = self.key.split(".")[1:]
        kind = name.split("_")[1]
        nouns, measured, harm = _KINDS[kind]
        remedy, built = _SECTIONS[section]
        named = ", ".join(f"{text_id!r} ({length} tokens)" for text_id, length in over[:EXAMPLES])
        more = f" and {len(over) - EXAMPLES} more" if len(over) > EXAMPLES else ""
        return (f"{where}: {len(over)} of {total} {nouns} are longer than {cap['tokens']} tokens {measured} "
                f"({cap['source']}): {named}{more}. {harm}. {remedy} (data_validation.{section}.max_{kind}_chars "
                f"quarantines long {kind}s when {built}), raise the model's max_position_embeddings, or set {self.key}")


def token_cap(capped: CappedText, model_key: str, model: Mapping[str, Any], reserved: str, reserved_tokens: int,
              configured: int | None = None) -> TokenCap | None:
    """The cap of `capped` for a model of `model` settings (a backend's `model_settings`) and where the number comes
    from: `configured`, else what the model's positions leave beside `reserved_tokens` (`reserved` says what they
    hold). None for a model without a built shape (verl loads its own and caps with its own data settings)."""
    shape = model.get("shape")
    if shape is None:
        return None
    if configured is not None:
        return TokenCap(tokens=int(configured), source=capped.key)
    positions = shape["max_position_embeddings"]
    return TokenCap(tokens=positions - reserved_tokens,
                    source=f"{model_key}.shape.max_position_embeddings {positions} − {reserved}, the default of "
                           f"{capped.key}")


def answer_token_cap(capped: CappedText, model_key: str, model: Mapping[str, Any],
                     configured: int | None = None) -> TokenCap | None:
    """The longest gold answer of `capped`, in tokens, by default what the model's positions hold beside the
    end-of-text token that closes an answer: past that, no answer could be written or trained on."""
    return token_cap(capped, model_key, model, "1 end-of-text token", 1, configured)


def check_token_cap(capped: CappedText, ids: Sequence[str], lengths: Sequence[int], cap: TokenCap | None,
                    where: str) -> None:
    """Refuse every text of `where` longer than `cap` tokens, naming the first EXAMPLES with their lengths."""
    if cap is None:
        return
    over = [(text_id, length) for text_id, length in zip(ids, lengths, strict=True) if length > cap["tokens"]]
    if over:
        raise capped.error(capped.refusal(where, over, len(lengths), cap))


def answer_lengths(tokenizer, answers: Sequence[str]) -> list[int]:
    """Each gold answer's length in tokens, as the model's tokenizer spells it."""
    return [len(tokenizer(answer, add_special_tokens=False).input_ids) for answer in answers]
