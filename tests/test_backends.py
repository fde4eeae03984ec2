"""The backend registry: the names a config may use, each backend's resolved model settings, and the honest refusals
of what a backend does not do (the verl backend's training: tests/test_verl_data.py)."""
from pathlib import Path

import pytest
import yaml

from dataflex_rl.backends.base import BACKENDS, get_backend

REPO = Path(__file__).resolve().parents[1]


def test_the_schema_offers_exactly_the_registered_backends():
    schema = yaml.safe_load((REPO / "config/schema.yaml").read_text())
    enum = schema["properties"]["models"]["additionalProperties"]["properties"]["backend"]["enum"]
    assert sorted(enum) == sorted(BACKENDS)


def test_embedded_model_settings_fill_the_shape_and_warm_up_defaults():
    settings = get_backend("embedded").model_settings({"backend": "embedded", "shape": {"hidden_size": 64},
                                                       "warmup": {"steps": 5}})
    assert settings == {"backend": "embedded",
                        "shape": {"hidden_size": 64, "intermediate_size": 512, "num_hidden_layers": 4,
                                  "num_attention_heads": 4, "num_key_value_heads": 2, "max_position_embeddings": 512,
                                  "vocab_size": 512},
                        "warmup": {"steps": 5, "batch_size": 32, "learning_rate": 2e-3, "seed": 0}}
    assert get_backend("verl").model_settings({"backend": "verl", "path": "Qwen/Qwen2.5-7B"}) == {
        "backend": "verl", "path": "Qwen/Qwen2.5-7B"}


def test_the_verl_backend_refuses_what_it_does_not_do_naming_what_is_missing(tmp_path):
    verl = get_backend("verl")
    assert not verl.builds_base_model and verl.conda_env == "../envs/gpu.yaml"
    with pytest.raises(NotImplementedError, match="the verl backend builds no base model; it loads `path` "
                                                  "\\('Qwen/Qwen2.5-7B'\\) and scores it untrained"):
        verl.build_base_model({"backend": "verl", "path": "Qwen/Qwen2.5-7B"})


def test_an_unknown_backend_is_named():
    with pytest.raises(ValueError, match="unknown backend 'jax'; known: embedded, verl"):
        get_backend("jax")
