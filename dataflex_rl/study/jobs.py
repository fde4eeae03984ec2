"""The jobs that touch a model — build the base, train a run, merge a run, score a run — and the provenance around
them.

Each entry point takes the job's arguments and its settings slice exactly as the rule passes them (`params.job`,
`params.settings`; dataflex_rl.study.resolved), verifies its input artefacts against their producers' provenance, runs
the model's backend through its typed job spec (dataflex_rl.backends.base), and writes its own provenance record last
(dataflex_rl.artefacts.provenance).
"""
from __future__ import annotations

import sys
import time
from pathlib import Path
from typing import Any, Mapping, Sequence

import pandas as pd

from dataflex_rl.artefacts.atomic import atomic_directory, write_parquet
from dataflex_rl.backends.base import BaseModelJob, TrainJob
from dataflex_rl.backends.registry import get_backend
from dataflex_rl.evaluate import shards
from dataflex_rl.evaluate.scoring import score_benchmarks
from dataflex_rl.artefacts.layout import PROVENANCE
from dataflex_rl.artefacts.provenance import (inputs_metadata, parquet_inputs, plain_input, refuse_other_settings,
                                              state_key, verified_input, write_provenance)
from dataflex_rl.artefacts.state_lock import held_state
from dataflex_rl.training.recipe import GRPOSettings
from dataflex_rl.regimes.low_utility import measure_solve_rates
from dataflex_rl.policies.methods import MethodSpec
from dataflex_rl.corpus.token_caps import TokenCaps


def _base_input(base) -> dict[str, dict[str, str]]:
    return {"base": verified_input(base, Path(base) / PROVENANCE)} if base else {}


def build_base_model(job: Mapping[str, Any], settings: Mapping[str, Any], *, corpus, out_dir,
                     threads: int = 1, token_caps: TokenCaps | None = None) -> None:
    """Build the base model directory with its provenance inside, atomically (a sibling temporary directory, renamed
    once complete). The provenance's runtime records the thread count: the warm-up's weights depend on it."""
    backend = get_backend(job["model"]["backend"])
    if backend.build_base_model is None:
        raise ValueError(f"the {backend.name} backend builds no base model: it loads models.<m>.path")
    with atomic_directory(out_dir) as tmp:
        backend.build_base_model(BaseModelJob(job["model"], job["template"]), corpus=corpus, out_dir=tmp,
                                 threads=threads, token_caps=token_caps)
        write_provenance(tmp / PROVENANCE, settings, [tmp], inputs={"corpus": plain_input(corpus)},
                         runtime={"threads": threads})


def chunk_rows(rows: pd.DataFrame, chunk: Mapping[str, Any]) -> pd.DataFrame:
    """A solve-rate job's rows of the corpus (its `chunk`: dataflex_rl.study.solve_rate_time.chunk): rows
    [index × size, (index + 1) × size), the last chunk every row from its start on (none where the corpus is smaller
    than the dry run's bound), the whole corpus for a size of None."""
    if chunk["size"] is None:
        return rows
    start = chunk["index"] * chunk["size"]
    return rows.iloc[start:] if chunk["index"] == chunk["of"] - 1 else rows.iloc[start:start + chunk["size"]]


def _rates_frame(rates: Mapping[str, float]) -> pd.DataFrame:
    return pd.DataFrame({"id": list(rates), "solve_rate": list(rates.values())})


