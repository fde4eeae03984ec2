"""The merge job of a verl run: its final FSDP checkpoint (the train job's model output) into a Hugging Face model
directory that vLLM scores, through verl's own merger (`python -m verl.model_merger merge --backend fsdp`).

A job of its own (rule merge): it needs CPU memory for the gathered weights and no GPU, and a failed merge reruns
without retraining. The directory is written atomically with its provenance record inside, as a base model's is,
and the run's model output is verified against the train job's record before it is read.
"""
from __future__ import annotations

import subprocess
import sys
from pathlib import Path
from typing import Any, Mapping

from dataflex_rl.atomic import atomic_directory
from dataflex_rl.layout import PROVENANCE
from dataflex_rl.provenance import verified_input, write_provenance

FSDP_CONFIG = "fsdp_config.json"  # verl writes it beside the shards; the merger reads the world size from it


def actor_checkpoint(model_dir: str | Path) -> Path:
    """The folder holding the FSDP shards and `huggingface/` (config, tokenizer): the run's model directory itself,
    or its `actor/` (verl's `global_step_N/` layout)."""
    for folder in (Path(model_dir), Path(model_dir) / "actor"):
        if (folder / FSDP_CONFIG).is_file():
            return folder
    raise FileNotFoundError(f"{model_dir}: no {FSDP_CONFIG} in it or in its actor/ folder, so it is not a verl FSDP "
                            f"checkpoint; rerun the run's train job (snakemake -f {model_dir})")


def merge_command(checkpoint: str | Path, target_dir: str | Path) -> list[str]:
    return [sys.executable, "-m", "verl.model_merger", "merge", "--backend", "fsdp", "--local_dir", str(checkpoint),
            "--target_dir", str(target_dir)]


def merge_run(settings: Mapping[str, Any], *, model_dir, model_provenance, out_dir) -> None:
    """Merge the run's checkpoint into `out_dir`; its provenance carries the run's settings slice (what the weights
    depend on) and the verified checkpoint as input. The merger's output goes to this job's stderr (its log)."""
    inputs = {"model": verified_input(model_dir, model_provenance)}
    with atomic_directory(out_dir) as tmp:
        subprocess.run(merge_command(actor_checkpoint(model_dir), tmp), check=True, stdout=sys.stderr,
                       stderr=subprocess.STDOUT)
        write_provenance(tmp / PROVENANCE, settings, [tmp], inputs)
