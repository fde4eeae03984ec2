"""The tokens an answer stops at: the tokenizer's end-of-text and the end-of-turn token of its chat template.

Prompts go through the tokenizer's chat template (dataflex_rl.corpus.prompting), so a model's answer ends where the
template closes the assistant's turn. An instruct tokenizer names that token as its EOS; a base tokenizer need not:
Qwen2.5's base EOS is `<|endoftext|>` while its template closes a turn with `<|im_end|>`. A generator that stops on
EOS alone lets a base model write past its answer into invented turns, up to the answer-length cap.
"""
from __future__ import annotations

# Assistant content with no markup or spaces, which no template rewrites, to find where the content ends.
PROBE = "turnendprobe"


def turn_end_token_id(tokenizer) -> int | None:
    """The token the chat template emits right after an assistant message's content, when it is a special token.

    The rule: render a one-turn conversation (a user message, then the assistant's PROBE) through the template, take
    the text after the probe and tokenize it; its first token closes the assistant turn. Only a special (added,
    never merged) token is taken: a template that closes turns with plain text ("\\n", "###") has no token that can
    stop an answer without also stopping inside one. None without a chat template, or when the template writes no
    special token after the content."""
    if not getattr(tokenizer, "chat_template", None):
        return None
    text = tokenizer.apply_chat_template([{"role": "user", "content": "question"},
                                          {"role": "assistant", "content": PROBE}], tokenize=False)
    end = text.rfind(PROBE)
    if end < 0:
        raise ValueError(f"the tokenizer's chat template dropped the assistant's message {PROBE!r}, so its "
                         f"end-of-turn token cannot be found; give the model a template that renders assistant turns")
    after = tokenizer(text[end + len(PROBE):], add_special_tokens=False).input_ids
    special = set(tokenizer.all_special_ids) | {i for i, t in tokenizer.added_tokens_decoder.items() if t.special}
    if not after or after[0] not in special:
        return None
    return int(after[0])


def stop_token_ids(tokenizer) -> list[int]:
    """The tokenizer's EOS, then the template's end-of-turn token when it is another token."""
    ids = [] if tokenizer.eos_token_id is None else [int(tokenizer.eos_token_id)]
    turn_end = turn_end_token_id(tokenizer)
    return ids + [turn_end] if turn_end is not None and turn_end not in ids else ids