def measure_base_solve_rates(job: Mapping[str, Any], chunk: Mapping[str, Any], *, base, corpus, out, threads: int = 1,
                             gpus: int = 0) -> None:
    """The untrained base's solve rate per prompt of the job's chunk of the corpus (`job["sampling"]`: K samples,
    temperature, answer length; `chunk_rows`), written as a parquet of (id, solve_rate) with the sha256 of the corpus
    and base it read in its metadata. The chunk is measured in parts of the backend's `solve_rate_part` prompts (each
    part's draws seeded as one pass's are), each kept as a shard (evaluate.shards.part_path, keyed by the job and its
    inputs) that a retry after a kill or a requeue reuses; the shards go once the output is written. The
    job's `threads` verify a part's answers too (score_items: in processes from a few thousand on)."""
    inputs = {"corpus": plain_input(corpus), **_base_input(base)}  # a damaged base is refused, naming the file
    backend = get_backend(job["model"]["backend"])
    rows = chunk_rows(pd.read_parquet(corpus), chunk)
    size = backend.solve_rate_part or max(1, len(rows))
    starts = range(0, len(rows), size)
    key, sampling, generator, measured = state_key(job, inputs), job["sampling"], None, {}
    for part, start in enumerate(starts):
        path = shards.part_path(out, key, part, len(starts))
        if path.exists():
            print(f"solve rates, part {part + 1} of {len(starts)}: reusing {path} (an earlier attempt measured it)",
                  file=sys.stderr, flush=True)
            saved = pd.read_parquet(path)
            rates = dict(zip(saved["id"].map(str), saved["solve_rate"].map(float)))
        else:
            generator = generator or backend.open_generator(job["model"], model_dir=base, threads=threads, gpus=gpus)
            began = time.monotonic()
            rates = measure_solve_rates(generator, rows.iloc[start:start + size], job["template"],
                                        samples=sampling["rollouts"], temperature=sampling["temperature"],
                                        max_new_tokens=sampling["max_new_tokens"], workers=threads)
            write_parquet(path, _rates_frame(rates))
            print(f"solve rates, part {part + 1} of {len(starts)}: {len(rates)} prompts × {sampling['rollouts']} "
                  f"samples in {time.monotonic() - began:.0f} s", file=sys.stderr, flush=True)
        measured.update(rates)
    write_parquet(out, _rates_frame(measured), metadata=inputs_metadata(inputs))
    shards.remove_shards(out)


def solve_rate_table(chunks: Sequence, *, base, corpus, out) -> None:
    """The solve rates of the whole corpus from its jobs' `chunks` (measure_base_solve_rates), in their order, with
    the sha256 of the corpus and base in its metadata: refused, naming the chunk, where a chunk was measured from
    other inputs or the chunks do not hold every corpus prompt exactly once."""
    inputs, rates = {"corpus": plain_input(corpus), **_base_input(base)}, {}
    for path in chunks:
        if parquet_inputs(path) != inputs:
            raise ValueError(f"{path}: measured from other inputs than {corpus}{' and ' + str(base) if base else ''} "
                             f"now hold (the sha256 in its metadata); delete it and rerun, and Snakemake measures it "
                             f"again")
        chunk = pd.read_parquet(path)
        repeated = sorted(set(rates) & set(chunk["id"].map(str)))
        if repeated:
            raise ValueError(f"{path}: prompts {repeated[:3]} are in an earlier chunk too; delete the chunks and rerun")
        rates.update(zip(chunk["id"].map(str), chunk["solve_rate"].map(float)))
    missing = sorted(set(pd.read_parquet(corpus, columns=["id"])["id"].map(str)) - set(rates))
    if missing:
        raise ValueError(f"{out}: no chunk measured {len(missing)} prompt(s) of {corpus} (e.g. {missing[:3]}); delete "
                         f"the chunks and rerun")
    write_parquet(out, _rates_frame(rates), metadata=inputs_metadata(inputs))


def training_state(state_dir, settings: Mapping[str, Any], inputs: Mapping[str, Mapping[str, str]]) -> Path:
    """The run's resumable state folder: keyed by its settings (less `training.steps`, so that a finished run can be
    extended) and the digests of its inputs, so a changed run starts afresh by itself and an unchanged one resumes."""
    resumable = {key: value for key, value in settings.items() if key != "training.steps"}
    return Path(state_dir) / state_key(resumable, inputs)


def train_job(job: Mapping[str, Any], checkpoint_every: int) -> TrainJob:
    """The typed spec of a train job's arguments (`params.job`: Study.train_job) and its checkpoint interval."""
    return TrainJob(job["model"], job["template"], MethodSpec.from_job(job["method"]), job["seed"],
                    GRPOSettings(**job["training"], checkpoint_every=checkpoint_every), job.get("target_domain"),
                    tuple((size, seed) for size, seed in job.get("validation_draws", ())))


