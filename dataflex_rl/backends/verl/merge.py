"""The verl backend's merge (Backend.merge): a run's final FSDP checkpoint (the train job's model output) into a
Hugging Face model directory that vLLM scores, through verl's own merger (`python -m verl.model_merger merge --backend
fsdp`). The merge job around it (dataflex_rl.study.jobs.merge_run) verifies the checkpoint and writes the directory
atomically with its provenance record.
"""
from __future__ import annotations

import subprocess
import sys
from pathlib import Path

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


def merge_checkpoint(model_dir, out_dir) -> None:
    """Merge the run's checkpoint into `out_dir`; the merger's output goes to this job's stderr (its log)."""
    subprocess.run(merge_command(actor_checkpoint(model_dir), out_dir), check=True, stdout=sys.stderr,
                   stderr=subprocess.STDOUT)
