"""Where a verl model comes from, checked by the real `snakemake -n` without the network: a local directory must hold
a loadable Hugging Face model, and a hub name must be in the Hugging Face cache when HF_HUB_OFFLINE=1 (refused
otherwise), or the summary warns that the jobs will download it. The cache is built in a temporary HF_HUB_CACHE the
way huggingface_hub lays it out, and huggingface_hub's own cache scan confirms the layout."""
import copy
import hashlib
import json
import os
import shutil
import struct
import subprocess
import sys
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest
import yaml
from huggingface_hub import scan_cache_dir, try_to_load_from_cache
from huggingface_hub.file_download import repo_folder_name
from safetensors import SafetensorError, safe_open
from transformers import Qwen2ForCausalLM

from dataflex_rl.backends.model_spec import ModelSpec
from dataflex_rl.backends.verl import model_source
from hf_model_dir import save_hf_model_dir
from dataflex_rl.backends.verl.model_source import missing_model_files, model_path_errors, model_path_notes
from dataflex_rl.backends.verl.weight_files import weight_file_problems

REPO = Path(__file__).resolve().parents[1]
SMOKE = yaml.safe_load((REPO / "config/smoke.yaml").read_text())
HUB_NAME = "tiny-org/Tiny-Qwen2"
COMMIT = "0123456789abcdef0123456789abcdef01234567"


@pytest.fixture(scope="module")
def model_dir(tmp_path_factory) -> Path:
    """A real Hugging Face model directory: a tiny Qwen2 and a tokenizer, as save_pretrained writes them."""
    return save_hf_model_dir(tmp_path_factory.mktemp("model"))


def cache_snapshot(cache: Path, repo_id: str, files: Path) -> Path:
    """Put `files` into the hub cache `cache` as huggingface_hub stores a download of `repo_id` at main: the file
    contents under blobs/<hash>, snapshots/<commit>/<name> as relative symlinks to them, refs/main naming the commit."""
    storage = cache / repo_folder_name(repo_id=repo_id, repo_type="model")
    snapshot = storage / "snapshots" / COMMIT
    (storage / "blobs").mkdir(parents=True)
    snapshot.mkdir(parents=True)
    for path in sorted(files.iterdir()):
        blob = storage / "blobs" / hashlib.sha256(path.read_bytes()).hexdigest()
        blob.write_bytes(path.read_bytes())
        (snapshot / path.name).symlink_to(os.path.relpath(blob, snapshot))
    (storage / "refs").mkdir()
    (storage / "refs" / "main").write_text(COMMIT)
    return snapshot


def test_the_fake_cache_is_what_huggingface_hub_reads(tmp_path, model_dir):
    snapshot = cache_snapshot(tmp_path, HUB_NAME, model_dir)
    [repo] = scan_cache_dir(tmp_path).repos
    assert (repo.repo_id, repo.repo_type, set(repo.refs)) == (HUB_NAME, "model", {"main"})
    [revision] = repo.revisions
    assert revision.commit_hash == repo.refs["main"].commit_hash == COMMIT
    assert {file.file_name for file in revision.files} == {path.name for path in model_dir.iterdir()}
    assert try_to_load_from_cache(HUB_NAME, "config.json", cache_dir=tmp_path) == str(snapshot / "config.json")


def test_a_saved_model_directory_is_complete_and_each_missing_part_is_named(tmp_path, model_dir):
    assert missing_model_files(model_dir) == []
    for name, missing in (("config.json", "config.json"), ("model.safetensors", "weights (*.safetensors or *.bin)"),
                          ("tokenizer.json", "a tokenizer (tokenizer.json, tokenizer.model, vocab.json)")):
        partial = tmp_path / name
        partial.mkdir()
        for path in model_dir.iterdir():
            if path.name != name:
                (partial / path.name).symlink_to(path)
        assert missing_model_files(partial) == [missing]


