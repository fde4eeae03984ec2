"""The Ray logical CPUs a verl train job gets (dataflex_rl.backends.verl.ray_cpus) against verl 0.9.1's and
transfer_queue's own facts: the resource options on their real actor classes, the bundles verl's resource pool asks
for, the storage units of verl's composed config; every shipped verl config's train job gets enough; the dry run
refuses too few; and a real Ray on CPU leaves the placement group pending one CPU short of the count and starts it at
the count."""
import ast
import threading
import time
from pathlib import Path

import pytest

from dataflex_rl.backends.model_spec import ModelSpec
from dataflex_rl.backends.registry import get_backend
from dataflex_rl.backends.verl import overrides as verl_overrides
from dataflex_rl.backends.verl import ray_cpus
from dataflex_rl.backends.verl.overrides import RunFiles, run_overrides
from dataflex_rl.backends.verl.ray_cpus import RayCpuDemand, composed_shortfall, ray_num_cpus
from dataflex_rl.training.recipe import GRPOSettings
from dataflex_rl.study.resolved import Study

verl = pytest.importorskip("verl")
ray = pytest.importorskip("ray")
tq = pytest.importorskip("transfer_queue")
from dataflex_rl.backends.verl import verl_config  # noqa: E402
from test_verl_config import STUDIES  # noqa: E402  (every shipped study with a verl model)

VERL = Path(verl.__file__).parent


def _overrides(tmp_path: Path, gpus: int, cpus: int, training: GRPOSettings = GRPOSettings()) -> list[str]:
    return run_overrides("m", training, 1, gpus=gpus, cpus=cpus, files=RunFiles.in_state(tmp_path), attention="sdpa")


def _source(file: str, qualified: str) -> str:
    """The source of function `qualified` (`Class.method` or `function`) in verl's installed `file`."""
    text = (VERL / file).read_text()
    *owner, name = qualified.split(".")
    scope = ast.parse(text)
    if owner:
        scope = next(node for node in scope.body if isinstance(node, ast.ClassDef) and node.name == owner[0])
    node = next(node for node in scope.body if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef))
                and node.name == name)
    return ast.get_source_segment(text, node)


def test_the_actors_that_hold_cpus_ask_for_one_each_on_their_real_classes():
    from transfer_queue.controller import TransferQueueController
    from transfer_queue.storage.simple_storage import SimpleStorageUnit

    assert TransferQueueController._default_options == {"num_cpus": ray_cpus.CONTROLLER_CPUS}
    assert SimpleStorageUnit._default_options == {"num_cpus": ray_cpus.STORAGE_UNIT_CPUS}


def test_the_other_actors_ask_ray_for_nothing_so_hold_no_cpu():
    """The TaskRunner and the agent-loop workers carry no resource options, nor do the reward-loop workers', vLLM
    servers' and load balancer's `.options(...)`; such an actor holds 0 CPUs for its life (Ray's defaults), and one
    given resources (the FSDP workers' num_gpus) takes 1 CPU, from its placement-group bundle."""
    from ray._private import ray_constants
    from verl.trainer.main_ppo import TaskRunnerV1
    from verl.trainer.ppo.v1.agent_loop_tq import AgentLoopWorkerTQ

    assert TaskRunnerV1._default_options == {} and AgentLoopWorkerTQ._default_options == {}
    for file, function in [("experimental/reward_loop/reward_loop.py", "RewardLoopManager._init_reward_loop_workers"),
                           ("experimental/agent_loop/agent_loop.py", "AgentLoopManager._init_agent_loop_workers"),
                           ("workers/rollout/vllm_rollout/vllm_async_server.py", "vLLMReplica.launch_servers"),
                           ("workers/rollout/router.py", "_create_global_sticky_inflight")]:
        source = _source(file, function)  # vllm_async_server imports vLLM, which this machine may lack: read, not run
        assert ".remote(" in source and ("options(" in source or "ray.remote(" in source), function
        assert not any(word in source for word in ("num_cpus", "num_gpus", "resources=", "placement_group")), function
    assert ray_constants.DEFAULT_ACTOR_CREATION_CPU_SIMPLE == 0
    assert ray_constants.DEFAULT_ACTOR_CREATION_CPU_SPECIFIED == 1 <= ray_cpus.BUNDLE_CPUS


