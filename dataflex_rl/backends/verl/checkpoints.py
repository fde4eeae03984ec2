"""Keep one verl checkpoint per run, across requeues.

verl 0.9.1's `trainer.max_actor_ckpt_to_keep=1` deletes only the checkpoints that the current process saved (the
actor's checkpoint manager remembers them in memory: verl utils/checkpoint/checkpoint_manager.py:156-178), and only
their `actor/` folder. After a requeue, the `global_step_N` the run resumed from is never removed: about 100 GB of 7B
actor and optimiser state per requeue. Here every `global_step_K` older than the checkpoint verl's tracker file names
is removed, whole.

A checkpoint is complete once the tracker names it: verl writes `latest_checkpointed_iteration.txt` (the step number as
text) after the actor shards and `data.pt` are saved (verl trainer/ppo/v1/trainer_base.py:1021-1025), and resumes from
the folder it names (utils/checkpoint/checkpoint_manager.py:222-252). A folder newer than the tracker is a save that
did not finish; the resumed run writes that step again, so it is left alone.
"""
from __future__ import annotations

import re
import shutil
from pathlib import Path

TRACKER_FILE = "latest_checkpointed_iteration.txt"  # verl: get_checkpoint_tracker_filename
STEP_FOLDER = re.compile(r"global_step_(\d+)")  # verl's directory_format "global_step_{}"


def tracked_step(checkpoint_dir: Path) -> int | None:
    """The step of the newest complete checkpoint (the tracker's, when its folder exists), else None."""
    tracker = Path(checkpoint_dir) / TRACKER_FILE
    if not tracker.is_file():
        return None
    step = int(tracker.read_text().strip())  # verl reads it as int(f.read().decode())
    return step if (Path(checkpoint_dir) / f"global_step_{step}").is_dir() else None


def remove_superseded_checkpoints(checkpoint_dir: Path) -> list[Path]:
    """Remove every `global_step_K` folder with K below the tracked step; returns the folders removed (none while no
    checkpoint is complete)."""
    step = tracked_step(checkpoint_dir)
    if step is None:
        return []
    superseded = sorted((folder for folder in Path(checkpoint_dir).iterdir()
                         if folder.is_dir() and (match := STEP_FOLDER.fullmatch(folder.name))
                         and int(match.group(1)) < step), key=lambda folder: int(folder.name.split("_")[-1]))
    for folder in superseded:
        shutil.rmtree(folder)
    return superseded
