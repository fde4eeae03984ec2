"""A retried scoring job reuses the benchmarks an earlier attempt finished, and never a shard of other inputs.

Snakemake deletes every declared output of a failed job; the finished benchmarks survive as shards in `.state/`,
under the state key of their settings and inputs. The job is the real one (dataflex_rl.study.jobs.score_run), on real
weights with their provenance records.
"""
import pandas as pd
import pytest
import torch

from dataflex_rl.backends.embedded.model import load_model, save_model
from dataflex_rl.backends.embedded.settings import WarmupSettings
from dataflex_rl.study.jobs import score_run
from dataflex_rl.artefacts.layout import PROVENANCE
from dataflex_rl.artefacts.provenance import write_provenance
from dataflex_rl.corpus.build import benchmark_items

from tiny_base import TEMPLATE, tiny_base

BENCHMARKS = ("basic_arithmetic", "syllogism", "kinematics")
MARKER = "written into the shard by the test"


@pytest.fixture(scope="module")
def workspace(tmp_path_factory):
    root = tmp_path_factory.mktemp("scoring")
    tiny_base(root, WarmupSettings(steps=20, batch_size=16, learning_rate=1e-2), items_per_domain=20)
    for index in (1, 2):  # two runs' final models: the base model with one bias shifted
        model, tokenizer = load_model(root / "base")
        with torch.no_grad():
            model.model.layers[0].self_attn.q_proj.bias.add_(index)
        save_model(model, tokenizer, root / f"model{index}")
        write_provenance(root / f"model{index}.{PROVENANCE}", {"seed": index}, [root / f"model{index}"])
    for name in BENCHMARKS:
        items = benchmark_items(name, n_items=6, seed=1000)
        items.to_parquet(root / f"{name}.parquet")
        # a real bad input: an answer format no verifier knows, so scoring this benchmark fails
        items.assign(answer_format="no_such_format").to_parquet(root / f"{name}.bad.parquet")
    return root


def score(root, out, weights: int, items: dict | None = None) -> list:
    """Score every benchmark into `out`; `items` replaces some benchmarks' item files ({name: path})."""
    outputs = [out / f"{name}.parquet" for name in BENCHMARKS]
    items = {name: root / f"{name}.parquet" for name in BENCHMARKS} | (items or {})
    job = {"model": {"backend": "embedded"}, "template": TEMPLATE,
           "evaluation": {"max_new_tokens": 4, "batch_size": 4, "temperature": 0.0}}
    score_run(job, [{"seed": weights, "benchmark": name} for name in BENCHMARKS], model_dir=root / f"model{weights}",
              model_provenance=root / f"model{weights}.{PROVENANCE}",
              items=[items[name] for name in BENCHMARKS], outputs=outputs,
              provenance=[out / f"{name}.{PROVENANCE}" for name in BENCHMARKS])
    return outputs


def failed_attempt(root, out, weights: int) -> None:
    """An attempt that dies on the second benchmark, then Snakemake's clean-up of the job's declared outputs."""
    with pytest.raises(ValueError, match="no verifier for answer format 'no_such_format'"):
        score(root, out, weights, items={BENCHMARKS[1]: root / f"{BENCHMARKS[1]}.bad.parquet"})
    assert (out / f"{BENCHMARKS[0]}.parquet").exists() and not (out / f"{BENCHMARKS[1]}.parquet").exists()
    for name in BENCHMARKS:
        (out / f"{name}.parquet").unlink(missing_ok=True)


def shards(out) -> list:
    return sorted(path.name for path in (out / ".state").iterdir())


def tamper(out) -> None:
    """Mark the first benchmark's shard, so that an output carrying the mark can only have been copied from it."""
    (shard,) = (out / ".state").glob(f"{BENCHMARKS[0]}.*.parquet")
    frame = pd.read_parquet(shard)
    frame.loc[0, "response"] = MARKER
    frame.to_parquet(shard, index=False)


def test_a_retry_reuses_the_finished_benchmark_and_writes_what_a_fresh_run_writes(workspace, tmp_path, capfd):
    fresh = score(workspace, tmp_path / "fresh", weights=1)
    assert shards(tmp_path / "fresh") == []  # a job that finished keeps no shards

    retry = tmp_path / "retry"
    failed_attempt(workspace, retry, weights=1)
    (kept,) = shards(retry)
    assert kept.startswith(f"{BENCHMARKS[0]}.")
    capfd.readouterr()
    outputs = score(workspace, retry, weights=1)
    log = capfd.readouterr().err
    assert f"reusing {retry / '.state' / kept}: {workspace / BENCHMARKS[0]}.parquet was scored" in log
    assert log.count("reusing") == 1
    for got, expected in zip(outputs, fresh):
        assert got.read_bytes() == expected.read_bytes(), got.name
    assert shards(retry) == []


def test_the_shard_is_copied_not_rescored(workspace, tmp_path):
    out = tmp_path / "retry"
    failed_attempt(workspace, out, weights=1)
    tamper(out)
    outputs = score(workspace, out, weights=1)
    assert pd.read_parquet(outputs[0]).loc[0, "response"] == MARKER


@pytest.mark.parametrize("change", ["weights", "items"])
def test_a_shard_of_other_weights_or_items_is_never_reused(workspace, tmp_path, change):
    out = tmp_path / "retry"
    failed_attempt(workspace, out, weights=1)
    tamper(out)
    if change == "items":  # the first benchmark's file rebuilt with one item fewer
        path = tmp_path / f"{BENCHMARKS[0]}.parquet"
        pd.read_parquet(workspace / f"{BENCHMARKS[0]}.parquet").iloc[:-1].to_parquet(path)
        changed = {"weights": 1, "items": {BENCHMARKS[0]: path}}
    else:
        changed = {"weights": 2}
    outputs = score(workspace, out, **changed)
    fresh = score(workspace, tmp_path / "fresh", **changed)
    assert MARKER not in set(pd.read_parquet(outputs[0])["response"])
    for got, expected in zip(outputs, fresh):
        assert got.read_bytes() == expected.read_bytes(), got.name
    assert shards(out) == []  # the stale shard is cleared with the benchmark's own
