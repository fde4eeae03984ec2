"""verl's rollouts stop at the chat template's end of turn as well as at EOS, through vLLM's generation config.

verl 0.9.1 has no rollout key for stop tokens: each request's sampling settings are temperature, top_p, top_k,
repetition penalty and log-probs (verl: experimental/agent_loop/agent_loop.py:590-596), turned into vLLM's
SamplingParams as they are (verl: workers/rollout/vllm_rollout/vllm_async_server.py:634). vLLM then stops at the
tokenizer's EOS and adds every `eos_token_id` of the engine's generation config to the request's stop_token_ids
(vLLM: SamplingParams.update_from_generation_config); that config is read from the model folder, or from the folder
given as `--generation-config`. verl forwards `actor_rollout_ref.rollout.engine_kwargs.vllm` to vLLM's server
arguments verbatim (verl: vllm_async_server.py:287 and 349, made CLI flags at 456). So the train job writes the
model's own generation config, its eos_token_id extended by dataflex_rl.corpus.turn_end.stop_token_ids, into the run's
state folder, and the overrides point vLLM at it (dataflex_rl.backends.verl.overrides.GENERATION_CONFIG_KEY).
"""
from __future__ import annotations

from pathlib import Path

from dataflex_rl.corpus.turn_end import stop_token_ids


def rollout_eos_ids(generation_eos, tokenizer) -> list[int]:
    """The generation config's eos_token_id (None, one id or a list), then the tokenizer's stop tokens not in it."""
    ids = [] if generation_eos is None else [generation_eos] if isinstance(generation_eos, int) else generation_eos
    return list(dict.fromkeys([*map(int, ids), *stop_token_ids(tokenizer)]))


def write_rollout_generation_config(model_path: str, folder: Path) -> list[int]:
    """Write `folder`/generation_config.json: the model's generation config as verl reads it
    (verl.utils.model.get_generation_config: the file, else one derived from the model's config) with eos_token_id
    set to rollout_eos_ids. Returns those ids."""
    from transformers import AutoTokenizer, GenerationConfig
    from verl.utils.model import get_generation_config

    config = get_generation_config(model_path) or GenerationConfig()
    config.eos_token_id = rollout_eos_ids(config.eos_token_id, AutoTokenizer.from_pretrained(model_path))
    config.save_pretrained(folder)
    return config.eos_token_id