@pytest.mark.parametrize("gpus", [1, 8])
def test_verls_resource_pool_asks_for_the_bundle_cpus_per_gpu(monkeypatch, gpus):
    """verl's own RayResourcePool, as the v1 trainer's ResourcePoolManager builds it, with Ray's placement group
    call recorded instead of made."""
    from dataclasses import fields

    from verl.single_controller.ray import base

    colocate = next(f.default for f in fields(base.ResourcePoolManager) if f.name == "max_colocate_count")
    assert colocate == ray_cpus.BUNDLE_CPUS
    asked = []

    class Group:
        def ready(self):
            return None

    monkeypatch.setattr(base, "placement_group", lambda bundles, **kwargs: asked.append(bundles) or Group())
    monkeypatch.setattr(base.ray, "get", lambda refs: None)
    monkeypatch.setattr(base, "sort_placement_group_by_node_ip", lambda pgs: pgs)
    base.RayResourcePool(process_on_nodes=[gpus], use_gpu=True, max_colocate_count=colocate).get_placement_groups(
        strategy="STRICT_PACK")
    (bundles,) = asked
    assert len(bundles) == gpus and all(bundle["CPU"] == ray_cpus.BUNDLE_CPUS for bundle in bundles)
    assert sum(bundle["CPU"] for bundle in bundles) == RayCpuDemand(gpus).held - 1 - ray_cpus.STORAGE_UNITS


@pytest.mark.parametrize("gpus, threads", [(1, 8), (8, 40), (4, 2), (2, 64)])
def test_the_count_follows_verls_composed_config(tmp_path, gpus, threads):
    cfg = verl_config.compose(_overrides(tmp_path, gpus, threads))
    assert cfg.transfer_queue.backend.storage_backend == "SimpleStorage"
    storage = cfg.transfer_queue.backend.SimpleStorage.num_data_storage_units
    assert storage == ray_cpus.STORAGE_UNITS == 8
    assert ray_cpus.composed_demand(cfg) == RayCpuDemand(gpus)
    held = 1 + storage + 3 * gpus  # the controller, the storage units, the bundles
    assert RayCpuDemand(gpus).held == held and RayCpuDemand(gpus).needed == held + ray_cpus.HEADROOM
    assert cfg.ray_kwargs.ray_init.num_cpus == max(threads, held + ray_cpus.HEADROOM)
    assert composed_shortfall(cfg) is None


def test_the_one_gpu_config_and_the_paper_get_what_verl_needs(tmp_path):
    """config/one_gpu.yaml's train job (8 threads, 1 GPU) got 8, which leaves verl waiting; now 14. The paper's
    (40 CPUs, 8 GPUs: JOB_RESOURCES) keeps its 40, more than the 35 needed."""
    runs = {}
    for name in ("config/one_gpu.yaml", "config/paper.yaml"):
        study = Study.from_config(STUDIES[name])
        for spec in study.models.values():
            train = spec.job_resources("train")
            command = run_overrides(spec.path, study.training, study.seeds[0], gpus=train["gpu"],
                                    cpus=train["cpus_per_task"], files=RunFiles.in_state(tmp_path), attention="sdpa")
            composed = verl_config.compose(command)
            runs[name] = (train["gpu"], train["cpus_per_task"], composed.ray_kwargs.ray_init.num_cpus)
    assert runs == {"config/one_gpu.yaml": (1, 8, 14), "config/paper.yaml": (8, 40, 40)}
    assert 8 < RayCpuDemand(1).needed == 14 and RayCpuDemand(8).needed == 35


@pytest.mark.parametrize("name", sorted(STUDIES))
def test_every_shipped_verl_configs_train_job_gets_what_verl_needs(tmp_path, name):
    study = Study.from_config(STUDIES[name])
    for spec in study.models.values():
        if spec.backend != "verl":
            continue
        train = spec.job_resources("train")
        command = run_overrides(spec.path, study.training, study.seeds[0], gpus=train["gpu"],
                                cpus=train["cpus_per_task"], files=RunFiles.in_state(tmp_path), attention="sdpa")
        cfg = verl_config.compose(command)
        assert cfg.ray_kwargs.ray_init.num_cpus >= ray_cpus.composed_demand(cfg).needed, spec.name
        assert composed_shortfall(cfg) is None, spec.name


def test_the_summary_shows_the_formula_where_the_resources_are_placeholders():
    assert ray_num_cpus("<cpus>", "<gpu>") == "max(<cpus>,3*<gpu>+11)"
    assert ray_num_cpus("<cpus>", 8) == "max(<cpus>,35)" and ray_num_cpus(40, "<gpu>") == "max(40,3*<gpu>+11)"
    assert ray_num_cpus(40, 8) == 40 and ray_num_cpus(2, 1) == 14


