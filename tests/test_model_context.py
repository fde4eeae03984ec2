"""The context vLLM allows a model (dataflex_rl.backends.verl.model_context), on config files written by hand; the
same configs against vLLM's own derivation are in tests/test_vllm_cpu.py."""
import json

import pytest

from dataflex_rl.backends.verl.model_context import (Context, context_refusal, declared_context_errors, engine_context,
                                                    model_context)

# (config.json, tokenizer_config.json, the context vLLM 0.28 derives: config/model.py:2328-2465, by hand)
CASES = {
    "positions": ({"max_position_embeddings": 4096}, None, 4096),
    "the smallest key": ({"max_position_embeddings": 4096, "seq_length": 3000}, None, 3000),
    "a tokenizer's cap is not the engine's": ({"max_position_embeddings": 4096}, {"model_max_length": 1500}, 4096),
    "linear RoPE": ({"max_position_embeddings": 4096, "rope_scaling": {"rope_type": "linear", "factor": 2.0}},
                    None, 8192),
    "dynamic RoPE": ({"max_position_embeddings": 4096, "rope_scaling": {"type": "dynamic", "factor": 2.0}}, None, 8192),
    "rope_scaling over rope_parameters": ({"max_position_embeddings": 2048,
                                           "rope_parameters": {"rope_type": "default", "rope_theta": 1e4},
                                           "rope_scaling": {"rope_type": "linear", "factor": 2.0}}, None, 4096),
    "yarn": ({"max_position_embeddings": 131072, "rope_parameters": {"rope_type": "yarn", "factor": 4.0,
                                                                      "original_max_position_embeddings": 32768}},
             None, 131072),
    "llama3 counts its factor": ({"max_position_embeddings": 131072,
                                  "rope_scaling": {"rope_type": "llama3", "factor": 8.0}}, None, 131072),
    "RoPE without a factor": ({"max_position_embeddings": 2048,
                               "rope_parameters": {"rope_type": "default", "rope_theta": 1e6}}, None, 2048),
    "no key": ({"hidden_size": 8}, None, 2048),
    "the config's own cap overrides": ({"max_position_embeddings": 8192, "model_max_length": 131072}, None, 131072),
    "nested text config": ({"text_config": {"max_position_embeddings": 1024}}, None, 1024),
}


def _model(tmp_path, config, tokenizer):
    (tmp_path / "config.json").write_text(json.dumps(config))
    if tokenizer is not None:
        (tmp_path / "tokenizer_config.json").write_text(json.dumps(tokenizer))
    return str(tmp_path)


@pytest.mark.parametrize("case", CASES)
def test_the_context_is_derived_as_vllm_derives_it(tmp_path, case):
    config, tokenizer, tokens = CASES[case]
    assert model_context(_model(tmp_path, config, tokenizer)).tokens == tokens


def test_the_source_names_the_key_and_the_factor(tmp_path):
    path = _model(tmp_path, *CASES["linear RoPE"][:2])
    assert model_context(path) == Context(8192, "max_position_embeddings × RoPE factor 2.0")


def _refusal(path, prompt_tokens, answer_tokens, declared=None):
    return context_refusal(engine_context("models.m", path, declared), path, prompt_tokens=prompt_tokens,
                           prompt=f"{prompt_tokens} prompt tokens", answer_key="evaluation.max_new_tokens",
                           answer_tokens=answer_tokens, fix_key="models.m.evaluation.max_new_tokens", use="score")


def test_an_engine_that_fits_passes_and_one_that_does_not_is_explained_with_its_fix(tmp_path):
    path = _model(tmp_path, {"max_position_embeddings": 1030}, None)
    assert _refusal(path, 1024, 6) is None
    assert _refusal(path, 1024, 7) == (
        f"vLLM's max_model_len 1031 (1024 prompt tokens + evaluation.max_new_tokens 7) is more than the 1030 positions "
        f"of {path!r} (max_position_embeddings), which vLLM refuses at engine start; set "
        f"models.m.evaluation.max_new_tokens to at most 6")
    assert _refusal(path, 1030, 1).endswith("which vLLM refuses at engine start; score a model with more positions")


def test_a_model_whose_config_cannot_be_read_is_not_checked(tmp_path):
    assert model_context(str(tmp_path / "absent")) is None
    (tmp_path / "config.json").write_text("{not json")
    assert model_context(str(tmp_path)) is None and _refusal(str(tmp_path), 10 ** 9, 1) is None


def test_a_declared_context_stands_in_where_config_json_cannot_be_read(tmp_path):
    """Qwen2.5-Math-1.5B's 4096 positions, declared for a hub name not in the cache: 1024 + 8192 is refused naming
    the declaration, 1024 + 3072 fills it exactly."""
    path = "Qwen/Qwen2.5-Math-1.5B-not-cached"
    assert engine_context("models.m", path, None) is None
    assert engine_context("models.m", path, 4096) == Context(
        4096, "models.m.context, as declared: its config.json cannot be read here")
    assert _refusal(path, 1024, 3072, declared=4096) is None
    assert _refusal(path, 1024, 8192, declared=4096) == (
        f"vLLM's max_model_len 9216 (1024 prompt tokens + evaluation.max_new_tokens 8192) is more than the 4096 "
        f"positions of {path!r} (models.m.context, as declared: its config.json cannot be read here), which vLLM "
        f"refuses at engine start; set models.m.evaluation.max_new_tokens to at most 3072")


def test_config_json_wins_over_a_declared_context_and_a_declaration_that_differs_is_refused(tmp_path):
    path = _model(tmp_path, *CASES["linear RoPE"][:2])  # 4096 positions × RoPE factor 2: 8192
    assert engine_context("models.m", path, 4096) == Context(8192, "max_position_embeddings × RoPE factor 2.0")
    assert declared_context_errors("models.m", path, 8192) == []
    assert declared_context_errors("models.m", path, None) == []
    assert declared_context_errors("models.m", "Qwen/not-cached", 4096) == []  # nothing to compare it with
    assert declared_context_errors("models.m", path, 4096) == [
        f"models.m.context: 4096 declared, but the config.json of {path!r} gives 8192 (max_position_embeddings × RoPE "
        f"factor 2.0, as vLLM derives it); set models.m.context to 8192, or remove it (the dry run reads config.json "
        f"wherever it can)"]