def train_run(job: Mapping[str, Any], settings: Mapping[str, Any], *, base, corpus, checkpoint_every: int,
              out_model, out_metrics, out_provenance, state_dir, threads: int = 1,
              token_caps: TokenCaps | None = None, gpus: int = 0) -> None:
    inputs = {"corpus": plain_input(corpus), **_base_input(base)}
    validation = MethodSpec.from_job(job["method"]).validation_input()
    if validation:  # a prompt selection's own validation prompts: its file, or its benchmark's items
        inputs["validation"] = plain_input(validation)
    state = training_state(state_dir, settings, inputs)
    with held_state(state_dir):  # one job at a time in the run's state (dataflex_rl/artefacts/state_lock.py)
        others = sorted(p.name for p in Path(state_dir).glob("*") if p.is_dir() and p != state)
        if others:
            print(f"training state {state.name} (this configuration); kept, not used: {', '.join(others)}",
                  file=sys.stderr)
        runtime = get_backend(job["model"]["backend"]).train(
            train_job(job, checkpoint_every), base=base, corpus=corpus, out_model=out_model, out_metrics=out_metrics,
            state_dir=state, threads=threads, token_caps=token_caps, gpus=gpus)
        write_provenance(out_provenance, settings, [out_model, out_metrics], inputs, runtime)


def merge_run(settings: Mapping[str, Any], *, model: str, model_dir, model_provenance, out_dir) -> None:
    """Merge a trained run of `model` into the Hugging Face directory `out_dir` (Backend.merge), written atomically
    with its provenance inside: the run's settings slice (what the weights depend on; it names the model's backend,
    `models.<model>.backend`) and the checkpoint, verified against the train job's record before it is read."""
    backend = get_backend(settings[f"models.{model}.backend"])
    if backend.merge is None:
        raise ValueError(f"the {backend.name} backend merges no checkpoint: {model_dir} is scored as written")
    inputs = {"model": verified_input(model_dir, model_provenance)}
    refuse_other_settings(model_dir, model_provenance, settings)
    with atomic_directory(out_dir) as tmp:
        backend.merge(model_dir, tmp)
        write_provenance(tmp / PROVENANCE, settings, [tmp], inputs)


def score_run(job: Mapping[str, Any], settings: Sequence[Mapping[str, Any]], *, model_dir, model_provenance,
              items: list, outputs: list, provenance: list, threads: int = 1, token_caps: TokenCaps | None = None,
              gpus: int = 0) -> None:
    """Score one model (`model_dir`: a base or a trained run's model directory, verified against its provenance
    record; None: a backend's untrained `path`) on each benchmark file in `items`, writing the matching file of
    `outputs` and its provenance record; `settings` holds each benchmark's slice, in the same order. `token_caps`:
    the caps its items are held to (dataflex_rl.evaluate.benchmark_fit); `gpus`: the job's `gpu` resource;
    `threads` its CPUs (which verify a large benchmark's answers). A model
    whose recorded settings are not those its slice holds is refused before anything is scored."""
    model_inputs = {"model": verified_input(model_dir, model_provenance)} if model_dir else {}
    for slice_ in settings if model_dir else ():  # each benchmark's slice holds the weights' slice
        refuse_other_settings(model_dir, model_provenance, slice_)
    inputs = [{**model_inputs, "items": plain_input(path)} for path in items]
    generator = get_backend(job["model"]["backend"]).open_generator(job["model"], model_dir=model_dir,
                                                                    threads=threads, gpus=gpus)
    score_benchmarks(generator, items, outputs, [state_key(s, i) for s, i in zip(settings, inputs, strict=True)],
                     job["template"], job["evaluation"], token_caps, workers=threads)
    for record, output, slice_, used in zip(provenance, outputs, settings, inputs, strict=True):
        write_provenance(record, slice_, [output], used)