def test_the_check_fires_where_the_composed_config_asks_for_more_or_starts_actors_it_leaves_out(tmp_path):
    """What another verl's defaults would do, planted as overrides on 0.9.1."""
    command = _overrides(tmp_path, 1, 8)
    more = composed_shortfall(verl_config.compose(
        command + ["transfer_queue.backend.SimpleStorage.num_data_storage_units=16"]))
    assert more.startswith("the train command gives Ray 14 logical CPUs (ray_kwargs.ray_init.num_cpus), fewer than "
                           "the 22 verl 0.9.1's actors need (transfer queue controller 1 + 16 storage units × 1 + 1 "
                           "GPU bundles × 3 = 20 held, and 2 free)"), more
    remote = composed_shortfall(verl_config.compose(command + ["reward.reward_manager.name=remote"]))
    assert "reward.reward_manager.name='remote'" in remote and "with 'naive'" in remote, remote


def test_the_dry_run_refuses_a_train_command_that_gives_ray_the_jobs_threads(tmp_path, monkeypatch):
    """A planted fault: the old override, num_cpus = the job's threads, on config/one_gpu.yaml's train job."""
    monkeypatch.chdir(tmp_path)  # the dry run's cache of passed override lists is in the working directory
    model = ModelSpec.from_entry("qwen", {"backend": "verl", "path": "m"})
    training = GRPOSettings(prompts_per_step=16, rollouts=5)
    resources = {"gpu": 1, "cpus_per_task": 8}
    assert get_backend("verl").train_resource_errors("models.qwen", model, training, resources, None) == []
    monkeypatch.setattr(verl_overrides, "ray_num_cpus", lambda cpus, gpus: cpus)
    refused = get_backend("verl").train_resource_errors("models.qwen", model, training, resources, None)
    assert refused == [f"models.qwen: {composed_shortfall(verl_config.compose(_overrides(tmp_path, 1, 8, training)))}"]
    assert refused[0].startswith("models.qwen: the train command gives Ray 8 logical CPUs (ray_kwargs.ray_init."
                                 "num_cpus), fewer than the 14 verl 0.9.1's actors need"), refused


def _free_cpus_become(count: int, timeout: float = 30) -> bool:
    """Whether Ray's free CPUs reach `count` within `timeout` seconds (the raylets report them a moment late)."""
    deadline = time.monotonic() + timeout
    while ray.available_resources().get("CPU", 0) != count:
        if time.monotonic() > deadline:
            return False
        time.sleep(0.2)
    return True


def test_a_real_ray_leaves_the_placement_group_pending_one_cpu_short_and_starts_it_at_the_count():
    """Ray on CPU with the count's held CPUs for 1 GPU and 2 storage units (6): transfer_queue's own controller and
    storage units, then verl's own resource pool (its bundles without the GPU, which this machine lacks). One CPU
    taken by another actor leaves the placement group pending; freed, the group starts, and default-resource actors
    (the TaskRunner's kind) start with no CPU free: they hold none, and Ray 2.60 does not ask one to place them."""
    from verl.single_controller.ray.base import RayResourcePool

    demand = RayCpuDemand(gpus=1, storage_units=2)

    @ray.remote(num_cpus=1)
    class Holder:
        def ping(self):
            return True

    @ray.remote
    class DefaultActor:
        def ping(self):
            return True

    ray.init(address="local", num_cpus=demand.held, num_gpus=0, include_dashboard=False, log_to_driver=False)
    try:
        holder = Holder.remote()
        assert ray.get(holder.ping.remote(), timeout=120)
        tq.init({"backend": {"SimpleStorage": {"num_data_storage_units": 2, "total_storage_size": 100}}})
        assert _free_cpus_become(demand.bundle_cpus - 1)
        pool = RayResourcePool(process_on_nodes=[demand.gpus], use_gpu=False, max_colocate_count=demand.bundle_cpus)
        group = threading.Thread(target=pool.get_placement_groups, daemon=True)
        group.start()
        group.join(timeout=5)
        assert group.is_alive(), "the placement group started one CPU short"
        ray.kill(holder)
        group.join(timeout=120)
        assert not group.is_alive(), "the placement group did not start at the count"
        assert _free_cpus_become(0)
        actors = [DefaultActor.remote() for _ in range(3)]
        assert all(ray.get([actor.ping.remote() for actor in actors], timeout=120))
    finally:
        tq.close()
        ray.shutdown()
