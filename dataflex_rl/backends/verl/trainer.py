"""The data policies inside verl 0.9.1's synchronous PPO loop: one `PPOTrainerSync` subclass, registered by the
plugin module under `trainer.v1.trainer_mode=dataflex_rl`, that calls the same policy driver as the embedded trainer.

Per step (verl's `PPOTrainer.step`):
- `_next_train_batch`: the step's prompts are the driver's draw (the prompt stream, steered by a mixture's p(d); a
  prompt selection's kept rows, its round read from the file the train job wrote before the segment:
  selection_rounds.py), taken from verl's train dataset at those corpus rows. A mixture acts here, before generation: in
  sync mode verl's replay buffer trains on every prompt it generated, so a choice among generated prompts could not
  change what is trained.
- `_compute_advantage`: verl's GRPO advantages, then the driver weighs the step's [G, K, L] batch and the result goes
  back into the transfer queue as verl's loss fields (writeback.py).
- `_update_actor`: after the update, the driver observes the step (a mixture's feedback), as the embedded trainer does
  after its optimiser step; so a checkpoint written after the step holds the observed state and nothing is pending.
- `_save_checkpoint` / `_load_checkpoint`: the driver's state (prompt stream, mixture) lives in each `global_step_N`
  folder, written before verl's tracker file names the folder, so a resumed run always finds it. Once verl's tracker
  names the new folder, the older ones go (checkpoints.py), including the one a requeued run resumed from.

With DEBUG_DUMP_VARIABLE set to a folder, `_update_actor` first saves what the actor update will fetch of the policy's
loss fields (tests/gpu/gpu_smoke.py reads it); off by default.
"""
from __future__ import annotations

import logging
import os
import uuid
from pathlib import Path

import numpy as np
import pandas as pd
import torch
import transfer_queue as tq
from omegaconf import DictConfig, open_dict
from tensordict import TensorDict
from transfer_queue import KVBatchMeta
from verl.trainer.ppo.v1.trainer_sync import PPOTrainerSync
from verl.utils import tensordict_utils as tu
from verl.utils.dataset.rl_dataset import collate_fn
from verl.workers.utils.padding import response_to_nested

from dataflex_rl.artefacts.atomic import atomic_path
from dataflex_rl.artefacts.train_state import load_train_state
from dataflex_rl.backends.verl.checkpoints import remove_superseded_checkpoints
from dataflex_rl.backends.verl.job import CONFIG_BLOCK, VerlRunJob
from dataflex_rl.backends.verl.registration import check_registered
from dataflex_rl.backends.verl.selection_rounds import policy_driver, read_round, round_file
from dataflex_rl.backends.verl.writeback import verl_loss_fields
from dataflex_rl.policies import GroupBatch

DRIVER_STATE_FILE = "dataflex_rl_driver.pt"  # in verl's global_step_N checkpoint folder
METRICS_PREFIX = "dataflex/"
_STEP_FIELDS = ["uid", "rm_scores", "response_mask", "old_log_probs", "advantages"]
DEBUG_DUMP_VARIABLE = "DATAFLEX_RL_DEBUG_DUMP"
DUMPED_FIELDS = ["response_mask", "rollout_is_weights"]  # the policy's loss fields (writeback.py)

logger = logging.getLogger(__name__)
logger.setLevel(logging.INFO)  # verl configures the root logger at WARNING


