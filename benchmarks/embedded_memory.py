"""Peak resident memory of embedded train and score jobs, measured, beside the dry run's estimate of it.

    python benchmarks/embedded_memory.py                          # measured beside estimated, every CALIBRATION job
    python benchmarks/embedded_memory.py train '{"shape": {...}, "prompts_per_step": 4, ...}'   # one measurement

One measurement runs in a fresh process and prints a JSON line: its peak resident set (VmHWM of /proc/self/status)
after the work, in MB (`baseline`: a process that has imported the job's modules and done nothing). `train`
builds a model of `shape` and runs two real GRPO steps of the embedded trainer (`EmbeddedGRPOTrainer.train_step`:
rollouts, the policy and reference passes, backward, AdamW); `score` loads the saved model with the scorer
(`EmbeddedGenerator`) and answers one batch of `batch_size` prompts. Every prompt is digits, one token each, as long as
the job accepts: at the default prompt-token cap (max_position_embeddings − max_new_tokens) of a train job's corpus
and of a score job's benchmarks: the worst case the estimate bounds. The calibration (measured beside estimated)
is tabled in docs/refusals.md. dataflex_rl/backends/embedded/memory.py holds the estimate;
tests/test_resource_fit.py asserts measured ≤ estimate ≤ 2 × measured on the shapes there.
"""
from __future__ import annotations

import json
import subprocess
import sys
import tempfile
from pathlib import Path


def peak_mb() -> float:
    """This process's peak resident set so far (VmHWM), in MB."""
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1]) / 1024
    raise RuntimeError("no VmHWM in /proc/self/status")


def _prompt_tokens(spec: dict) -> int:
    """The longest prompt a job accepts by default (its prompt-token cap): the positions less a response's."""
    return spec["shape"]["max_position_embeddings"] - spec["max_new_tokens"]


def _build(root: Path, shape: dict) -> Path:
    from dataflex_rl.backends.embedded.model import build_model, save_model, train_tokenizer
    from dataflex_rl.backends.embedded.settings import ModelShape

    texts = [f"{i} plus {i + 1} is {2 * i + 1}. Answer: the value" for i in range(2000)]
    tokenizer = train_tokenizer(texts, shape["vocab_size"])
    save_model(build_model(ModelShape(**shape), tokenizer, seed=0), tokenizer, root / "model")
    return root / "model"


def _train(model_dir: Path, spec: dict) -> None:
    import pandas as pd

    from dataflex_rl.backends.embedded.trainer import EmbeddedGRPOTrainer
    from dataflex_rl.backends.registry import get_backend
    from dataflex_rl.policies.methods import MethodSpec
    from dataflex_rl.policies.catalogue import Family
    from dataflex_rl.training.recipe import GRPOSettings

    groups = spec["prompts_per_step"]
    selection = spec.get("selection")  # a gradalign round's options: the first step runs the round
    rows = groups if selection is None else selection["candidates_per_round"] + selection["validation_size"]
    prompt = "7" * _prompt_tokens(spec)
    corpus = pd.DataFrame([{"id": str(i), "domain": "math", "source": "digits", "prompt": prompt, "answer": "1",
                            "answer_format": "exact", "metadata": "{}"} for i in range(rows)])
    settings = GRPOSettings(steps=2, prompts_per_step=groups, rollouts=spec["rollouts"],
                            max_new_tokens=spec["max_new_tokens"], checkpoint_every=2)
    method = (MethodSpec("baseline", "baseline", {}, Family.none) if selection is None
              else MethodSpec("gradalign", "gradalign", selection, Family.prompt_selection))
    trainer = EmbeddedGRPOTrainer(model_dir, corpus, method, 0, settings, "{question}",
                                  open_probe=get_backend("embedded").open_probe)
    assert {len(t) for t in trainer.prompt_tokens} == {_prompt_tokens(spec)}, "a digit is not one token"
    for _ in range(settings.steps):
        trainer.train_step()


def _score(model_dir: Path, spec: dict) -> None:
    from dataflex_rl.backends.embedded.generation import EmbeddedGenerator

    generator = EmbeddedGenerator.load(model_dir)
    prompts = ["7" * _prompt_tokens(spec)] * spec["batch_size"]
    generator.generate(prompts, max_new_tokens=spec["max_new_tokens"], batch_size=spec["batch_size"],
                       temperature=0.0, seed=0)


