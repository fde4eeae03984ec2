"""The longest context vLLM lets an engine of a verl model have, derived from the model's files as vLLM derives it, so
that the dry run refuses a `max_model_len` the engine would refuse at start-up (after Ray, FSDP or the scorer's
queue wait): the score engine's PROMPT_TOKENS + evaluation.max_new_tokens, the rollout's and the selection round's
prompt allowance + training.max_new_tokens.

vLLM 0.28 (config/model.py:2328-2465, `_get_and_verify_max_len`; model_arch_config_convertor.py:388-421): the
smallest of the config's POSITION_KEYS that is set, replaced by its `model_max_length` where it has one; times the
RoPE scaling factor unless the RoPE type already counts it (su, longrope, llama3), a yarn scaling starting from its
`original_max_position_embeddings`. The tokenizer's `model_max_length` caps it only for pooling models
(config/model.py:1942-1953), never for a generating one, so it is not read here. A
larger `max_model_len` is refused ("User-specified max_model_len (X) is greater than the derived max_model_len ...")
unless the config's own `model_max_length` allows it or VLLM_ALLOW_LONG_MAX_MODEL_LEN is set. A config with none of
the keys gets vLLM's default of 2048. Read from config.json as written: a key absent there that the model's
transformers class defaults is not seen (Qwen2's config.json always writes its positions).
"""
from __future__ import annotations

from typing import NamedTuple

from dataflex_rl.backends.verl.model_heads import read_model_json

POSITION_KEYS = ("max_position_embeddings", "n_positions", "max_seq_len", "seq_length", "model_max_length",
                 "max_target_positions", "max_sequence_length", "max_seq_length", "seq_len")
DEFAULT_CONTEXT = 2048  # vLLM's assumption for a config that names none of them
SCALED_ALREADY = ("su", "longrope", "llama3")  # RoPE types whose positions key already includes the factor


class Context(NamedTuple):
    tokens: int
    source: str  # where the number comes from, for the refusal


def _rope_layers(config: dict) -> list[dict]:
    """The RoPE parameters per layer type: the older `rope_scaling` where config.json has it (transformers 5 reads it
    over its own `rope_parameters`, which then keep only rope_theta), else `rope_parameters`."""
    rope = config.get("rope_scaling") or config.get("rope_parameters") or {}
    if not isinstance(rope, dict):
        return []
    nested = rope and all(isinstance(value, dict) for value in rope.values())
    return list(rope.values()) if nested else [rope]


def _scaled(config: dict, context: Context) -> Context:
    factor, tokens, source = None, context.tokens, context.source
    for layer in _rope_layers(config):
        kind = layer.get("rope_type", layer.get("type"))
        if kind in SCALED_ALREADY:
            continue
        factor = layer.get("factor", factor)
        if kind == "yarn" and isinstance(layer.get("original_max_position_embeddings"), int):
            tokens, source = layer["original_max_position_embeddings"], "original_max_position_embeddings"
    if not isinstance(factor, (int, float)) or factor == 1:
        return Context(tokens, source)
    return Context(int(tokens * factor), f"{source} × RoPE factor {factor}")


def model_context(path: str) -> Context | None:
    """The longest `max_model_len` vLLM accepts for the model at `path` (a directory, or a hub name in the local
    cache), None where its config.json cannot be read."""
    config = read_model_json(path)
    if config is None:
        return None
    config = config.get("text_config") or config  # a multimodal config nests the language model's
    found = [(config[key], key) for key in POSITION_KEYS if isinstance(config.get(key), int)]
    context = Context(*min(found, key=lambda entry: entry[0])) if found else None
    own_cap = config.get("model_max_length")
    if isinstance(own_cap, int):
        context = Context(own_cap, "model_max_length")
    context = _scaled(config, context or Context(DEFAULT_CONTEXT, "vLLM's default: no positions key"))
    if isinstance(own_cap, int) and own_cap > context.tokens:  # vLLM lets the config's own cap override
        return Context(own_cap, "model_max_length")
    return context


def engine_context(key: str, path: str, declared: int | None) -> Context | None:
    """The context the dry run holds model `key`'s vLLM engines to: derived from its config.json where that can be
    read (model_context), else the context the config declares for it (`<key>.context`), else None: not checked."""
    context = model_context(path)
    if context is None and declared is not None:
        return Context(declared, f"{key}.context, as declared: its config.json cannot be read here")
    return context


def declared_context_errors(key: str, path: str, declared: int | None) -> list[str]:
    """A declared context (`<key>.context`) other than the one config.json gives, where it can be read: the declared
    number would stand for the model's wherever its files are not at hand (another machine's dry run)."""
    context = model_context(path)
    if declared is None or context is None or context.tokens == declared:
        return []
    return [f"{key}.context: {declared} declared, but the config.json of {path!r} gives {context.tokens} "
            f"({context.source}, as vLLM derives it); set {key}.context to {context.tokens}, or remove it (the dry run "
            f"reads config.json wherever it can)"]


def context_refusal(context: Context | None, path: str, *, prompt_tokens: int, prompt: str, answer_key: str,
                    answer_tokens: int, fix_key: str, use: str) -> str | None:
    """Why vLLM refuses an engine of `prompt_tokens` (`prompt` says what they are) + `answer_tokens` (the setting
    `answer_key`) on the model at `path` of `context` (engine_context), and the fix: `fix_key` at most what the
    context leaves (`use`: what the study does with the model, for the fix when the prompts alone fill it); None
    where vLLM accepts it or the context is not known here."""
    needed = prompt_tokens + answer_tokens
    if context is None or needed <= context.tokens:
        return None
    room = context.tokens - prompt_tokens
    fix = f"set {fix_key} to at most {room}" if room > 0 else f"{use} a model with more positions"
    return (f"vLLM's max_model_len {needed} ({prompt} + {answer_key} {answer_tokens}) is more than the "
            f"{context.tokens} positions of {path!r} ({context.source}), which vLLM refuses at engine start; {fix}")
