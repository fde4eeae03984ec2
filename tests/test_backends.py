"""The backend registry: the names a config may use, each backend's resolved model settings, and the honest refusals
of what a backend does not do (the verl backend's training: tests/test_verl_data.py)."""
from pathlib import Path

import pytest
import yaml

from dataflex_rl.backends.registry import BACKENDS, get_backend
from dataflex_rl.study.jobs import build_base_model, merge_run
from dataflex_rl.study.resolved import ModelSpec

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

    from dataflex_rl.study.resolved import Study

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


def test_a_step_a_backend_has_no_part_in_is_a_member_set_to_none_and_plans_no_job():
    """The optional members of the run-time seam: the embedded backend builds its base and probes prompt selections
    but merges nothing (its run directory is a Hugging Face model already); verl merges, loads `path` and probes
    nothing yet. The study plans the base_model and merge rules from them (ModelSpec)."""
    embedded, verl = get_backend("embedded"), get_backend("verl")
    assert (embedded.build_base_model is not None, embedded.merge, embedded.open_probe is not None) == (True, None, True)
    assert (verl.build_base_model, verl.merge is not None, verl.open_probe is not None) == (None, True, True)
    assert verl.conda_env == "../envs/gpu.yaml"
    models = {name: ModelSpec(name, name, {}) for name in ("embedded", "verl")}
    assert [(m.builds_base_model, m.merges_checkpoint) for m in models.values()] == [(True, False), (False, True)]


def test_the_jobs_refuse_a_step_the_backend_has_no_part_in_naming_it(tmp_path):
    with pytest.raises(ValueError, match="the verl backend builds no base model: it loads models.<m>.path"):
        build_base_model({"model": {"backend": "verl", "path": "Qwen/Qwen2.5-7B"}, "template": "{question}"}, {},
                         corpus=tmp_path / "c.parquet", out_dir=tmp_path / "base")
    with pytest.raises(ValueError, match="the embedded backend merges no checkpoint: .*run is scored as written"):
        merge_run({"models.tiny.backend": "embedded"}, model="tiny", model_dir=tmp_path / "run", model_provenance=None,
                  out_dir=tmp_path / "merged")
    assert not (tmp_path / "base").exists() and not (tmp_path / "merged").exists()


def test_an_unknown_backend_is_named():
    with pytest.raises(ValueError, match="unknown backend 'jax'; known: embedded, verl"):
        get_backend("jax")
