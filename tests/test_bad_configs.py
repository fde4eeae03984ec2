"""Bad study configs are refused by the real `snakemake -n`, before any job starts, with a message naming the key.

Each case is a small change to config/smoke.yaml, written to its own working directory and dry-run through the
Snakemake CLI in a process of its own, forked from one that has already imported Snakemake (tests/forked_snakemake.py),
two at a time: every dry run is a real one, the pair just shares the wall clock.
docs/refusals.md lists the same refusals.
"""
from __future__ import annotations

import copy
import json
import os
import re
import subprocess
import sys
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable

import pandas as pd
import pytest
import yaml

import forked_snakemake
from hf_model_dir import save_hf_model_dir  # imported here: the cases run in threads, and a lazy import is not safe

REPO = Path(__file__).resolve().parents[1]
SMOKE = yaml.safe_load((REPO / "config/smoke.yaml").read_text())
SMOKE_LINES = yaml.safe_dump(SMOKE).splitlines()  # the text each case's config.yaml is written as
SLURM = ["--profile", str(REPO / "profiles/slurm")]
# The smoke study's first gcd test item (benchmark_items: 8 items, seed 1000), which a validation file may not hold.
SMOKE_GCD_ITEM = {"prompt": "Find the Greatest Common Divisor (GCD) of these numbers: 15, 6. Give only the GCD as your "
                            "final answer.", "answer": "3"}


@dataclass(frozen=True)
class Case:
    id: str
    change: Callable[[dict, Path], None]
    expected: tuple[str, ...]  # the key, the bad value, the gist of the fix: all must appear in the output
    args: tuple[str, ...] = field(default=())
    text: Callable[[str], str] | None = None  # an edit of the config file's text, for what a dict cannot hold


def _unchanged(config, workdir):
    pass


def _line(prefix: str, after: int = 0) -> int:
    """The 1-based number of the first line of the smoke config's text that starts with `prefix`, after line `after`."""
    return next(number for number, line in enumerate(SMOKE_LINES, 1) if number > after and line.startswith(prefix))


def _insert_after(line: int, lines: str):
    """A text edit: `lines` inserted after line `line` of the config file."""
    def edit(text):
        before = text.splitlines(keepends=True)
        return "".join(before[:line]) + lines + "".join(before[line:])

    return edit


def _set(dotted: str, value):
    def change(config, workdir):
        node = config
        *parents, leaf = dotted.split(".")
        for key in parents:
            node = node[key]
        node[leaf] = value

    return change


def _method(name: str, entry: dict):
    return _set(f"methods.{name}", entry)


def _rename_top_level(old: str, new: str):
    def change(config, workdir):
        config[new] = config.pop(old)

    return change


def _verl(path: str = "Qwen/Qwen2.5-7B", prompts_per_step: int | None = None):
    def change(config, workdir):
        config["models"] = {"qwen": {"backend": "verl", "path": path}}
        if prompts_per_step is not None:
            config["training"]["prompts_per_step"] = prompts_per_step

    return change


def _verl_7b(**model):
    """The verl 7B model with more settings (a rollout or probe block), at 8 prompts a step."""
    def change(config, workdir):
        _verl(prompts_per_step=8)(config, workdir)
        config["models"]["qwen"].update(model)

    return change


def _directory(path: str):
    def change(config, workdir):
        (workdir / path).mkdir(parents=True)

    return change


def _local_verl_model(heads: int, kv_heads: int, tensor_parallel_size: int | None = None, positions: int = 32768):
    """A verl model at a local directory holding a tiny Qwen2 and its tokenizer (the dry run reads config.json)."""
    def change(config, workdir):
        save_hf_model_dir(workdir / "tiny-verl", heads, kv_heads, positions)
        entry = {"backend": "verl", "path": "./tiny-verl"}
        if tensor_parallel_size:
            entry["rollout"] = {"tensor_parallel_size": tensor_parallel_size}
        config["models"] = {"qwen": entry}
        config["training"]["prompts_per_step"] = 12  # 72 responses: they divide over 1, 2, 3, 4, 6 GPUs

    return change


def _interrupted_download(sharded: bool):
    """A verl model at a local directory whose download stopped part-way: the tiny Qwen2 saved in shards of 1 KB
    (four, and model.safetensors.index.json) without its second and fourth shards, or saved whole with an empty
    model.safetensors."""
    def change(config, workdir):
        directory = save_hf_model_dir(workdir / "tiny-verl", max_shard_size="1KB" if sharded else "50GB")
        for name in (["model-00002-of-00004.safetensors", "model-00004-of-00004.safetensors"] if sharded else []):
            (directory / name).unlink()
        if not sharded:
            (directory / "model.safetensors").write_bytes(b"")
        config["models"] = {"qwen": {"backend": "verl", "path": "./tiny-verl"}}
        config["training"]["prompts_per_step"] = 8

    return change


def _all(*changes):
    def change(config, workdir):
        for c in changes:
            c(config, workdir)

    return change


def _validation_benchmark(benchmark: str, size: int):
    """A gradalign method drawing `size` validation prompts from `benchmark`'s items (the smoke study has 8 a
    benchmark)."""
    return _method("gradalign", {"policy": "gradalign", "control": "baseline",
                                 "params": {"candidates_per_round": 24, "validation_size": size,
                                            "validation": {"benchmark": benchmark}}})


def _validation_file(size: int, test_item: bool, template: str = "  {}"):
    """A gradalign method reading its validation prompts from data/validation.jsonl: 12 math rows of the corpus row
    format, the first of them — where `test_item` — the smoke study's first gcd test item, re-cased and placed in
    `template` (the benchmark items job draws the same item: benchmark_items("gcd", 8, 1000))."""
    def change(config, workdir):
        rows = [{"id": f"val-{i}", "prompt": f"What is {i} + {i + 50}?", "answer": str(2 * i + 50)} for i in range(12)]
        if test_item:
            gcd = SMOKE_GCD_ITEM
            rows[0] = {"id": "val-gcd", "prompt": template.format(gcd["prompt"].upper()), "answer": gcd["answer"]}
        (workdir / "data").mkdir(exist_ok=True)
        (workdir / "data/validation.jsonl").write_text("".join(json.dumps(row) + "\n" for row in rows))
        config["methods"]["gradalign"] = {
            "policy": "gradalign", "control": "baseline",
            "params": {"candidates_per_round": 24, "validation_size": size,
                       "validation": {"path": "data/validation.jsonl", "domain": "math", "answer_format": "math"}}}

    return change


def _real_benchmark(path: str, content: str | None, hub_fallback: bool = False):
    """Replace the science stand-in kinematics with the real GPQA-Diamond read from `path` (written if content)."""
    def change(config, workdir):
        names = config["benchmarks"]["names"]
        names[names.index("kinematics")] = "GPQA-Diamond"
        config["benchmarks"]["files"] = {"GPQA-Diamond": path}
        config["benchmarks"]["hub_fallback"] = hub_fallback
        if content is not None:
            (workdir / path).parent.mkdir(parents=True, exist_ok=True)
            (workdir / path).write_text(content)

    return change


def _bbh_files(present: list[str], absent: list[str], hub_fallback: bool):
    """Replace the logic stand-in syllogism with BBH logical deduction given as several files: `present` written (an
    official BBH JSON of one example), `absent` not."""
    def change(config, workdir):
        names = config["benchmarks"]["names"]
        names[names.index("syllogism")] = "BBH-logical-deduction"
        config["benchmarks"]["files"] = {"BBH-logical-deduction": present + absent}
        config["benchmarks"]["hub_fallback"] = hub_fallback
        for path in present:
            (workdir / path).parent.mkdir(parents=True, exist_ok=True)
            (workdir / path).write_text('{"canary": "x", "examples": [{"input": "Q?", "target": "(A)"}]}')

    return change


def _rename_model(old: str, new: str):
    def change(config, workdir):
        config["models"][new] = config["models"].pop(old)

    return change


def _corpus_file(path: str, rows: int, items_per_domain: int):
    """A corpus of `items_per_domain` plus a JSONL corpus file of `rows` rows (and a blank line, which is no row)."""
    def change(config, workdir):
        config["corpus"]["items_per_domain"] = items_per_domain
        config["corpus"]["files"] = [{"path": path, "domain": "math", "answer_format": "exact"}]
        (workdir / path).parent.mkdir(parents=True, exist_ok=True)
        lines = [f'{{"prompt": "What is {i} + 1?", "answer": "{i + 1}"}}' for i in range(rows)]
        (workdir / path).write_text("\n".join(lines) + "\n\n")

    return change


def _special_file(kind: str):
    """A corpus file that is a character device (a link to /dev/zero: reading never ends) or a named pipe (opening
    blocks)."""
    def change(config, workdir):
        path = f"data/{kind}.jsonl"
        (workdir / "data").mkdir()
        if kind == "fifo":
            os.mkfifo(workdir / path)
        else:
            (workdir / path).symlink_to("/dev/zero")
        config["corpus"]["items_per_domain"] = 10
        config["corpus"]["files"] = [{"path": path, "domain": "math", "answer_format": "exact"}]
        config["training"]["prompts_per_step"] = 40  # more than the sources give: the dry run would count its lines

    return change


