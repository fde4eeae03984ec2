"""A verl model's attention heads, read from its config.json without loading it or reaching the network: a local
`path` directory's, or the Hugging Face cache's snapshot of a hub name. vLLM splits the heads and the key-value heads
over its tensor-parallel GPUs, so the dry run checks that the TP divides both (VerlBackend)."""
from __future__ import annotations

import json
from pathlib import Path
from typing import NamedTuple

from dataflex_rl.backends.verl.model_source import hub_name_error, is_local


class Heads(NamedTuple):
    attention: int
    key_value: int


def model_file(path: str, name: str = "config.json") -> Path | None:
    """Where a local or hub model's file `name` is, read the way model_source tells the two apart (the working
    directory is the workflow's); None where it is not there (a missing path: model_source's check names it)."""
    if is_local(path, Path(".")):
        file = Path(path) / name
        return file if file.is_file() else None
    if hub_name_error(path):
        return None
    from huggingface_hub import try_to_load_from_cache

    cached = try_to_load_from_cache(path, name)  # the cache only: no network
    return Path(cached) if isinstance(cached, str) else None


def read_model_json(path: str, name: str = "config.json") -> dict | None:
    """The model's JSON file `name` (config.json, tokenizer_config.json), None where it cannot be read."""
    file = model_file(path, name)
    if file is None:
        return None
    try:
        content = json.loads(file.read_text())
    except (OSError, ValueError):
        return None
    return content if isinstance(content, dict) else None


def model_heads(path: str) -> Heads | None:
    """The heads of the model at `path` (a directory, or a hub name found in the local cache); None where its config
    cannot be read or names no heads (a multimodal config nests them: not checked)."""
    config = read_model_json(path)
    if config is None:
        return None
    heads = config.get("num_attention_heads")
    if not isinstance(heads, int):
        return None
    key_value = config.get("num_key_value_heads") or heads  # absent: multi-head attention, one KV head per head
    return Heads(heads, key_value)


def tensor_parallel_problem(heads: Heads, tensor_parallel_size: int) -> str | None:
    """Why `tensor_parallel_size` GPUs cannot split these heads (vLLM asserts that TP divides the attention heads,
    and the KV heads unless TP is a multiple of them, which replicates each KV head), None where they can."""
    if heads.attention % tensor_parallel_size:
        return f"{heads.attention} attention heads"
    if heads.key_value % tensor_parallel_size and tensor_parallel_size % heads.key_value:
        return f"{heads.key_value} key-value heads"
    return None


def model_parameters(path: str) -> int | None:
    """The trainable parameter count of the model at `path` (tied weights once, as the probe's gradients count them),
    built from its config.json on torch's meta device: no weights are read or allocated. None where the config cannot
    be read, or transformers cannot build it."""
    config_file = model_file(path)
    if config_file is None:
        return None
    try:
        import torch
        from transformers import AutoConfig, AutoModelForCausalLM

        config = AutoConfig.from_pretrained(config_file.parent)
        with torch.device("meta"):
            model = AutoModelForCausalLM.from_config(config)
    except (ImportError, OSError, ValueError, KeyError):
        return None
    return sum(p.numel() for p in model.parameters() if p.requires_grad)
