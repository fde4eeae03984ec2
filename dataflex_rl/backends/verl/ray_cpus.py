"""The Ray logical CPUs one verl train job needs (`ray_kwargs.ray_init.num_cpus`), from verl 0.9.1's own source.

A Ray logical CPU is a scheduling token, not a core: an actor that asks for one holds it for its life, and one that
cannot get it stays pending without an error, so verl waits for it forever (seen: num_cpus=2 ran Ray and the
TaskRunner, then waited 600 s). What `python -m verl.trainer.main_ppo` starts on one node of G GPUs under our
overrides (the v1 trainer, `trainer.use_v1: true` in verl's ppo_trainer.yaml, verl: trainer/main_ppo.py:183-184; our
plugin's trainer is a PPOTrainerSync, whose setup is verl's PPOTrainer._setup), all alive until the run ends:

- TaskRunnerV1, one: 0 (Ray's default) — main_ppo.py:92, 102-103.
- TransferQueueController, one: 1 — transfer_queue controller.py:943, interface.py:200-202 (tq.init, main_ppo.py:149).
- SimpleStorageUnit, S = transfer_queue.backend.SimpleStorage.num_data_storage_units (8: verl
  trainer/config/transfer_queue/transfer_queue.yaml:29): 1 each — transfer_queue storage/simple_storage.py:722,
  storage/bootstrap/simple_storage_bootstrap.py:69-79.
- One STRICT_PACK placement group of G bundles {"CPU": C, "GPU": 1}, C = ResourcePoolManager.max_colocate_count = 3:
  C each — single_controller/ray/base.py:146-156, 192, 557-558; trainer/ppo/v1/trainer_base.py:818-819, 848, 310.
  Inside it, not on top: the G fused actor/rollout/ref workers, 1 CPU of their bundle each (base.py:623-629, 405:
  given num_gpus=1/3, Ray takes 1 CPU for the actor's life, ray actor.py:2050-2057), and the get_master_addr_port
  task, 1 CPU of bundle 0 while it runs (base.py:90-91, 520-527).
- RewardLoopWorker, reward.num_workers (8): 0 (Ray's default) — experimental/reward_loop/reward_loop.py:308,
  324-340; trainer_base.py:347.
- vLLMHttpServer, G / rollout TP: 0 (Ray's default) — workers/rollout/vllm_rollout/vllm_async_server.py:1334,
  1377-1385; workers/rollout/llm_server.py:460, 473; trainer_base.py:372.
- GlobalRequestLoadBalancer, one: 0 (Ray's default) — workers/rollout/router.py:322; llm_server.py:509.
- AgentLoopWorkerTQ, actor_rollout_ref.rollout.agent.num_workers (8): 0 (Ray's default) —
  trainer/ppo/v1/agent_loop_tq.py:52, 230-241; experimental/agent_loop/agent_loop.py:1208-1228; main_ppo.py:126.

An actor without resource options holds no CPU while it lives (ray: _private/ray_constants.py:329-330,
actor.py:2045-2049); Ray's documentation has it need one free CPU to be placed (actor.py:2062-2066), though Ray 2.60
places one with none free (tests/test_verl_ray_cpus.py). vLLM runs its engine with its `mp` executor
(vllm_async_server.py:329): its processes are not Ray actors; the checkpoint engine is verl's `naive` one
(trainer_base.py:382), which starts no workers (checkpoint_engine/base.py:517-520). Not on our path, and checked
against the composed config (`ASSUMED`): a reward model (its own vLLM servers and pool: trainer_base.py:341-350,
823-830; reward_loop.py:281-303), distillation's teacher pool (trainer_base.py:838-846), the `remote` reward manager
(reward.num_workers actors of 1 CPU per reward manager: reward_manager/remote.py:26, 62-68), another transfer-queue
backend.

So the job holds 1 + S + C·G logical CPUs (verl 0.9.1: 3·G + 9), and needs HEADROOM more free: one to place a
default-resource actor where Ray asks for it, one for a default-resource task, which holds 1 CPU while it runs (none
was found outside the placement group on this path). The reward and agent-loop workers, whatever their number, do not
count. Torch-free; verl is imported only by `composed_shortfall`, the dry run's check.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any

# verl 0.9.1's values the count rests on
STORAGE_UNITS = 8  # verl: trainer/config/transfer_queue/transfer_queue.yaml:29
BUNDLE_CPUS = 3  # verl: single_controller/ray/base.py:192 (ResourcePoolManager.max_colocate_count), :146
CONTROLLER_CPUS = 1  # transfer_queue: controller.py:943
STORAGE_UNIT_CPUS = 1  # transfer_queue: storage/simple_storage.py:722
HEADROOM = 2  # free: one to place a default-resource actor, one for a default-resource task (module doc)
STORAGE_UNITS_KEY = "transfer_queue.backend.SimpleStorage.num_data_storage_units"
NUM_CPUS_KEY = "ray_kwargs.ray_init.num_cpus"
# What else in the composed config would start Ray actors the count leaves out: key → (the value counted, why)
ASSUMED = {
    "trainer.use_v1": (True, "the v0 trainer (trainer/main_ppo_v0.py) starts other actors"),
    "trainer.nnodes": (1, "the count is one node's"),
    "transfer_queue.backend.storage_backend": ("SimpleStorage", "another backend starts other storage actors"),
    "reward.reward_model.enable": (False, "a reward model starts its own vLLM servers (trainer_base.py:341-350)"),
    "reward.reward_manager.name": ("naive", "the `remote` manager starts reward.num_workers actors of 1 CPU each "
                                   "(experimental/reward_loop/reward_manager/remote.py:26, 62-68)"),
    "distillation.enabled": (False, "distillation starts a teacher pool (trainer_base.py:838-846)"),
}


@dataclass(frozen=True)
class RayCpuDemand:
    """What one train job's Ray actors hold on its node of `gpus` GPUs."""

    gpus: int
    storage_units: int = STORAGE_UNITS
    bundle_cpus: int = BUNDLE_CPUS

    @property
    def held(self) -> int:
        return CONTROLLER_CPUS + STORAGE_UNIT_CPUS * self.storage_units + self.bundle_cpus * self.gpus

    @property
    def needed(self) -> int:
        return self.held + HEADROOM

    def breakdown(self) -> str:
        return (f"transfer queue controller {CONTROLLER_CPUS} + {self.storage_units} storage units × "
                f"{STORAGE_UNIT_CPUS} + {self.gpus} GPU bundles × {self.bundle_cpus} = {self.held} held, and "
                f"{HEADROOM} free")