def _truncated_records_file(config, workdir):
    """A records table from elsewhere cut off half-way, as a copy that stopped leaves it (what it held is not read)."""
    (workdir / "data").mkdir()
    pd.DataFrame({"run_id": ["m/baseline/seed1"] * 50, "score": 0.5}).to_parquet(workdir / "data/records.parquet")
    whole = (workdir / "data/records.parquet").read_bytes()
    (workdir / "data/records.parquet").write_bytes(whole[: len(whole) // 2])
    config["records_file"] = "data/records.parquet"


def _unbalanced_selection(share: float):
    """A campaign training gradalign on a pool that holds science at `share` (validation prompts: science only)."""
    def change(config, workdir):
        config["methods"]["gradalign"] = {"policy": "gradalign", "params": {"candidates_per_round": 24},
                                          "control": "baseline"}
        config["regimes"] = {"no_science": {"transform": "unbalanced", "target_domain": "science", "share": share}}
        config["campaigns"] = {"unbalanced_pool": {"regimes": ["no_science"], "methods": ["baseline", "gradalign"]}}

    return change


def _drop_control(method: str):
    def change(config, workdir):
        config["methods"][method].pop("control")

    return change


CASES = [
    Case("top-level typo", _rename_top_level("training", "trainig"),
         ("trainig: unknown key 'trainig'; did you mean 'training'?", "training: required key is missing")),
    Case("unknown policy", _set("methods.difffilter.policy", "difffliter"),
         ("methods.difffilter.policy: unknown policy 'difffliter'; did you mean 'difffilter'?",)),
    Case("policy parameter typo", _method("topk", {"policy": "topk", "params": {"keep_fracton": 0.5},
                                                   "control": "baseline"}),
         ("methods.topk.params.keep_fracton: unknown parameter 'keep_fracton'", "did you mean 'fraction'?")),
    Case("unknown benchmark", _set("benchmarks.names", ["basic_arithmetic", "gdc", "syllogism", "molar_mass"]),
         ("benchmarks.names: unknown benchmark 'gdc'; did you mean 'gcd'?",)),
    Case("benchmarks of one domain only", _set("benchmarks.names", ["basic_arithmetic", "syllogism"]),
         ("benchmarks.names: the domain-balanced summary (DB-12) needs math, logic and science benchmarks; "
          "found only ['logic', 'math']",)),
    Case("unknown corpus source", _set("corpus.sources", ["basic_arithmetic", "chain_summ", "syllogism",
                                                          "molar_mass"]),
         ("corpus.sources: unknown source 'chain_summ'; did you mean 'chain_sum'?",)),
    Case("real benchmark as corpus source", _set("corpus.sources", ["basic_arithmetic", "GSM8K", "syllogism",
                                                                    "molar_mass"]),
         ("corpus.sources: 'GSM8K' is a real benchmark",)),
    Case("keep fraction above 1", _method("topk", {"policy": "topk", "params": {"fraction": 1.5},
                                                   "control": "baseline"}),
         ("methods.topk.params.fraction: 1.5 must be a number in (0, 1]",)),
    Case("keep fraction rounds to zero responses", _method("topk", {"policy": "topk", "params": {"fraction": 0.05},
                                                                    "control": "baseline"}),
         ("methods.topk.params.fraction: fraction 0.05 of K=6 responses of each group rounds to 0 responses",)),
    Case("gfpo keeps zero", _method("gfpo", {"policy": "gfpo", "params": {"keep": 0}, "control": "baseline"}),
         ("methods.gfpo.params.keep: 0 must be an integer in [1, inf)",)),
    Case("maxvar keeps all K", _method("maxvar", {"policy": "maxvar", "params": {"keep": 6}, "control": "baseline"}),
         ("methods.maxvar.params.keep: keep 6 ≥ K=6 (training.rollouts)",)),
    Case("K below 2", _set("training.rollouts", 1), ("training.rollouts: 1 is less than the minimum of 2",)),
    Case("difffilter low above high", _set("methods.difffilter.params", {"low": 0.8, "high": 0.2}),
         ("methods.difffilter.params.low: low 0.8 ≥ high 0.2 keeps no group",)),
    Case("difffilter band no solve rate reaches", _set("methods.difffilter.params", {"low": 0.2, "high": 0.3}),
         ("methods.difffilter.params.low: no solve rate a group of K=6 rollouts can have", "(0.2, 0.3)")),
    Case("softmax temperature zero", _set("methods.softmax.params", {"temperature": 0}),
         # a float parameter written as an integer is read (and named) as that float
         ("methods.softmax.params.temperature: 0.0 must be a number in (0, inf)",)),
    Case("diffband quantiles crossed", _method("diffband", {"policy": "diffband", "params": {"low_q": 0.9,
                                                                                            "high_q": 0.1},
                                                            "control": "baseline"}),
         ("methods.diffband.params.low_q: low_q 0.9 > high_q 0.1",)),
    Case("control missing from the matrix", _set("methods.softmax.control", "uniform"),
         ("methods.softmax.control: 'uniform' is not a method of this study",)),
    Case("selection without a control", _drop_control("difffilter"),
         ("methods.difffilter.control: missing; a selection method is compared with its control",)),
    Case("mixture compared with the baseline", _method("reward_gap", {"policy": "reward_gap", "control": "baseline"}),
         ("methods.reward_gap.control: 'baseline' runs policy 'baseline'", "static")),
    # prompt selection: a round that keeps nothing, a validation probe noisier than its candidates, a response policy
    # that is not one or has parameters it cannot run with, a control that is no uniform or random-prompts method
    Case("prompt selection keeps nothing", _method("gradalign", {
        "policy": "gradalign", "params": {"candidates_per_round": 10, "selection_ratio": 20}, "control": "baseline"}),
         ("methods.gradalign.params.selection_ratio: ⌊M/q⌋ = ⌊10/20⌋ = 0 keeps no prompt",)),
    Case("prompt selection keeping fewer prompts than a step draws", _method("gradalign", {
        "policy": "gradalign", "params": {"candidates_per_round": 10, "selection_ratio": 10}, "control": "baseline"}),
         ("methods.gradalign.params.selection_ratio: training.prompts_per_step 8 > the 1 prompt(s) a round keeps "
          "(⌊M/q⌋ = ⌊10/10⌋; its 10 steps would make 80 passes over them): a step would draw the same prompt more "
          "than once", "use selection_ratio ≤ 1, or raise candidates_per_round to at least 80, or lower "
          "training.prompts_per_step to at most 1")),
    Case("validation probe with k_v <= k_r", _method("simacc", {
        "policy": "simacc", "params": {"rollouts_candidate": 8, "rollouts_validation": 4}, "control": "baseline"}),
         ("methods.simacc.params.rollouts_validation: k_v 4 ≤ k_r 8",)),
    Case("gradalign dot with per-group validation normalisation", _method("gradalign", {
        "policy": "gradalign", "params": {"similarity": "dot", "normalise_validation_groups": True},
        "control": "baseline"}),
         ("methods.gradalign.params.normalise_validation_groups: true has no effect with similarity: dot",
          "drop normalise_validation_groups, or use similarity: cosine")),
    Case("validation file holding a test item", _validation_file(12, test_item=True),
         ("methods.gradalign.params.validation: 1 prompt(s) of validation file data/validation.jsonl are or hold test "
          "items", "the first row 'val-gcd' = benchmark 'gcd' item 'bench-1000-gcd-000000'; remove them from the "
          "file")),
    # Before, only equality was checked: the row passed, though decontamination would remove it from the corpus.
    Case("validation file holding a test item inside a template",
         _validation_file(12, test_item=True, template="Solve the following problem step by step.\n\n{}\n\n"
                                                       "Put your final answer within \\boxed{{}}."),
         ("methods.gradalign.params.validation: 1 prompt(s) of validation file data/validation.jsonl are or hold test "
          "items (the same id, or a prompt decontamination removes from the corpus: the same normalised text, or the "
          "item inside a template at decontamination.threshold 0.8), the first row 'val-gcd' holds benchmark 'gcd' "
          "item 'bench-1000-gcd-000000' (contained); remove them from the file",)),
    Case("validation file smaller than validation_size", _validation_file(20, test_item=False),
         ("methods.gradalign.params.validation_size: 20 exceeds the 12 prompts of validation file "
          "data/validation.jsonl; lower it to at most 12",)),
    Case("validation benchmark outside the study", _validation_benchmark("math500", 4),
         ("methods.gradalign.params.validation.benchmark: 'math500' is not one of the study's benchmarks.names",
          "name one of them")),
    Case("validation benchmark left without test items", _validation_benchmark("gcd", 8),
         ("methods.gradalign.params.validation_size: 8 validation items of benchmark 'gcd' leave none of its at most "
          "8 items (benchmarks.items) to test; lower it below 8",)),
    Case("validation benchmark beside file keys", _method("gradalign", {
        "policy": "gradalign", "control": "baseline", "params": {"validation": {"benchmark": "gcd", "path": "x"}}}),
         ("methods.gradalign.params.validation: a validation benchmark is given as {benchmark: <name>} alone",)),
    Case("validation given as a string", _method("gradalign", {
        "policy": "gradalign", "control": "baseline", "params": {"validation": "gcd"}}),
         ("methods.gradalign.params.validation: 'gcd' must be a mapping: a validation file as a corpus.files entry "
          "{path, domain, answer_format, source}, or a validation benchmark as {benchmark: <name>}",)),
    Case("prompt selection with a mixture as response policy", _method("accgreedy", {
        "policy": "accgreedy", "params": {"response_policy": "dump_ucb"}, "control": "baseline"}),
         ("methods.accgreedy.params.response_policy: 'dump_ucb' is not a response policy",)),
    Case("prompt selection with bad response parameters", _method("align", {
        "policy": "align", "params": {"response_policy": "difffilter", "response_params": {"low": 0.8, "high": 0.2}},
        "control": "baseline"}),
         ("methods.align.params.response_params: low: low 0.8 ≥ high 0.2 keeps no group",)),
    Case("prompt selection compared with a mixture", _method("gradalign", {"policy": "gradalign", "control": "static"}),
         ("methods.gradalign.control: 'static' runs policy 'static'", "baseline or random_prompts")),
    Case("duplicate seeds", _set("seeds", [1, 1]), ("seeds: [1, 1] has non-unique elements",)),
    Case("per-method seeds", _set("methods.softmax.seeds", [3]),
         ("methods.softmax.seeds: unknown key 'seeds'", "study-wide top-level `seeds`")),
    Case("MinHash setting of the old detector", _set("decontamination", {"threshold": 0.8, "num_perm": 128}),
         ("decontamination.num_perm: unknown key 'num_perm' (allowed here: threshold); decontamination no longer uses "
          "MinHash",)),
    Case("per-method seed in params", _set("methods.difffilter.params.seed", 7),
         ("methods.difffilter.params.seed: 7 is only meaningful with `control: random`",)),
    Case("static weights name a domain the corpus lacks",
         _method("static", {"policy": "static", "params": {"weights": {"math": 1, "logic": 1, "sciense": 1}},
                            "control": "baseline"}),
         ("methods.static.params.weights: domain(s) ['sciense'] are not in the corpus",)),
    Case("real benchmark file missing", _real_benchmark("data/gpqa.jsonl", None),
         ("benchmarks.files.GPQA-Diamond: 'data/gpqa.jsonl' does not exist", "benchmarks.hub_fallback: true")),
    Case("real benchmark file empty (hub fallback on)", _real_benchmark("data/gpqa.jsonl", "", hub_fallback=True),
         ("benchmarks.files.GPQA-Diamond: 'data/gpqa.jsonl' is empty",)),
    Case("one of a benchmark's files missing (hub fallback on)",
         _bbh_files(["data/bbh/three.json", "data/bbh/seven.json"], ["data/bbh/five.json"], hub_fallback=True),
         ("benchmarks.files.BBH-logical-deduction: 'data/bbh/five.json' does not exist; put the file there or fix the "
          "path: a benchmark given as several files is read from all of them",)),
    Case("every one of a benchmark's files missing, no hub fallback",
         _bbh_files([], ["data/bbh/three.json", "data/bbh/five.json"], hub_fallback=False),
         ("benchmarks.files.BBH-logical-deduction: 'data/bbh/three.json' does not exist",
          "benchmarks.files.BBH-logical-deduction: 'data/bbh/five.json' does not exist")),
    Case("verl local model path missing", _verl(path="./weights/qwen-7b"),
         ("models.qwen.path: local path './weights/qwen-7b' does not exist",)),
    Case("verl local model directory without the model",
         _all(_verl(path="./weights/qwen-7b"), _directory("weights/qwen-7b")),
         ("models.qwen.path: the model directory './weights/qwen-7b' lacks config.json, weights (*.safetensors or "
          "*.bin), a tokenizer (tokenizer.json, tokenizer.model, vocab.json)",
          "hf download <hub name> --local-dir ./weights/qwen-7b")),
    Case("verl local model whose weight index names absent shards", _interrupted_download(sharded=True),
         ("models.qwen.path: the model directory './tiny-verl' holds weights verl and vLLM cannot load: "
          "model.safetensors.index.json names 4 shard(s), 2 of them not in the directory: "
          "model-00002-of-00004.safetensors, model-00004-of-00004.safetensors",
          "download the whole model into it again")),
    Case("verl local model with an empty safetensors file", _interrupted_download(sharded=False),
         ("models.qwen.path: the model directory './tiny-verl' holds weights verl and vLLM cannot load: "
          "model.safetensors is empty (0 bytes)",)),
    # Before, accepted: its rounds never read the items, and every run's gcd score left them out.
    Case("random prompts given a validation benchmark", _method("random", {
        "policy": "random_prompts", "control": "baseline",
        "params": {"candidates_per_round": 48, "validation": {"benchmark": "gcd"}}}),
         ("methods.random.params.validation: policy 'random_prompts' reads no validation prompts (it draws its prompts "
          "at random), so {'benchmark': 'gcd'} would only hold the items drawn from benchmark 'gcd' out of every run's "
          "test score; remove validation (the policies that read validation prompts: gradalign, simacc, "
          "validation_set)",)),
    # validation_positions("gcd", 8, ...): size 7 at seed 0 leaves item 4, at seed 1 item 3; together none
    Case("two validation draws of one benchmark that hold out all its items", _all(*(
        _method(name, {"policy": "gradalign", "control": "baseline",
                       "params": {"candidates_per_round": 48, "validation_size": 7, "validation_seed": seed,
                                  "validation": {"benchmark": "gcd"}}})
        for name, seed in (("gradalign_a", 0), ("gradalign_b", 1)))),
         ("methods.gradalign_a.params.validation_seed: the validation draws of methods.gradalign_a (validation_size 7, "
          "validation_seed 0), methods.gradalign_b (validation_size 7, validation_seed 1) from benchmark 'gcd' "
          "together hold out all 8 of its items", "give these methods one validation_seed")),
    Case("verl model path neither a directory nor a hub name", _verl(path="Qwen/Qwen2.5/7B"),
         ("models.qwen.path: 'Qwen/Qwen2.5/7B' is neither a local directory", "nor a hub name")),
    Case("Adam preconditioning on a verl model", _all(_verl(), _method("gradalign", {
        "policy": "gradalign", "params": {"precondition": "adam"}, "control": "baseline"})),
         ("methods.gradalign.params.precondition: 'adam' divides g_v by Adam's second moment, which on the verl "
          "backend lives in the FSDP optimiser shards", "use precondition: none (the default) on verl (models.qwen "
          "is a verl model)")),
    Case("a selection round's backward passes beyond one GPU", _all(_verl(), _set("models.qwen.probe", {
        "parameters": 8190000000, "gpu_memory_gb": 80}), _method("gradalign", {"policy": "gradalign",
                                                                                "control": "baseline"})),
         ("models.qwen.probe.gpu_memory_gb: 80, but a selection round's backward passes need 92 GiB on one GPU for "
          "8.19e+09 parameters", "train on GPUs of ≥ 102 GiB")),
    # the round's host memory: Qwen3-8B on the train rule's 8 GPUs, one round engine each (30 bytes a parameter)
    Case("a selection round's host memory beyond the train job's", _all(_verl(), _set("models.qwen.probe", {
        "parameters": 8190735360, "gpu_memory_gb": 141}), _method("gradalign", {"policy": "gradalign",
                                                                                 "control": "baseline"})),
         ("resources of rule train: mem_mb=32000, but a selection round of models.qwen holds 234435 MB on the host",
          "the weights of its 8 sleeping vLLM engine(s), pinned bf16 copies (8 × 2 bytes a parameter, 124981 MB)",
          "set models.qwen.resources.train.mem_mb to at least 234435"), args=("--set-resources", "train:mem_mb=32000")),
    # a local model's config.json: the round's activations and logits are counted besides the parameters; the tiny
    # Qwen2's 8 padded sequences of 1024 prompt + 8192 response tokens hold a 2.0 GB attention mask (8 × 9216² × 3)
    Case("a selection round's activations beyond one GPU", _all(
        _local_verl_model(heads=2, kv_heads=1), _set("training.max_new_tokens", 8192),
        _set("models.qwen.probe", {"gpu_memory_gb": 3, "micro_batch": 8}),
        _method("gradalign", {"policy": "gradalign", "control": "baseline"})),
         ("models.qwen.probe.micro_batch: 8, but a selection round's backward passes need an estimated",
          "the attention mask, 8 × 9216² × 3 bytes = 1.9 GiB", "calibrated on the CPU, on no GPU",
          "lower models.qwen.probe.micro_batch to 3 (the largest that fits)"), args=("--set-resources", "train:gpu=4")),
    Case("embedded model given a path", _set("models.tiny-qwen2.path", "Qwen/Qwen2.5-7B"),
         ("models.tiny-qwen2.path: 'Qwen/Qwen2.5-7B'", "reads no path")),
    Case("unknown backend", _set("models.tiny-qwen2.backend", "verll"),
         ("models.tiny-qwen2.backend: 'verll' is not one of ['embedded', 'verl']", "did you mean 'verl'?")),
    Case("unknown KL kind", _set("training.kl_kind", "low-var-kl"),
         ("training.kl_kind: 'low-var-kl' is not one of ['kl', 'k1', 'abs', 'mse', 'k2', 'low_var_kl', 'k3']; did you "
          "mean 'low_var_kl'?",)),
    Case("loss aggregation misspelt", _set("training.loss_aggregation", "token_mean"),
         ("training.loss_aggregation: 'token_mean' is not one of ['seq-mean-token-mean', 'token-mean']",
          "the paper's Eq. 1", "did you mean 'token-mean'?")),
    Case("loss aggregation the recipe does not offer", _set("training.loss_aggregation", "seq-mean-token-sum"),
         ("training.loss_aggregation: 'seq-mean-token-sum' is not one of ['seq-mean-token-mean', 'token-mean']",
          "token-mean is what the authors' released runs used")),
    Case("training steps zero", _set("training.steps", 0), ("training.steps: 0 is less than the minimum of 1",)),
    Case("warm-up steps zero", _set("models.tiny-qwen2.warmup.steps", 0),
         ("models.tiny-qwen2.warmup.steps: 0 is less than the minimum of 1",)),
    Case("checkpoint after the last step", _set("training.checkpoint_every", 10),
         ("training.checkpoint_every: 10 > training.steps 3",)),
    Case("verl batch does not divide over the GPUs", _all(_verl(prompts_per_step=3), _set("training.rollouts", 4)),
         ("training.prompts_per_step: 3 × training.rollouts 4 = 12 responses per step do not divide over the "
          "train job's 8 GPUs",), args=tuple(SLURM)),
    Case("verl rollout TP does not divide the train GPUs",
         _all(_verl(prompts_per_step=8), _set("models.qwen.rollout", {"tensor_parallel_size": 3})),
         ("models.qwen.rollout.tensor_parallel_size: 3 does not divide the train job's 8 GPUs (resource gpu=8)",
          "set models.qwen.rollout.tensor_parallel_size to one of [1, 2, 4, 8]"), args=tuple(SLURM)),
    Case("verl rollout TP does not divide the KV heads", _local_verl_model(heads=6, kv_heads=2, tensor_parallel_size=3),
         ("models.qwen.rollout.tensor_parallel_size: 3 does not divide the 2 key-value heads of './tiny-verl'",
          "the sizes that split them are [1, 2, 6]"), args=("--set-resources", "train:gpu=6")),
    Case("verl score TP does not divide the heads", _local_verl_model(heads=4, kv_heads=2),
         ("resources of rule score: gpu=3, the tensor_parallel_size of models.qwen's vLLM scoring engine, does not "
          "divide the 4 attention heads of './tiny-verl'", "the sizes that split them are [1, 2, 4]"),
         args=("--set-resources", "train:gpu=1", "score:gpu=3")),
    Case("verl engine context beyond the model's positions", _local_verl_model(heads=2, kv_heads=1, positions=1026),
         ("models.qwen scoring: vLLM's max_model_len 1032 (the scorer's 1024 prompt tokens + evaluation.max_new_tokens "
          "8) is more than the 1026 positions of './tiny-verl' (max_position_embeddings), which vLLM refuses at engine "
          "start; set evaluation.max_new_tokens (or models.qwen.evaluation.max_new_tokens) to at most 2",
          "models.qwen rollout: vLLM's max_model_len 1032 (1024 prompt tokens (verl's data.max_prompt_length) + "
          "training.max_new_tokens 8)", "set training.max_new_tokens (or models.qwen.training.max_new_tokens) to at "
          "most 2"),
         args=("--set-resources", "train:gpu=1", "score:gpu=1")),
    Case("verl engine context beyond a declared context", _verl_7b(context=1030, probe={"parameters": 494032768}),
         ("models.qwen scoring: vLLM's max_model_len 1032 (the scorer's 1024 prompt tokens + evaluation.max_new_tokens "
          "8) is more than the 1030 positions of 'Qwen/Qwen2.5-7B' (models.qwen.context, as declared: its config.json "
          "cannot be read here), which vLLM refuses at engine start; set evaluation.max_new_tokens (or "
          "models.qwen.evaluation.max_new_tokens) to at most 6",
          "models.qwen rollout: vLLM's max_model_len 1032 (1024 prompt tokens (verl's data.max_prompt_length) + "
          "training.max_new_tokens 8) is more than the 1030 positions")),
    Case("verl model's own length beyond its declared context",
         _verl_7b(context=1030, probe={"parameters": 494032768}, training={"max_new_tokens": 7}),
         ("models.qwen rollout: vLLM's max_model_len 1031 (1024 prompt tokens (verl's data.max_prompt_length) + "
          "models.qwen.training.max_new_tokens 7) is more than the 1030 positions of 'Qwen/Qwen2.5-7B' "
          "(models.qwen.context, as declared: its config.json cannot be read here), which vLLM refuses at engine "
          "start; set models.qwen.training.max_new_tokens to at most 6",)),
    Case("verl declared context other than config.json's", _all(_local_verl_model(heads=2, kv_heads=1),
                                                               _set("models.qwen.context", 4096)),
         ("models.qwen.context: 4096 declared, but the config.json of './tiny-verl' gives 32768 "
          "(max_position_embeddings, as vLLM derives it); set models.qwen.context to 32768, or remove it (the dry run "
          "reads config.json wherever it can)",)),
    Case("verl rollout TP does not divide a declared architecture's heads",
         _verl_7b(architecture={"hidden_size": 3584, "intermediate_size": 18944, "num_hidden_layers": 28,
                                "vocab_size": 152064, "num_attention_heads": 28, "num_key_value_heads": 4},
                  rollout={"tensor_parallel_size": 8}),
         ("models.qwen.rollout.tensor_parallel_size: 8 does not divide the 28 attention heads of 'Qwen/Qwen2.5-7B' "
          "(models.qwen.architecture, as declared: 28 attention, 4 key-value heads)",
          "the sizes that split them are [1, 2, 4, 28]"), args=tuple(SLURM)),
    Case("verl declared architecture other than config.json's", _all(
        _local_verl_model(heads=2, kv_heads=1),
        _set("models.qwen.architecture", {"hidden_size": 8, "intermediate_size": 16, "num_hidden_layers": 2,
                                          "vocab_size": 4, "num_attention_heads": 2, "num_key_value_heads": 1})),
         ("models.qwen.architecture: the config.json of './tiny-verl' gives another shape (num_hidden_layers 2 "
          "declared, 1 read); copy its values into models.qwen.architecture, or remove it (the dry run reads "
          "config.json wherever it can)",)),
    Case("embedded model with a declared architecture", _set("models.tiny-qwen2.architecture", {
        "hidden_size": 128, "intermediate_size": 512, "num_hidden_layers": 4, "vocab_size": 1024,
        "num_attention_heads": 4}),
         ("models.tiny-qwen2.architecture: only a verl model declares its config.json's architecture; the embedded "
          "backend builds its model from models.tiny-qwen2.shape — remove it",)),
    Case("embedded model with a declared context", _set("models.tiny-qwen2.context", 512),
         ("models.tiny-qwen2.context: 512 — only a verl model declares its context; the embedded backend builds its "
          "model with models.tiny-qwen2.shape.max_position_embeddings positions, which the dry run holds its lengths "
          "to — remove it",)),
    Case("verl rollout share beside the FSDP state", _verl_7b(probe={"parameters": 7615616512}),
         ("models.qwen.rollout.gpu_memory_utilization: 0.85, but on each of the train job's 8 GPUs of 80 GB, counted "
          "as 78 GiB (models.qwen.probe.gpu_memory_gb; dataflex_rl/backends/verl/gpu_types.py) verl holds the FSDP "
          "state of 7.62e+09 parameters", "82.0 GiB in all",
          "set models.qwen.rollout.gpu_memory_utilization to at most 0.79"),
         args=(*SLURM, "--set-resources", "train:gpu=8")),
    Case("a GPU memory above 80 GB with no GPU type asked", _verl_7b(probe={"parameters": 7615616512,
                                                                            "gpu_memory_gb": 141}),
         ("models.qwen.probe.gpu_memory_gb: 141, but the train job asks for no GPU type (resource gpu_model), so Slurm "
          "may give it any GPU of its partition, and the smallest common one has 80 GB",
          "sized for 141 GB, counted as 139 GiB would run out of memory",
          "ask for the type (models.qwen.resources.train.gpu_model: h200",
          "or lower models.qwen.probe.gpu_memory_gb to at most 80"),
         args=(*SLURM, "--set-resources", "train:gpu=8")),
    Case("a GPU type smaller than the declared GPU memory", _verl_7b(
        probe={"parameters": 7615616512, "gpu_memory_gb": 141}, resources={"train": {"gpu_model": "h100"}}),
         ("models.qwen.probe.gpu_memory_gb: 141, but the train job asks for gpu_model 'h100' (80 GB: 79.11 GiB as CUDA "
          "reports it, nvidia-smi 81,559 MiB), below the 141 GB, counted as 139 GiB — ask for a larger type "
          "(models.qwen.resources.train.gpu_model: h200) or lower models.qwen.probe.gpu_memory_gb to at most 80",),
         args=(*SLURM, "--set-resources", "train:gpu=8")),
    Case("verl train job without a GPU", _verl(prompts_per_step=8),
         ("resources of rule train: gpu=0, but models.qwen (backend verl) trains on GPUs; give the train rule gpu ≥ 1",),
         args=(*SLURM, "--set-resources", "train:gpu=0")),
    Case("a fractional GPU count", _verl(prompts_per_step=8),
         ("resources of rule train: gpu='2.5' is not a whole number of GPUs; give a non-negative integer",),
         args=(*SLURM, "--set-resources", "train:gpu=2.5")),
    Case("a train runtime of 0 on the Slurm profile", _unchanged,
         ("resources of rule train: runtime=0, but runtime, mem_mb and cpus_per_task must each be at least 1: the "
          "Slurm executor sends no --time", "the cost plan prices its jobs at 0 hours", "give runtime ≥ 1"),
         args=(*SLURM, "--set-resources", "train:runtime=0")),
    Case("0 CPUs a task on the Slurm profile", _unchanged,
         ("resources of rule train: cpus_per_task=0, but runtime, mem_mb and cpus_per_task must each be at least 1",
          "asks for the job's threads instead", "give cpus_per_task ≥ 1"), args=(*SLURM, "--set-resources", "train:cpus_per_task=0")),
    Case("0 MB for a job without a memory estimate", _unchanged,
         ("resources of rule corpus: mem_mb=0, but runtime, mem_mb and cpus_per_task must each be at least 1",
          "sends no --mem", "give mem_mb ≥ 1"), args=(*SLURM, "--set-resources", "corpus:mem_mb=0")),
    Case("memory that is not a number", _unchanged,
         ("resources of rule train: mem_mb='abc' is not a whole number of megabytes",),
         args=("--set-resources", "train:mem_mb=abc")),
    Case("two models on other GPU partitions",
         lambda config, workdir: config.update(models={
             "qwen": {"backend": "verl", "path": "Qwen/Qwen2.5-7B",
                      "resources": {"train": {"slurm_partition": "a100"}}},
             "llama": {"backend": "verl", "path": "meta-llama/Llama-3.1-8B"}}),
         ("models.llama and models.qwen put their train jobs on other slurm_partitions ('gpu', 'a100')",
          "--set-resources train:slurm_partition=")),
    Case("verl score job without a GPU", _verl(), ("resources of rule score: gpu=0, but models.qwen (backend verl) is "
                                                   "scored with vLLM on GPUs; give the score rule gpu ≥ 1",),
         args=("--set-resources", "score:gpu=0")),
    Case("verl score job without a GPU on the Slurm profile", _verl(),
         ("resources of rule score: gpu=0, but models.qwen (backend verl)", "its default is 1"),
         args=(*SLURM, "--set-resources", "score:gpu=0")),
    Case("train job exceeds the partition's GPUs",
         _all(_verl(prompts_per_step=8),
              _set("cluster", {"partitions": {"gpu": {"gpus_per_node": 4}, "cpu": {"cpus_per_node": 16}}})),
         ("resources of rule train: gpu=8 exceeds cluster.partitions.gpu.gpus_per_node = 4",), args=tuple(SLURM)),
    Case("fewer CPUs than threads", _set("threads_per_job", 4),
         ("resources of rule train: cpus_per_task=2 < threads=4",),
         args=("--set-resources", "train:cpus_per_task=2")),
    # The smoke corpus: 60 items per domain over 5 math, 4 logic and 3 science sources (12 + 15 + 20 each, rounded
    # up) — at most 180 rows; at 10 per domain: 5 × 2 + 4 × 3 + 3 × 4 = 34.
    Case("prompts per step above the corpus", _set("training.prompts_per_step", 181),
         ("training.prompts_per_step: 181 > the training corpus's 180 rows at most",
          "lower training.prompts_per_step to at most 180")),
    Case("prompts per step above the corpus and its file",
         _all(_corpus_file("data/extra.jsonl", rows=5, items_per_domain=10), _set("training.prompts_per_step", 40)),
         ("training.prompts_per_step: 40 > the training corpus's 39 rows at most",
          "corpus.sources: 34; corpus.files[0] 'data/extra.jsonl': 5")),
    Case("a study name YAML reads as a date", _unchanged,
         ("study: YAML reads 2024-01-01 as a date, not as a name; quote it: '2024-01-01'",),
         text=lambda text: re.sub(r"(?m)^study: .*$", "study: 2024-01-01", text)),
    Case("a corpus file that is a device", _special_file("device"),
         ("is not a regular file (a device, a named pipe or a socket)", "corpus.files[0].path: 'data/device.jsonl'",
          "give the path of a JSONL or parquet file")),
    Case("a corpus file that is a named pipe", _special_file("fifo"),
         ("is not a regular file (a device, a named pipe or a socket)", "corpus.files[0].path: 'data/fifo.jsonl'")),
    # The smoke model's estimates (dataflex_rl/backends/embedded/memory.py): train 1637 MB, score 1491 MB.
    Case("train memory below the estimate", lambda config, workdir: None,
         ("resources of rule train: mem_mb=500 is below the estimated peak memory of a train job, 1637 MB, for "
          "models.tiny-qwen2", "training.prompts_per_step 8 × training.rollouts 6", "train:mem_mb="),
         args=("--set-resources", "train:mem_mb=500")),
    # A gradalign method's round (144 candidates, 16 rollouts per validation prompt) raises the train estimate to
    # 3057 MB.
    Case("train memory below a prompt selection's round", _method("gradalign", {"policy": "gradalign",
                                                                                "control": "baseline"}),
         ("resources of rule train: mem_mb=900 is below the estimated peak memory of a train job, 3057 MB",
          "selection rounds of 144 candidates × 16 rollouts"),
         args=("--set-resources", "train:mem_mb=900")),
    Case("score memory below the estimate", lambda config, workdir: None,
         ("resources of rule score: mem_mb=700 is below the estimated peak memory of a score job, 1491 MB, for "
          "models.tiny-qwen2", "evaluation.batch_size 64", "lower evaluation.batch_size"),
         args=("--set-resources", "score:mem_mb=700")),
    # The Slurm profile's default memory: the GPU jobs' larger requests come with the verl backend's rules.
    Case("score batch of long prompts above the Slurm profile's memory",
         _all(_set("models.tiny-qwen2.shape.max_position_embeddings", 4096), _set("evaluation.batch_size", 512)),
         ("resources of rule score: mem_mb=8000 is below the estimated peak memory of a score job, 178413 MB",
          "prompts up to 4088 (max_position_embeddings 4096 − evaluation.max_new_tokens 8, the most "
          "data_validation.benchmarks.max_prompt_tokens lets through) tokens"), args=tuple(SLURM)),
    # A configured prompt-token cap shrinks the estimate: 40 prompts of up to 100 tokens need 1555 MB (6098 MB at the
    # default cap of 512 − 8 = 504 tokens).
    Case("train memory at a configured prompt-token cap",
         _all(_set("training.prompts_per_step", 40), _set("data_validation", {"corpus": {"max_prompt_tokens": 100}})),
         ("resources of rule train: mem_mb=1500 is below the estimated peak memory of a train job, 1555 MB",
          "prompts up to 100 (data_validation.corpus.max_prompt_tokens) tokens"),
         args=("--set-resources", "train:mem_mb=1500")),
    # the prompt-token cap (dataflex_rl/corpus/training_fit.py) must leave a prompt and its response within
    # the positions
    Case("prompt-token cap beyond the positions", _set("data_validation", {"corpus": {"max_prompt_tokens": 600}}),
         ("data_validation.corpus.max_prompt_tokens: 600 + training.max_new_tokens 8 > "
          "models.tiny-qwen2.shape.max_position_embeddings 512", "to at most 504")),
    Case("prompt-token cap one past a short model's positions",
         _all(_set("models.tiny-qwen2.shape.max_position_embeddings", 64),
              _set("data_validation", {"corpus": {"max_prompt_tokens": 57}})),
         ("data_validation.corpus.max_prompt_tokens: 57 + training.max_new_tokens 8 > "
          "models.tiny-qwen2.shape.max_position_embeddings 64", "to at most 56")),
    # the benchmark prompt-token and the gold-answer caps (dataflex_rl/corpus/token_caps.py) likewise
    Case("benchmark prompt-token cap beyond the positions",
         _set("data_validation", {"benchmarks": {"max_prompt_tokens": 505}}),
         ("data_validation.benchmarks.max_prompt_tokens: 505 + evaluation.max_new_tokens 8 > "
          "models.tiny-qwen2.shape.max_position_embeddings 512: a prompt at the cap and its answer", "to at most 504")),
    Case("corpus answer-token cap at the positions", _set("data_validation", {"corpus": {"max_answer_tokens": 512}}),
         ("data_validation.corpus.max_answer_tokens: 512 + 1 end-of-text token > "
          "models.tiny-qwen2.shape.max_position_embeddings 512: a gold answer at the cap", "to at most 511")),
    Case("benchmark answer-token cap beyond the positions",
         _set("data_validation", {"benchmarks": {"max_answer_tokens": 600}}),
         ("data_validation.benchmarks.max_answer_tokens: 600 + 1 end-of-text token > ", "to at most 511")),
    Case("response budget filling the positions", _set("training.max_new_tokens", 512),
         ("training.max_new_tokens: 512 ≥ models.tiny-qwen2.shape.max_position_embeddings 512: a response of that "
          "length leaves no position for a prompt",)),
    Case("answer budget filling the positions", _set("evaluation.max_new_tokens", 600),
         ("evaluation.max_new_tokens: 600 ≥ models.tiny-qwen2.shape.max_position_embeddings 512: an answer of that "
          "length leaves no position for a prompt",)),
    # YAML that hides mistakes: numbers that are not what they look like
    Case("integer written with a decimal point", _set("models.tiny-qwen2.shape.num_attention_heads", 2.0),
         ("models.tiny-qwen2.shape.num_attention_heads: 2.0 is not an integer; write it without the decimal point",)),
    Case("batch size written with a decimal point", _set("training.prompts_per_step", 4.0),
         ("training.prompts_per_step: 4.0 is not an integer",)),
    Case("learning rate .nan", _set("training.learning_rate", float("nan")),
         ("training.learning_rate: nan is not a finite number (YAML reads .nan and .inf as numbers)",)),
    Case("KL coefficient .inf", _set("training.kl_coef", float("inf")),
         ("training.kl_coef: inf is not a finite number",)),
    Case("exponent without a decimal point", _set("training.learning_rate", "1e-4"),
         ("training.learning_rate: '1e-4' is text, not a number; YAML reads exponent notation without a decimal "
          "point as text — write 1.0e-4",)),
    Case("quoted number", _set("training.steps", "3"), ("training.steps: '3' is text, not a number; remove the",)),
    Case("study name ending in a newline", _set("study", "smoke\n"), ("study: the name 'smoke\\n' is not allowed",)),
    Case("over-long model name", _rename_model("tiny-qwen2", "m" * 150),
         ("models: the name 'mmmmmmmmmmmmmmmmmmmm'… is 150 characters long; it becomes a path component, so use at "
          "most 100",)),
    Case("reserved method name", _method("untrained", {"policy": "baseline"}),
         ("methods.untrained: the name 'untrained' is reserved",)),
    Case("method name that cannot be a path", _method("soft/max", {"policy": "softmax", "control": "baseline"}),
         ("methods: the name 'soft/max' is not allowed",)),
    # names that become paths stay below results/ and logs/
    Case("study name climbing out of results", _set("study", "../../x"), ("study: the name '../../x' is not allowed",)),
    Case("absolute study name", _set("study", "/tmp/study"), ("study: the name '/tmp/study' is not allowed",)),
    Case("hidden study name", _set("study", ".smoke"), ("study: the name '.smoke' is not allowed",)),
    Case("model name with a separator", _rename_model("tiny-qwen2", "tiny/qwen2"),
         ("models: the name 'tiny/qwen2' is not allowed", "use letters, digits and '_', '.', '+', '-'")),
    Case("model name '..'", _rename_model("tiny-qwen2", ".."), ("models: the name '..' is not allowed",)),
    # the prompt template, rendered once against a sample question
    Case("template with an answer placeholder", _set("prompt_template", "{question}\nAnswer: {answer}"),
         ("prompt_template: unknown placeholder {answer}: only {question} is filled",
          "use {{ and }} for a literal brace")),
    Case("template with a positional placeholder", _set("prompt_template", "{0}. {question}\nAnswer:"),
         ("prompt_template: positional placeholder {0}: the template is filled by name",)),
    Case("template with empty braces", _set("prompt_template", "{question}\nPut the answer in \\boxed{}."),
         ("prompt_template: positional placeholder {}:", "use {{ and }} for a literal brace")),
    Case("template with a stray closing brace", _set("prompt_template", "{question}\nAnswer: }"),
         ("prompt_template: '{question}\\nAnswer: }' is not a valid template (Single '}' encountered in format string)",
          "use {{ and }} for a literal brace")),
    Case("template with a lone opening brace", _set("prompt_template", "{question}\nAnswer: {"),
         ("prompt_template: '{question}\\nAnswer: {' is not a valid template (Single '{' encountered in format string)",
          )),
    Case("template with an unclosed placeholder", _set("prompt_template", "Q: {question\nAnswer:"),
         ("prompt_template: 'Q: {question\\nAnswer:' is not a valid template (unmatched '{' in format spec)",)),
    Case("template with a numeric format spec", _set("prompt_template", "{question:d}\nAnswer:"),
         ("prompt_template: '{question:d}\\nAnswer:' fails when rendered with a sample question (ValueError: Unknown "
          "format code 'd' for object of type 'str')", "without a format spec or conversion")),
    Case("template with an unknown conversion", _set("prompt_template", "{question!z}\nAnswer:"),
         ("prompt_template: '{question!z}\\nAnswer:' fails when rendered with a sample question (ValueError: Unknown "
          "conversion specifier z)",)),
    Case("template indexing the question", _set("prompt_template", "{question[0]}\nAnswer:"),
         ("prompt_template: {question[0]} reads an attribute or item of the question",)),
    Case("template reading an attribute", _set("prompt_template", "{question.title}\nAnswer:"),
         ("prompt_template: {question.title} reads an attribute or item of the question",)),
    Case("template whose question is literal text", _set("prompt_template", "{{question}}\nAnswer:"),
         ("prompt_template: '{{question}}\\nAnswer:' has no {question} placeholder",)),
    # shapes the Qwen2 model cannot run
    Case("more key-value heads than attention heads",
         _set("models.tiny-qwen2.shape", {**SMOKE["models"]["tiny-qwen2"]["shape"], "num_key_value_heads": 8}),
         ("models.tiny-qwen2.shape.num_key_value_heads 8 does not divide models.tiny-qwen2.shape.num_attention_heads 4",
          "one of [1, 2, 4]")),
    Case("key-value heads not dividing the attention heads",
         _set("models.tiny-qwen2.shape", {**SMOKE["models"]["tiny-qwen2"]["shape"], "hidden_size": 48,
                                          "num_attention_heads": 6, "num_key_value_heads": 4}),
         ("models.tiny-qwen2.shape.num_key_value_heads 4 does not divide models.tiny-qwen2.shape.num_attention_heads 6",
          "one of [1, 2, 3, 6]")),
    Case("hidden size not a multiple of the heads",
         _set("models.tiny-qwen2.shape", {**SMOKE["models"]["tiny-qwen2"]["shape"], "hidden_size": 36,
                                          "num_attention_heads": 8}),
         ("models.tiny-qwen2.shape.hidden_size 36 is not a multiple of models.tiny-qwen2.shape.num_attention_heads 8",
          "use hidden_size 32 or 48")),
    Case("odd head dimension", _set("models.tiny-qwen2.shape.hidden_size", 124),
         ("models.tiny-qwen2.shape.hidden_size 124 / models.tiny-qwen2.shape.num_attention_heads 4 = 31 dimensions per "
          "head, an odd number", "use hidden_size 120 or 128")),
    Case("default heads with an odd head dimension", _set("models.tiny-qwen2.shape", {"hidden_size": 36}),
         ("models.tiny-qwen2.shape.hidden_size 36 / models.tiny-qwen2.shape.num_attention_heads 4 (the default) = 9",)),
    # keys given twice in the config file, which YAML resolves silently
    Case("two training blocks", _unchanged, (
        "duplicate key 'training' at lines",
        f"config.yaml: duplicate key 'training' at lines {_line('training:')} and {len(SMOKE_LINES) + 1}: YAML keeps "
        f"only the last one and silently drops the first",),
         text=lambda text: text + "training: {steps: 30, prompts_per_step: 4, rollouts: 5}\n"),
    Case("a training key given twice", _unchanged, (
        "duplicate key 'training.rollouts' at lines",
        f"config.yaml: duplicate key 'training.rollouts' at lines {_line('training:') + 1} and "
        f"{_line('  rollouts:', _line('training:')) + 1}",),
         text=_insert_after(_line("training:"), "  rollouts: 8\n")),
    Case("a shape key given twice", _unchanged, (
        "duplicate key 'models.tiny-qwen2.shape.num_attention_heads' at lines",
        f"config.yaml: duplicate key 'models.tiny-qwen2.shape.num_attention_heads' at lines {_line('    shape:') + 1} "
        f"and {_line('      num_attention_heads:') + 1}",),
         text=_insert_after(_line("    shape:"), "      num_attention_heads: 4\n")),
    Case("a method defined twice", _unchanged, (
        "duplicate key 'methods.softmax' at lines",
        f"config.yaml: duplicate key 'methods.softmax' at lines {_line('methods:') + 1} and {_line('  softmax:') + 1}",
        "keep one (merge them if both are sections)"),
         text=_insert_after(_line("methods:"), "  softmax: {policy: softmax, params: {temperature: 0.5}, "
                                                "control: baseline}\n")),
    # plain values YAML 1.1 reads as another type than they look
    Case("a YAML 1.1 boolean word", _unchanged, ("benchmarks.hub_fallback at line 2: 'no' is read by YAML as a "
                                                 "boolean, false; write false if that is meant, or quote it",),
         text=_insert_after(_line("benchmarks:"), "  hub_fallback: no\n")),
    Case("octal and hex numbers", _unchanged, (
        "benchmarks.items at line", "'010' is read by YAML as a number, 8; write 8 if that is meant",
        "corpus.items_per_domain at line", "'0x3c' is read by YAML as a number, 60"),
         text=lambda text: text.replace("  items: 8\n", "  items: 010\n").replace("  items_per_domain: 60\n",
                                                                                   "  items_per_domain: 0x3c\n")),
    Case("a study name YAML reads as a boolean", _set("study", "placeholder"),
         ("study at line", "'on' is read by YAML as a boolean, true; write true if that is meant, or quote it (\"on\")"),
         text=lambda text: text.replace("study: placeholder", "study: on")),
    # campaigns and regimes (docs/regimes.md)
    Case("a regime defined twice", _unchanged, (
        "duplicate key 'regimes.noisy' at lines",
        f"config.yaml: duplicate key 'regimes.noisy' at lines {len(SMOKE_LINES) + 2} and {len(SMOKE_LINES) + 3}"),
         text=lambda text: text + "regimes:\n  noisy: {transform: label_noise, fraction: 0.2}\n"
                                  "  noisy: {transform: subset, fraction: 0.5}\n"),
    Case("a campaign defined twice", _unchanged, (
        "duplicate key 'campaigns.main' at lines",
        f"config.yaml: duplicate key 'campaigns.main' at lines {len(SMOKE_LINES) + 2} and {len(SMOKE_LINES) + 3}"),
         text=lambda text: text + "campaigns:\n  main: {methods: [baseline, softmax]}\n"
                                  "  main: {methods: [baseline, static]}\n"),
    Case("a campaign naming an unknown model", _set("campaigns", {"scale": {"models": ["tiny-qwen3"]}}),
         ("campaigns.scale.models: 'tiny-qwen3' is not a model of this study; did you mean 'tiny-qwen2'?",
          "declare it or remove it from the list")),
    Case("a campaign naming an unknown method", _set("campaigns", {"main": {"methods": ["baseline", "sofmax"]}}),
         ("campaigns.main.methods: 'sofmax' is not a method of this study; did you mean 'softmax'?",)),
    Case("a campaign naming an undeclared regime", _set("campaigns", {"noisy": {"regimes": ["noise20"]}}),
         ("campaigns.noisy.regimes: 'noise20' is not a regime of this study (known: full)",)),
    Case("a campaign without a method's control",
         _set("campaigns", {"main": {"methods": ["baseline"]}, "filters": {"methods": ["difffilter"]}}),
         ("campaigns.filters.methods: 'difffilter' is compared with its control 'baseline', which this campaign does "
          "not train", "add 'baseline' to the list")),
    Case("a regime named like the full data", _set("regimes", {"full": {"transform": "subset", "fraction": 0.5}}),
         ("regimes.full: the name 'full' is reserved", "rename the regime")),
    Case("an unknown regime transform",
         _set("regimes", {"noisy": {"transform": "label_nosie", "fraction": 0.2}}),
         ("regimes.noisy: unknown transform 'label_nosie'; did you mean 'label_noise'?",)),
    Case("a regime fraction above 1", _set("regimes", {"noisy": {"transform": "subset", "fraction": 1.5}}),
         ("regimes.noisy: parameter 'fraction' of transform 'subset': 1.5 is outside (0, 1]",)),
    Case("a negative noise fraction", _set("regimes", {"noisy": {"transform": "noisy_rewards", "fraction": -0.1,
                                                                 "p": 0.5}}),
         ("is outside [0, 1]; use a number in [0, 1]",
          "regimes.noisy: parameter 'fraction' of transform 'noisy_rewards': -0.1 is outside [0, 1]")),
    Case("an unbalanced pool of a domain the corpus lacks",
         _all(_set("corpus.sources", ["basic_arithmetic", "syllogism"]),
              _set("regimes", {"skewed": {"transform": "unbalanced", "target_domain": "science", "share": 0.5}})),
         ("parameter 'target_domain' of transform 'unbalanced':",
          "regimes.skewed: parameter 'target_domain' of transform 'unbalanced': 'science' is not a domain of the "
          "corpus, whose domains are ['logic', 'math']; use one of them or add a source of that domain")),
    Case("an unbalanced pool without the target domain for a prompt selection", _unbalanced_selection(0.0),
         ("regimes.no_science.share: 0.0 keeps at most 0 science row(s) in the pool, fewer than the 32 validation "
          "prompts (validation_size) of methods.gradalign, which campaigns.unbalanced_pool trains on it",
          "raise regimes.no_science.share to at least 0.211 (with the other domains' 120 rows at most")),
    Case("an unbalanced pool with too few target rows for a prompt selection", _unbalanced_selection(0.1),
         ("regimes.no_science.share: 0.1 keeps at most 13 science row(s) in the pool",
          "or lower methods.gradalign.params.validation_size to at most 13")),
    Case("a campaign step budget of 0", _set("campaigns", {"long": {"steps": [3, 0]}}),
         ("campaigns.long.steps.1: 0 is less than the minimum of 1",)),
    Case("a truncated records_file", _truncated_records_file,
         ("nothing in this workflow builds it: restore the file, or point records_file at an intact copy",
          "records_file: ", "data/records.parquet: unreadable parquet (Parquet magic bytes not found in footer")),
]


def _dry_run(case: Case, root: Path) -> subprocess.CompletedProcess:
    workdir = root / case.id.replace(" ", "_")
    workdir.mkdir()
    config = copy.deepcopy(SMOKE)
    case.change(config, workdir)
    text = yaml.safe_dump(config)
    (workdir / "config.yaml").write_text(case.text(text) if case.text else text)
    return forked_snakemake.run(["-n", "--cores", "1", "--snakefile", str(REPO / "Snakefile"), "--directory",
                                 str(workdir), "--configfile", str(workdir / "config.yaml"), *case.args])


@pytest.fixture(scope="module")
def dry_runs(tmp_path_factory):
    root = tmp_path_factory.mktemp("bad_configs")
    with ThreadPoolExecutor(max_workers=2) as pool:
        results = list(pool.map(lambda case: _dry_run(case, root), CASES))
    return {case.id: result for case, result in zip(CASES, results)}


def _comparable(output: str) -> list[str]:
    """Snakemake's output as a sorted list of lines, without what differs between any two runs of one dry run: the
    clock and run id, and the order of jobs and of the words in a line (set order follows each process's hash seed)."""
    masked = re.sub(r"^(  Date: |  Workflow ID: ).*$", r"\1…", output, flags=re.MULTILINE)
    masked = re.sub(r"^\[\w{3} \w{3} [ \d]\d \d\d:\d\d:\d\d \d{4}\]$", "[…]", masked, flags=re.MULTILINE)
    return sorted(" ".join(sorted(re.split(r"[\s,;]+", line))) for line in masked.splitlines())


def test_a_forked_dry_run_prints_and_exits_as_a_fresh_snakemake_process_does(tmp_path):
    """The cases' fork of Snakemake's CLI is no shortcut: on an accepted and a refused config it exits with the status
    and prints the lines of `python -m snakemake` started afresh (Snakemake's own `Building DAG` and job table
    included), and the refused one stops before any job is planned."""
    runs = {}
    for name, change in [("accepted", _unchanged), ("refused", _set("seeds", []))]:
        workdir = tmp_path / name
        workdir.mkdir()
        config = copy.deepcopy(SMOKE)
        change(config, workdir)
        (workdir / "config.yaml").write_text(yaml.safe_dump(config))
        args = ["-n", "--cores", "1", "--snakefile", str(REPO / "Snakefile"), "--directory", str(workdir),
                "--configfile", str(workdir / "config.yaml")]
        fresh = subprocess.run([sys.executable, "-m", "snakemake", *args], capture_output=True, text=True, timeout=300)
        forked = forked_snakemake.run(args)
        runs[name] = forked
        assert ((forked.returncode, _comparable(forked.stdout), _comparable(forked.stderr))
                == (fresh.returncode, _comparable(fresh.stdout), _comparable(fresh.stderr)))
    accepted, refused = (runs[name].stdout + runs[name].stderr for name in ("accepted", "refused"))
    assert runs["accepted"].returncode == 0 and "Job stats:" in accepted
    assert runs["refused"].returncode == 1 and "seeds" in refused and "Building DAG of jobs" not in refused


def test_there_are_at_least_twenty_distinct_bad_configs():
    assert len({case.id for case in CASES}) == len(CASES) >= 20


def test_every_refusal_is_documented():
    documented = (REPO / "docs/refusals.md").read_text()
    assert [case.id for case in CASES if case.expected[0] not in documented] == []


@pytest.mark.parametrize("case", CASES, ids=[case.id for case in CASES])
def test_bad_config_is_refused_at_dry_run_naming_the_key(dry_runs, case):
    result = dry_runs[case.id]
    output = result.stdout + result.stderr
    assert result.returncode != 0, output[-3000:]
    for text in case.expected:
        assert text in output, f"{text!r} not in:\n{output[-3000:]}"
    assert "Building DAG of jobs" not in output  # refused while parsing, before any job is planned


@pytest.mark.parametrize("change, train_mb", [
    (_set("training.prompts_per_step", 180), 25614),
    (_all(_set("training.prompts_per_step", 40), _set("data_validation", {"corpus": {"max_prompt_tokens": 100}})),
     1555),
], ids=["whole corpus bound", "configured prompt-token cap"])
def test_resources_that_just_fit_pass(tmp_path, change, train_mb):
    """A batch of the corpus's whole bound (180 prompts) and mem_mb at the estimates themselves (train 25614 MB at 180
    prompts of up to 504 tokens, or 1555 MB at 40 prompts of up to 100; score 1491 MB) are not refused."""
    result = _dry_run(Case("fits", change, (),
                           args=("--set-resources", f"train:mem_mb={train_mb}", "score:mem_mb=1491")), tmp_path)
    assert result.returncode == 0, result.stderr[-3000:]
    assert "invalid resources" not in result.stderr


def _configfile_last_lines(workdir: Path, configfile: str) -> set[str]:
    """The last line of stdout and of stderr of a dry run of `configfile` (a path relative to `workdir`)."""
    result = subprocess.run([sys.executable, "-m", "snakemake", "-n", "--cores", "1", "--snakefile",
                             str(REPO / "Snakefile"), "--configfile", configfile], cwd=workdir, capture_output=True,
                            text=True, timeout=300)
    assert result.returncode != 0
    return {stream.strip().splitlines()[-1] for stream in (result.stdout, result.stderr) if stream.strip()}


@pytest.mark.parametrize("configfile, found", [
    ("nope.yaml", "FileNotFoundError: [Errno 2] No such file or directory: 'nope.yaml'"),
    ("a_directory", "IsADirectoryError: [Errno 21] Is a directory: 'a_directory'"),
])
def test_a_configfile_snakemake_cannot_open_is_named_on_its_last_line(tmp_path, configfile, found):
    """Snakemake's own CLI opens `--configfile` before the workflow runs, so the Snakefile cannot check it; its last
    line names the path and what was found (docs/refusals.md)."""
    (tmp_path / "a_directory").mkdir()
    assert found in _configfile_last_lines(tmp_path, configfile)


@pytest.mark.parametrize("content, found", [
    (b"", "Config file must be given as JSON or YAML with keys at top level."),
    (b"- study: x\n- seeds: [1]\n", "Config file must be given as JSON or YAML with keys at top level."),
    ("study: x\n".encode("utf-16"),
     "UnicodeDecodeError: 'utf-8' codec can't decode byte 0xff in position 0: invalid start byte"),
    (b"study: caf\xe9\n",
     "UnicodeDecodeError: 'utf-8' codec can't decode byte 0xe9 in position 10: invalid continuation byte"),
], ids=["empty", "a list at the top level", "UTF-16", "invalid UTF-8"])
def test_a_configfile_snakemake_cannot_load_fails_in_its_loader_before_the_workflow(tmp_path, content, found):
    """Snakemake's CLI loads `--configfile` (ConfigSettings, snakemake/settings/types.py) before it creates the
    workflow, so no code of ours can check the file first: the user gets the loader's last line, which does not name
    the path (docs/refusals.md says so; Snakemake is not patched)."""
    (tmp_path / "study.yaml").write_bytes(content)
    assert found in _configfile_last_lines(tmp_path, "study.yaml")


def test_the_smoke_config_itself_passes_and_its_summary_counts_the_planned_jobs(tmp_path):
    """The cases' common base is valid (each refusal above is caused by its own change), and the dry-run summary's
    jobs per rule are the ones Snakemake then plans."""
    result = _dry_run(Case("smoke", lambda config, workdir: None, ()), tmp_path)
    assert result.returncode == 0, result.stderr[-3000:]
    output = result.stdout + result.stderr
    assert ("1 model(s) × 1 regime(s) × 1 step budget(s) × 4 method(s) × 2 seed(s) = 8 training runs\n"
            "    models tiny-qwen2; regimes full; steps 3; seeds 1, 2") in output
    assert "    difffilter     difffilter  selection    vs baseline      high=0.9, low=0.1" in output  # keys sorted
    summary = output.split("jobs from scratch and resources per job:", 1)[1].split("Job stats:", 1)[0]
    summarised = {m[1]: int(m[2]) for m in re.finditer(r"^    (\w+)\s+(\d+)\s+1\s", summary, re.MULTILINE)}
    stats = output.split("Job stats:", 1)[1]
    planned = {m[1]: int(m[2]) for m in re.finditer(r"^(\w+)\s+(\d+)\s*$", stats, re.MULTILINE)}
    assert summarised == {rule: n for rule, n in planned.items() if rule not in ("all", "total")}
    assert summarised["train"] == 8 and summarised["score"] == 9


def test_templates_that_render_are_accepted_and_literal_braces_stay_literal():
    """Doubled braces are literal braces, and a format spec or conversion that renders is the author's choice."""
    from dataflex_rl.study.config_checks import template_errors
    from dataflex_rl.corpus.prompting import render_prompt

    for template in ("{question}\nAnswer:", "Q: {question}\nPut it in \\boxed{{}}.\nA:", "{{{question}}}",
                     "{question!r}", "{question:>3}", "{question} or {question}"):
        assert template_errors(template) == [], template
    assert render_prompt("2+2?", "Q: {question}\nPut it in \\boxed{{}}.") == "Q: 2+2?\nPut it in \\boxed{}."
    assert render_prompt("x", "{{{question}}}") == "{x}"


def _written_paths(output: str) -> list[str]:
    """Every output, log and timing file of the jobs a `snakemake -n` lists."""
    return [path for match in re.finditer(r"^    (?:output|log|benchmark): (.+)$", output, re.MULTILINE)
            for path in match[1].split(", ")]


@pytest.mark.parametrize("args", [("--configfile", "config/smoke.yaml"),
                                  ("--configfile", "config/paper.yaml", *SLURM)], ids=["smoke", "paper"])
def test_every_path_a_study_writes_stays_under_results_or_logs(args):
    result = subprocess.run([sys.executable, "-m", "snakemake", "-n", "--cores", "1", "--snakefile",
                             str(REPO / "Snakefile"), *args], cwd=REPO, capture_output=True, text=True, timeout=300)
    assert result.returncode == 0, result.stderr[-3000:]
    paths = _written_paths(result.stdout + result.stderr)
    assert len(paths) > 100  # every job's outputs and logs were read
    outside = [path for path in paths if Path(path).is_absolute() or ".." in Path(path).parts
               or Path(path).parts[0] not in ("results", "logs")]
    assert outside == []


def test_a_dry_run_without_verl_says_in_one_line_that_verls_config_was_not_checked(tmp_path):
    """A login node with only Snakemake: a `verl` that cannot be imported (here a package that refuses to import,
    first on the path) does not fail the dry run; one stderr line says what was not checked and why."""
    shadow = tmp_path / "no_verl" / "verl"
    shadow.mkdir(parents=True)
    (shadow / "__init__.py").write_text("raise ImportError('verl is not installed on this node')\n")
    workdir = tmp_path / "study"
    workdir.mkdir()
    config = copy.deepcopy(SMOKE)
    _verl(prompts_per_step=8)(config, workdir)  # 48 responses over the train job's default 8 GPUs
    (workdir / "config.yaml").write_text(yaml.safe_dump(config))
    result = subprocess.run(
        [sys.executable, "-m", "snakemake", "-n", "--cores", "1", "--snakefile", str(REPO / "Snakefile"),
         "--directory", str(workdir), "--configfile", str(workdir / "config.yaml")],
        capture_output=True, text=True, timeout=300,
        env={**os.environ, "PYTHONPATH": os.pathsep.join([str(shadow.parent), str(REPO)])})
    assert result.returncode == 0, (result.stdout + result.stderr)[-3000:]
    lines = [line for line in result.stderr.splitlines() if "verl's own config check" in line]
    assert lines == ["models.qwen: verl's own config check of the train command was skipped: verl is not importable "
                     "here (ImportError: verl is not installed on this node); the train jobs' environment "
                     "(envs/gpu.yaml) checks it at their start"]