class DataflexTrainer(PPOTrainerSync):
    def __init__(self, config: DictConfig):
        check_registered(DataflexTrainer)
        correction = config.algorithm.get("rollout_correction") or {}
        for key in ("rollout_is", "rollout_rs"):
            if correction.get(key) is not None:
                raise ValueError(f"algorithm.rollout_correction.{key}: {correction[key]!r}, but the data policy writes "
                                 f"rollout_is_weights and response_mask itself and would overwrite verl's rollout "
                                 f"correction; leave algorithm.rollout_correction.{key} null")
        with open_dict(config):
            # verl tests the literal "sync" (replay buffer, generation batch, checkpoint contents): another name
            # would silently run the async buffer with a generation batch of 1
            config.trainer.v1.trainer_mode = "sync"
        super().__init__(config)
        self.job = VerlRunJob.read(config[CONFIG_BLOCK].job_file)
        if self.job.method.family.needs_probe and self.job.rounds_dir is None:
            raise ValueError(f"{config[CONFIG_BLOCK].job_file}: method {self.job.method.name!r} is a prompt "
                             f"selection, and the job names no rounds_dir: its rounds are scored by the train job "
                             f"between verl segments (dataflex_rl/backends/verl/selection_rounds.py) — start it "
                             f"through the train job")
        self.rollouts = int(config.actor_rollout_ref.rollout.n)
        if self.job.rollouts != self.rollouts:
            raise ValueError(f"{config[CONFIG_BLOCK].job_file}: rollouts {self.job.rollouts}, but verl's "
                             f"actor_rollout_ref.rollout.n is {self.rollouts}; the train job must pass its rollouts "
                             f"as rollout.n")
        corpus = pd.read_parquet(self.job.train_file, columns=["domain", "extra_info"])
        self.row_domains = list(corpus["domain"])
        self.row_ids = [info["id"] for info in corpus["extra_info"]]
        self.driver = policy_driver(self.job)
        self._drawn: dict[str, int] = {}  # uid → corpus row, from the draw until the step's advantages
        self._weighed: GroupBatch | None = None  # the step's batch, until its update is applied

    # --- prompts ---------------------------------------------------------------------------------------------------
    def _next_train_batch(self, num_prompts: int | None = None) -> TensorDict:
        """The driver's next rows from verl's train dataset, collated as verl's dataloader collates them."""
        count = self.config.data.train_batch_size if num_prompts is None else num_prompts
        step = self.global_steps - 1  # verl counts global steps from 1
        if self.driver.selector:
            self._enter_round(step)
        rows = self.driver.draw(count, step)
        items = [self._dataset_row(row) for row in rows]
        uids = [str(uuid.uuid4()) for _ in rows]
        self._drawn.update(zip(uids, rows))
        batch = collate_fn(items)
        batch["uid"] = np.array(uids, dtype=object)
        batch = tu.get_tensordict(batch)
        tu.assign_non_tensor_data(batch, "global_steps", self.global_steps)
        return batch

    def _enter_round(self, step: int) -> None:
        """The selection round of `step`, from the round file the train job wrote before this segment."""
        selector = self.driver.selector
        index = step // selector.steps_per_round
        current = selector.state_dict()["round"]
        if current is not None and current["index"] == index:
            return
        path = round_file(self.job.rounds_dir, index)
        if not path.exists():
            raise RuntimeError(f"{path}: missing, so step {step} has no selection round to draw from; the train job "
                               f"scores round {index} before verl trains its steps — rerun the train job")
        selector.load_state_dict(read_round(path)["selection"])

    def _dataset_row(self, row: int) -> dict:
        """Row `row` of verl's train dataset, which must be the row of that index (the driver's rows index the corpus
        parquet, then the job's validation rows: overrides.train_files; verl drops rows when it filters overlong
        prompts)."""
        item = self.train_dataset[row] if row < len(self.train_dataset) else None
        if item is None or item["extra_info"]["row"] != row:
            raise RuntimeError(f"{self.job.train_file}: corpus row {row} is not row {row} of verl's train dataset "
                               f"({len(self.train_dataset)} rows, corpus {len(self.row_domains)}): verl must read "
                               f"the job's train file whole and in order, then its validation file where it has one; "
                               f"set data.filter_overlong_prompts=False and data.train_files to those files")
        return item

    # --- the data policy's weights ---------------------------------------------------------------------------------
    def _compute_advantage(self, batch: KVBatchMeta, metrics: dict) -> KVBatchMeta:
        """verl's advantages, then the policy's loss fields for every response of the step. The returned batch lists
        the fields the actor update will fetch, so it must come from the put that adds `rollout_is_weights`; verl's
        padding samples (tagged `is_padding`) keep their fields and get weights of 0."""
        real = [i for i, tag in enumerate(batch.tags) if not tag.get("is_padding", False)]
        batch = super()._compute_advantage(batch, metrics)
        data = tq.kv_batch_get(keys=batch.keys, partition_id=batch.partition_id, select_fields=_STEP_FIELDS)
        nested_mask = data["response_mask"]
        padded = data.to_padded_tensor()
        uids = list(padded["uid"])
        index, rows = self._groups([uids[i] for i in real], [batch.keys[i] for i in real])
        index = torch.tensor(real)[index]  # positions in the whole batch, [G, K]
        token_mask = padded["response_mask"].to(torch.float32)[index]
        loss = self.driver.weigh(padded["rm_scores"].sum(dim=-1)[index], token_mask, padded["advantages"][index],
                                 padded["old_log_probs"][index], [self.row_domains[r] for r in rows],
                                 [self.row_ids[r] for r in rows])
        written = verl_loss_fields(loss)
        fields = {"response_mask": (padded["response_mask"], written.response_mask),
                  "rollout_is_weights": (torch.zeros_like(padded["rm_scores"]), written.rollout_is_weights)}
        if written.advantages is not None:
            fields["advantages"] = (padded["advantages"], written.advantages)
        output = {}
        for name, (whole, grouped) in fields.items():
            whole = whole.clone()
            whole[index.reshape(-1)] = grouped.reshape(index.numel(), -1).to(whole.dtype)
            output[name] = response_to_nested(whole, nested_mask)
        self._weighed = loss.batch
        for name, value in self.driver.metrics(loss).items():
            # verl's step aggregator drops booleans
            metrics[METRICS_PREFIX + name] = float(value) if isinstance(value, bool) else value
        return tq.kv_batch_put(keys=batch.keys, partition_id=batch.partition_id,
                               fields=TensorDict(output, batch_size=len(batch.keys)))

    def _groups(self, uids: list[str], keys: list[str]) -> tuple[torch.Tensor, list[int]]:
        """The step's responses grouped by prompt, groups in draw order and responses in rollout order (verl's keys
        are `{uid}_{session}_{index}`, the session being the rollout), whatever order verl's batch balancing left:
        positions [G, K] and each group's corpus row."""
        positions: dict[str, list[int]] = {}
        for position, uid in enumerate(uids):
            if uid not in self._drawn:
                raise RuntimeError(f"a response of prompt uid {uid!r}, which this trainer did not draw this step")
            positions.setdefault(uid, []).append(position)
        order = [uid for uid in self._drawn if uid in positions]
        for uid in order:
            if len(positions[uid]) != self.rollouts:
                raise RuntimeError(f"prompt uid {uid!r} has {len(positions[uid])} responses in the step, expected "
                                   f"rollout.n = {self.rollouts} (a multi-turn or failed agent loop?)")
            positions[uid].sort(key=lambda p: [int(part) for part in keys[p].rsplit("_", 2)[1:]])
        return torch.tensor([positions[uid] for uid in order]), [self._drawn.pop(uid) for uid in order]

    def _update_actor(self, batch: KVBatchMeta, metrics: dict) -> KVBatchMeta:
        if os.environ.get(DEBUG_DUMP_VARIABLE):
            self._dump_update_fields(batch, Path(os.environ[DEBUG_DUMP_VARIABLE]))
        batch = super()._update_actor(batch, metrics)
        if self._weighed is not None:
            self.driver.observe(self._weighed)
            self._weighed = None
        return batch

    def _dump_update_fields(self, batch: KVBatchMeta, folder: Path) -> None:
        """`update_actor_step<N>.pt` in `folder`: the fields the update's batch lists (the worker fetches exactly
        those), each response's padding tag, and the DUMPED_FIELDS among them as the worker will read them, one
        tensor per response."""
        listed = list(batch.fields or [])
        selected = [name for name in DUMPED_FIELDS if name in listed]
        data = tq.kv_batch_get(keys=batch.keys, partition_id=batch.partition_id, select_fields=selected)
        dump = {"step": self.global_steps, "keys": list(batch.keys), "fields": listed,
                "padding": [bool(tag.get("is_padding", False)) for tag in batch.tags],
                **{name: [value.clone() for value in data[name].unbind()] for name in selected}}
        folder.mkdir(parents=True, exist_ok=True)
        with atomic_path(folder / f"update_actor_step{self.global_steps}.pt") as tmp:
            torch.save(dump, tmp)

    # --- checkpoints -----------------------------------------------------------------------------------------------
    def _save_checkpoint(self):
        folder = Path(self.config.trainer.default_local_dir) / f"global_step_{self.global_steps}"
        folder.mkdir(parents=True, exist_ok=True)
        with atomic_path(folder / DRIVER_STATE_FILE) as tmp:
            torch.save(self.driver.state_dict(), tmp)
        super()._save_checkpoint()
        for removed in remove_superseded_checkpoints(Path(self.config.trainer.default_local_dir)):
            logger.info("removed %s: superseded by global_step_%d", removed, self.global_steps)

    def _load_checkpoint(self):
        super()._load_checkpoint()
        if self.global_steps == 0:
            return
        trainer = self.config.trainer
        folder = (trainer.resume_from_path if trainer.resume_mode == "resume_path"
                  else os.path.join(trainer.default_local_dir, f"global_step_{self.global_steps}"))
        path = Path(folder) / DRIVER_STATE_FILE
        if not path.exists():
            raise RuntimeError(f"{path}: missing, so resuming from {folder} would restart the prompt stream and the "
                               f"mixture of step 1; this checkpoint was not written by the dataflex_rl trainer — "
                               f"remove {trainer.default_local_dir} to start the run afresh")
        self.driver.load_state_dict(load_train_state(path, trainer.default_local_dir))
