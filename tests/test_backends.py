"""The backend registry: the names a config may use, each backend's resolved model settings, and the honest refusals
of what a backend does not do (the verl backend's training: tests/test_verl_data.py)."""
from pathlib import Path

import pytest
import yaml

from dataflex_rl.backends.registry import BACKENDS, get_backend

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
    assert get_backend("verl").model_settings({"backend": "verl", "path": "Qwen/Qwen2.5-7B",
                                               "rollout": {"enforce_eager": True}}) == {
        "backend": "verl", "path": "Qwen/Qwen2.5-7B",
        "rollout": {"tensor_parallel_size": 1, "gpu_memory_utilization": 0.85, "enforce_eager": True}}


def test_only_the_rollout_tp_of_a_verl_model_enters_a_trained_runs_settings():
    """The untrained base's scores depend on its weights; a trained run's also on the rollout TP; the memory share and
    eager mode retrain nothing."""

    from dataflex_rl.study import Study

    config = yaml.safe_load((Path(__file__).resolve().parents[1] / "config/paper.yaml").read_text())
    (model,) = config["models"]
    config["models"][model]["rollout"] = {"tensor_parallel_size": 2, "gpu_memory_utilization": 0.3,
                                          "enforce_eager": True}
    study = Study.from_config(config)
    prefix = f"models.{model}.rollout."
    assert [key for key in study.base_slice(model) if key.startswith(prefix)] == []
    train = study.train_slice(study.runs[0])
    assert {key: value for key, value in train.items() if key.startswith(prefix)} == {
        f"{prefix}tensor_parallel_size": 2}


def test_the_verl_backend_refuses_what_it_does_not_do_naming_what_is_missing(tmp_path):
    verl = get_backend("verl")
    assert not verl.builds_base_model and verl.conda_env == "../envs/gpu.yaml"
    with pytest.raises(NotImplementedError, match="the verl backend builds no base model; it loads `path` "
                                                  "\\('Qwen/Qwen2.5-7B'\\) and scores it untrained"):
        verl.build_base_model({"backend": "verl", "path": "Qwen/Qwen2.5-7B"})


def test_an_unknown_backend_is_named():
    with pytest.raises(ValueError, match="unknown backend 'jax'; known: embedded, verl"):
        get_backend("jax")