def measure(job: str, spec: dict) -> dict:
    """Run one measurement in a fresh process (this script) and return its JSON result."""
    result = subprocess.run([sys.executable, __file__, job, json.dumps(spec)], capture_output=True, text=True,
                            check=True)
    return json.loads(result.stdout.splitlines()[-1])


def _child(job: str, spec: dict) -> dict:
    import snakemake.script  # noqa: F401  (what every job script imports, beside its backend's modules)
    import torch

    import dataflex_rl.backends.embedded.generation  # noqa: F401
    import dataflex_rl.backends.embedded.trainer  # noqa: F401
    import dataflex_rl.study.jobs  # noqa: F401

    torch.set_num_threads(1)
    if job == "baseline":
        return {"peak_mb": peak_mb()}
    with tempfile.TemporaryDirectory() as tmp:
        model_dir = _build(Path(tmp), spec["shape"])
        (_train if job == "train" else _score)(model_dir, spec)
        return {"peak_mb": peak_mb()}


# The shapes and batches of the calibration (and of tests/test_resource_fit.py): small enough to run in seconds.
SMALL = {"hidden_size": 32, "intermediate_size": 64, "num_hidden_layers": 1, "num_attention_heads": 2,
         "num_key_value_heads": 1, "max_position_embeddings": 64, "vocab_size": 384}
DEFAULT = {"hidden_size": 128, "intermediate_size": 512, "num_hidden_layers": 4, "num_attention_heads": 4,
           "num_key_value_heads": 2, "max_position_embeddings": 256, "vocab_size": 1024}
WIDE = {"hidden_size": 256, "intermediate_size": 1024, "num_hidden_layers": 2, "num_attention_heads": 8,
        "num_key_value_heads": 2, "max_position_embeddings": 128, "vocab_size": 4096}
CALIBRATION = [
    ("train", {"shape": SMALL, "prompts_per_step": 4, "rollouts": 5, "max_new_tokens": 4}),
    ("train", {"shape": DEFAULT, "prompts_per_step": 12, "rollouts": 5, "max_new_tokens": 8}),
    ("train", {"shape": WIDE, "prompts_per_step": 8, "rollouts": 4, "max_new_tokens": 16}),
    ("train", {"shape": SMALL, "prompts_per_step": 4, "rollouts": 5, "max_new_tokens": 4,
               "selection": {"candidates_per_round": 96, "selection_ratio": 24, "rollouts_candidate": 8,
                             "rollouts_validation": 16, "validation_size": 8}}),
    ("train", {"shape": DEFAULT, "prompts_per_step": 12, "rollouts": 5, "max_new_tokens": 8,
               "selection": {"candidates_per_round": 72, "selection_ratio": 6, "rollouts_candidate": 8,
                             "rollouts_validation": 16, "validation_size": 8}}),
    ("score", {"shape": SMALL, "batch_size": 64, "max_new_tokens": 4}),
    ("score", {"shape": DEFAULT, "batch_size": 128, "max_new_tokens": 8}),
    ("score", {"shape": WIDE, "batch_size": 64, "max_new_tokens": 16}),
]


def estimate_mb(job: str, spec: dict) -> float:
    from dataflex_rl.backends.embedded.memory import score_peak_mb, train_peak_mb
    from dataflex_rl.backends.embedded.settings import ModelShape
    from dataflex_rl.prompt_selection.candidates import SelectionSize

    shape = ModelShape(**spec["shape"])
    if job == "train":
        selection = spec.get("selection")
        size = selection and SelectionSize(selection["candidates_per_round"],
                                           max(selection["rollouts_candidate"], selection["rollouts_validation"]))
        return train_peak_mb(shape, spec["prompts_per_step"], spec["rollouts"], spec["max_new_tokens"],
                             _prompt_tokens(spec), size)
    return score_peak_mb(shape, spec["batch_size"], spec["max_new_tokens"], _prompt_tokens(spec))


def main() -> None:
    print(f"process baseline: {measure('baseline', {})['peak_mb']:.0f} MB")
    for job, spec in CALIBRATION:
        batch = {k: v for k, v in spec.items() if k != "shape"}
        measured, estimate = measure(job, spec)["peak_mb"], estimate_mb(job, spec)
        print(f"{job} h={spec['shape']['hidden_size']} P={_prompt_tokens(spec)} {batch}: measured {measured:.0f} "
              f"MB, estimate {estimate:.0f} MB ({estimate / measured:.2f}x)")


if __name__ == "__main__":
    if len(sys.argv) == 3:
        print(json.dumps(_child(sys.argv[1], json.loads(sys.argv[2]))))
    else:
        main()
