"""A verl model's attention heads, read from its config.json without loading it or reaching the network: a local
`path` directory's, or the Hugging Face cache's snapshot of a hub name; where neither is at hand, from the architecture
the study declares for it (`models.<m>.architecture`: config.json's keys, which the dry run refuses where config.json
says otherwise). vLLM splits the heads and the key-value heads over its tensor-parallel GPUs, so the dry run checks that
the TP divides both (VerlBackend)."""
from __future__ import annotations

import json
from pathlib import Path
from typing import Any, Mapping, NamedTuple

from dataflex_rl.backends.verl.model_source import hub_name_error, is_local


# config.json's key of each ModelShape field (probe_settings), as a refusal names them
SHAPE_KEYS = {"hidden": "hidden_size", "intermediate": "intermediate_size", "layers": "num_hidden_layers",
              "vocab": "vocab_size", "heads": "num_attention_heads", "kv_heads": "num_key_value_heads",
              "head_dim": "head_dim"}


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


def model_config(path: str, declared: Mapping[str, Any] | None = None) -> Mapping[str, Any] | None:
    """The config.json of the model at `path` (a directory, or a hub name found in the local cache), else the keys of
    it the study declares (`declared`: models.<m>.architecture), else None."""
    return read_model_json(path) or declared


def architecture_source(key: str, path: str) -> str:
    """What model_config read for model `key`: its config.json, or the architecture its config declares."""
    return "its config.json" if read_model_json(path) is not None else f"{key}.architecture, as declared"


def declared_architecture_errors(key: str, path: str, declared: Mapping[str, Any] | None) -> list[str]:
    """A declared architecture (`<key>.architecture`) whose shape differs from the one config.json gives, where it can
    be read: the declared numbers would stand for the model's wherever its files are not at hand."""
    from dataflex_rl.backends.verl.probe_settings import ModelShape

    config = read_model_json(path)
    if declared is None or config is None:
        return []
    read, given = ModelShape.of(config), ModelShape.of(declared)
    if read is None or read == given:
        return []
    differ = [f"{key_name} {getattr(given, name)} declared, {getattr(read, name)} read"
              for name, key_name in SHAPE_KEYS.items() if getattr(given, name) != getattr(read, name)]
    return [f"{key}.architecture: the config.json of {path!r} gives another shape ({'; '.join(differ)}); copy its "
            f"values into {key}.architecture, or remove it (the dry run reads config.json wherever it can)"]


def model_heads(path: str, declared: Mapping[str, Any] | None = None) -> Heads | None:
    """The heads of the model at `path` (model_config: its config.json, else the `declared` architecture); None where
    neither is at hand or names no heads (a multimodal config nests them: not checked)."""
    config = model_config(path, declared)
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