def test_a_local_directory_is_checked_and_a_hub_name_is_left_alone_online(tmp_path, model_dir, monkeypatch):
    monkeypatch.setattr("huggingface_hub.constants.HF_HUB_CACHE", str(tmp_path / "cache"))
    monkeypatch.setattr("huggingface_hub.constants.HF_HUB_OFFLINE", False)
    assert model_path_errors("models.m.path", str(model_dir), tmp_path) == []
    (tmp_path / "weights").mkdir()
    [error] = model_path_errors("models.m.path", "weights", tmp_path)  # an existing directory is local, not a hub name
    assert error.startswith("models.m.path: the model directory 'weights' lacks config.json, weights")
    assert "hf download <hub name> --local-dir weights" in error
    [error] = model_path_errors("models.m.path", "Qwen/Qwen2.5/7B", tmp_path)
    assert "is neither a local directory" in error and "nor a hub name" in error
    assert model_path_errors("models.m.path", HUB_NAME, tmp_path) == []


def test_offline_an_incomplete_snapshot_is_refused_naming_what_it_lacks(tmp_path, model_dir, monkeypatch):
    """A snapshot whose weights never arrived (an interrupted download without its tree listing)."""
    files = tmp_path / "files"
    files.mkdir()
    for path in model_dir.iterdir():
        if path.suffix != ".safetensors":
            (files / path.name).write_bytes(path.read_bytes())
    snapshot = cache_snapshot(tmp_path / "cache", HUB_NAME, files)
    monkeypatch.setattr("huggingface_hub.constants.HF_HUB_CACHE", str(tmp_path / "cache"))
    monkeypatch.setattr("huggingface_hub.constants.HF_HUB_OFFLINE", True)
    assert model_source.cached_snapshot(HUB_NAME) == snapshot
    [error] = model_path_errors("models.m.path", HUB_NAME, tmp_path)
    assert f"holds a snapshot of it ({snapshot}) without weights (*.safetensors or *.bin)" in error
    assert model_path_notes("models.m.path", HUB_NAME, tmp_path) == []  # offline: refused, no note


@pytest.fixture(scope="module")
def sharded_model_dir(tmp_path_factory) -> Path:
    """The tiny Qwen2 saved in shards of at most 1 KB: save_pretrained writes four and model.safetensors.index.json."""
    return save_hf_model_dir(tmp_path_factory.mktemp("sharded"), max_shard_size="1KB")


def _shards(directory: Path) -> list[str]:
    return sorted(set(json.loads((directory / "model.safetensors.index.json").read_text())["weight_map"].values()))


def test_a_sharded_model_whose_index_names_absent_shards_is_refused_naming_the_index_and_the_shards(
        tmp_path, sharded_model_dir):
    directory = shutil.copytree(sharded_model_dir, tmp_path / "model")
    shards = _shards(directory)
    assert len(shards) == 4 and weight_file_problems(directory) == []
    assert model_path_errors("models.m.path", str(directory), tmp_path) == []
    for name in (shards[1], shards[3]):
        (directory / name).unlink()
    assert weight_file_problems(directory) == [
        f"model.safetensors.index.json names 4 shard(s), 2 of them not in the directory: {shards[1]}, {shards[3]}"]
    with pytest.raises(OSError):  # the loader the jobs use fails on the directory, after the dry run passed it
        Qwen2ForCausalLM.from_pretrained(directory)
    [error] = model_path_errors("models.m.path", str(directory), tmp_path)
    assert error.startswith(f"models.m.path: the model directory '{directory}' holds weights verl and vLLM cannot "
                            f"load: model.safetensors.index.json names 4 shard(s), 2 of them not in the directory")
    assert "download the whole model into it again" in error