def ray_num_cpus(threads, gpus):
    """`ray_kwargs.ray_init.num_cpus` for a train job of `threads` CPUs and `gpus` GPUs: max(threads, what verl's
    actors need). Logical CPUs pin no core and cap no thread: Ray by default neither sets affinity nor enforces them
    (on Slurm the job's cgroup bounds its cores), and it sets OMP_NUM_THREADS only where unset, from each worker's own
    assigned CPUs, never from ray.init's count (ray: _private/utils.py:235-271; Snakemake's job environment already
    sets it to the job's threads: snakemake/shell.py:281). ray.init's count also caps how many worker processes start
    at once (ray: _private/services.py:1757-1761), not how many run. So the count need not match the cores: it must
    cover what verl's actors hold, and keeping the job's threads as its floor leaves spare tokens where the job has
    cores to spare. The dry run's summary passes placeholders (`<cpus>`, `<gpu>`): then the formula, without spaces."""
    if isinstance(threads, int) and isinstance(gpus, int):
        return max(threads, RayCpuDemand(gpus).needed)
    if isinstance(gpus, int):
        return f"max({threads},{RayCpuDemand(gpus).needed})"
    fixed = RayCpuDemand(0).needed
    return f"max({threads},{BUNDLE_CPUS}*{gpus}+{fixed})"


def _select(cfg, key: str) -> Any:
    from omegaconf import OmegaConf

    return OmegaConf.select(cfg, key, default=None)


def composed_demand(cfg) -> RayCpuDemand:
    """The demand of a composed verl config: its GPUs and storage units, and the bundle CPUs of the installed verl's
    ResourcePoolManager (the v1 trainer builds it with the default: trainer_base.py:848)."""
    from dataclasses import fields

    from verl.single_controller.ray.base import ResourcePoolManager

    colocate = next(field.default for field in fields(ResourcePoolManager) if field.name == "max_colocate_count")
    return RayCpuDemand(gpus=int(_select(cfg, "trainer.n_gpus_per_node")),
                        storage_units=int(_select(cfg, STORAGE_UNITS_KEY)), bundle_cpus=int(colocate))


def composed_shortfall(cfg) -> str | None:
    """Why the Ray logical CPUs a train command's composed config `cfg` gives verl may not cover what its actors hold
    (the installed verl's config, as `python -m verl.trainer.main_ppo` composes it: verl_config.checked), None where
    they do. The overrides compute the count from verl 0.9.1's values, so this fires where the installed verl's
    differ."""
    from dataflex_rl.backends.verl import verl_config

    traced = "dataflex_rl/backends/verl/ray_cpus.py counts the actors verl 0.9.1 starts"
    fix = "count them for this verl there, or run the verl version envs/gpu.yaml pins"
    with verl_config._quiet():
        for key, (counted, why) in ASSUMED.items():
            if _select(cfg, key) != counted:
                return (f"verl {verl_config.verl_version()}'s config of the train command has {key}="
                        f"{_select(cfg, key)!r}, and {traced} with {counted!r}: {why}; {fix}")
        if _select(cfg, STORAGE_UNITS_KEY) is None:
            return f"verl {verl_config.verl_version()}'s config has no {STORAGE_UNITS_KEY}, and {traced} from it; {fix}"
        demand, given = composed_demand(cfg), int(_select(cfg, NUM_CPUS_KEY))
    if given >= demand.needed:
        return None
    return (f"the train command gives Ray {given} logical CPUs ({NUM_CPUS_KEY}), fewer than the {demand.needed} verl "
            f"{verl_config.verl_version()}'s actors need ({demand.breakdown()}): Ray would leave one pending and the "
            f"job would wait on its GPUs without end. {traced}; {fix}")