def test_an_index_names_its_first_missing_shards_and_counts_the_rest(tmp_path, sharded_model_dir):
    directory = shutil.copytree(sharded_model_dir, tmp_path / "model")
    for name in _shards(directory):
        (directory / name).unlink()
    assert weight_file_problems(directory) == [
        "model.safetensors.index.json names 4 shard(s), 4 of them not in the directory: model-00001-of-00004"
        ".safetensors, model-00002-of-00004.safetensors, model-00003-of-00004.safetensors and 1 more"]
    (directory / "model.safetensors.index.json").write_text('{"metadata": {}}')
    [problem] = weight_file_problems(directory)
    assert problem.startswith("model.safetensors.index.json is not a weight index with a weight_map (KeyError")


def _header_length(data: bytes) -> int:
    return struct.unpack("<Q", data[:8])[0]


# Damage as an interrupted copy or download leaves it, each with the problem named; the safetensors loader itself
# refuses every one of them.
DAMAGE = {
    "empty": (lambda data: b"", "model.safetensors is empty (0 bytes)"),
    "shorter than the length field": (lambda data: data[:5],
                                      "model.safetensors has 5 byte(s), fewer than the 8 of a safetensors header's "
                                      "length"),
    "cut inside the header": (lambda data: data[:100], "model.safetensors: unreadable safetensors header: its length "
                                                       "field says {length} bytes, but the file has 92 after it"),
    "header not JSON": (lambda data: data[:8] + b"x" * (len(data) - 8),
                        "model.safetensors: unreadable safetensors header (JSONDecodeError: Expecting value"),
    "cut in the tensor data": (lambda data: data[:-2], "model.safetensors: its safetensors header places {tensors} "
                                                       "bytes of tensor data, but the file holds {short} after the "
                                                       "header (cut short"),
}


@pytest.mark.parametrize("damage", DAMAGE, ids=list(DAMAGE))
def test_a_safetensors_file_whose_header_cannot_be_read_is_named_as_the_loader_would_fail(
        tmp_path, model_dir, damage):
    directory = shutil.copytree(model_dir, tmp_path / "model")
    weights = directory / "model.safetensors"
    data = weights.read_bytes()
    with safe_open(weights, "pt") as intact:
        assert len(list(intact.keys())) > 0
    change, expected = DAMAGE[damage]
    weights.write_bytes(change(data))
    tensors = len(data) - 8 - _header_length(data)
    [problem] = weight_file_problems(directory)
    assert problem.startswith(expected.format(length=_header_length(data), tensors=tensors, short=tensors - 2))
    with pytest.raises(SafetensorError):
        safe_open(weights, "pt")
    [error] = model_path_errors("models.m.path", str(directory), tmp_path)
    assert f"holds weights verl and vLLM cannot load: {problem} — download the whole model into it again" in error


def test_offline_a_cached_snapshot_with_an_empty_weights_file_is_refused(tmp_path, model_dir, monkeypatch):
    files = shutil.copytree(model_dir, tmp_path / "files")
    (files / "model.safetensors").write_bytes(b"")
    snapshot = cache_snapshot(tmp_path / "cache", HUB_NAME, files)
    monkeypatch.setattr("huggingface_hub.constants.HF_HUB_CACHE", str(tmp_path / "cache"))
    monkeypatch.setattr("huggingface_hub.constants.HF_HUB_OFFLINE", True)
    [error] = model_path_errors("models.m.path", HUB_NAME, tmp_path)
    assert (f"holds a snapshot of it ({snapshot}) whose weights cannot be loaded: model.safetensors is empty (0 bytes)"
            in error)


def _dry_run(root: Path, name: str, cache: Path, offline: bool) -> subprocess.CompletedProcess:
    """The smoke study on a verl model named by hub name (8 prompts × 5 rollouts divide over the train job's 8 GPUs),
    dry-run with `cache` as HF_HUB_CACHE, with or without HF_HUB_OFFLINE=1."""
    workdir = root / name
    workdir.mkdir()
    config = copy.deepcopy(SMOKE)
    config["models"] = {"qwen": {"backend": "verl", "path": HUB_NAME}}
    config["training"]["prompts_per_step"] = 8
    (workdir / "config.yaml").write_text(yaml.safe_dump(config))
    env = {key: value for key, value in os.environ.items()
           if key not in ("HF_HUB_OFFLINE", "TRANSFORMERS_OFFLINE", "HF_HOME")}
    env.update(HF_HUB_CACHE=str(cache), **({"HF_HUB_OFFLINE": "1"} if offline else {}))
    return subprocess.run(
        [sys.executable, "-m", "snakemake", "-n", "--quiet", "--cores", "1", "--snakefile", str(REPO / "Snakefile"),
         "--directory", str(workdir), "--configfile", str(workdir / "config.yaml")],
        capture_output=True, text=True, timeout=300, env=env)


def test_the_dry_run_refuses_an_uncached_hub_model_offline_and_warns_online(tmp_path, model_dir):
    empty, warmed = tmp_path / "empty-cache", tmp_path / "warm-cache"
    empty.mkdir()
    snapshot = cache_snapshot(warmed, HUB_NAME, model_dir)
    cases = {"offline-empty": (empty, True), "offline-cached": (warmed, True), "online-empty": (empty, False)}
    with ThreadPoolExecutor(max_workers=2) as pool:
        results = dict(zip(cases, pool.map(lambda item: _dry_run(tmp_path, item[0], *item[1]), cases.items())))

    refused = results["offline-empty"]
    output = refused.stdout + refused.stderr
    assert refused.returncode != 0
    assert (f"models.qwen.path: hub name '{HUB_NAME}' with HF_HUB_OFFLINE=1, but the Hugging Face cache '{empty}' "
            f"holds no complete snapshot of it, so every train and score job would fail at start") in output
    assert f"`hf download {HUB_NAME} --cache-dir {empty}`" in output
    assert "Building DAG of jobs" not in output  # refused while parsing

    accepted = results["offline-cached"]
    assert accepted.returncode == 0, accepted.stderr[-3000:]
    assert "models.qwen.path: hub name" not in accepted.stderr  # neither refused nor a note
    assert str(snapshot) not in accepted.stderr

    warned = results["online-empty"]
    assert warned.returncode == 0, warned.stderr[-3000:]
    assert (f"  warning: models.qwen.path: hub name '{HUB_NAME}' is not in the Hugging Face cache '{empty}': every "
            f"train and score job downloads it at start") in warned.stderr


def test_online_a_cached_hub_model_is_named_with_its_snapshot(tmp_path, model_dir, monkeypatch):
    snapshot = cache_snapshot(tmp_path, HUB_NAME, model_dir)
    monkeypatch.setattr("huggingface_hub.constants.HF_HUB_CACHE", str(tmp_path))
    monkeypatch.setattr("huggingface_hub.constants.HF_HUB_OFFLINE", False)
    assert model_path_notes("models.m.path", HUB_NAME, tmp_path) == [
        f"models.m.path: hub name '{HUB_NAME}' is in the Hugging Face cache ({snapshot}); the jobs still ask the hub "
        f"for updates — set HF_HUB_OFFLINE=1 where the nodes have no network"]


def test_a_records_only_study_looks_nothing_up(tmp_path, monkeypatch):
    """A study regenerated from records (`records_file`) trains and scores nothing, so its models need no weights."""
    from dataflex_rl.backends.verl.backend import VerlBackend

    monkeypatch.setattr("huggingface_hub.constants.HF_HUB_CACHE", str(tmp_path))
    monkeypatch.setattr("huggingface_hub.constants.HF_HUB_OFFLINE", True)
    model = ModelSpec.from_entry("m", {"backend": "verl", "path": HUB_NAME})
    assert VerlBackend().config_errors("models.m", model, tmp_path, True, {}) == []
    assert VerlBackend().config_errors("models.m", model, tmp_path, False, {})[0].startswith(
        f"models.m.path: hub name '{HUB_NAME}' with HF_HUB_OFFLINE=1")
