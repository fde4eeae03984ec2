"""A selection round's backward passes over every GPU of the train job: the groups are dealt round-robin to one
replica of the round's weights per device, each replica runs probe_gradients on its share in its own thread (CUDA
kernels release the GIL, and autograd runs each device's backward on that device's own thread), and the shares'
reductions are put back together in the groups' order. Each GPU holds what the one GPU of an unsharded round holds
(probe_settings: its replica, one group's gradient, the unit direction and its share of the mean), so a round takes
about 1/G of the time on G GPUs. With one device nothing is copied or threaded, and the reductions come out as
probe_gradients' own, bit for bit (one share of every group, in order).
"""
from __future__ import annotations

import copy
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from typing import Any, Callable, Iterator, Sequence, TypeVar

import torch
from torch import Tensor

from dataflex_rl.backends.verl import probe_gradients
from dataflex_rl.backends.verl.gpu_memory import release_cached
from dataflex_rl.backends.verl.probe_gradients import GroupTokens
from dataflex_rl.prompt_selection.gradients import ParameterLayout
from dataflex_rl.prompt_selection.scores import Alignment

Result = TypeVar("Result")


@contextmanager
def replicas(model: torch.nn.Module, devices: Sequence[str]) -> Iterator[list[torch.nn.Module]]:
    """`model` (on the CPU between passes) moved to the first device, and a copy of it on each other device, copied
    there from the first one at a time: the first GPU briefly holds two replicas (4 bytes a parameter, below the 12 of
    the backward passes that follow: probe_settings) and the host none. Afterwards the yielded list is emptied (the
    caller's name for it holds no replica), `model` is back on the CPU and every device's cached memory is handed
    back (gpu_memory.release_cached), so that vLLM's wake-up finds it free."""
    held: list[torch.nn.Module] = []
    try:
        held.append(model.to(devices[0]))
        for device in devices[1:]:
            held.append(copy.deepcopy(held[0]).to(device))
        yield held
    finally:
        held.clear()
        model.to("cpu")
        release_cached(devices)


def shares(count: int, parts: int) -> list[list[int]]:
    """The groups 0 … count − 1 dealt round-robin to `parts` replicas (groups of a chunk come in no order of
    length, so each share gets about 1/G of the tokens); empty shares are left out."""
    return [rows for start in range(parts) if (rows := list(range(start, count, parts)))]


def each_share(workers: Sequence[Any], count: int,
               compute: Callable[[Any, list[int]], Result]) -> list[tuple[list[int], Result]]:
    """`compute(worker, rows)` for each worker's share of 0 … count − 1 (`shares`: a model replica's groups, a round
    engine's prompts), in parallel threads where there are several."""
    dealt = shares(count, len(workers))
    if len(dealt) <= 1:
        return [(rows, compute(workers[0], rows)) for rows in dealt]
    with ThreadPoolExecutor(max_workers=len(dealt)) as pool:
        return list(zip(dealt, pool.map(compute, workers[:len(dealt)], dealt)))


def _pick(groups: Sequence[GroupTokens], rewards: Tensor, rows: list[int]) -> tuple[list[GroupTokens], Tensor]:
    return [groups[r] for r in rows], rewards[rows]


def group_gradients(models: Sequence[torch.nn.Module], groups: Sequence[GroupTokens], rewards: Tensor,
                    **options) -> Tensor:
    """probe_gradients.group_gradients over the replicas: [N, P] fp32 rows on the CPU, in the groups' order."""
    rows = torch.zeros(len(groups), ParameterLayout.of(models[0]).size, dtype=torch.float32)
    for share, part in each_share(models, len(groups), lambda model, share: probe_gradients.group_gradients(
            model, *_pick(groups, rewards, share), **options)):
        rows[share] = part
    return rows


def summed_gradient(models: Sequence[torch.nn.Module], groups: Sequence[GroupTokens], rewards: Tensor,
                    **options) -> Tensor:
    """probe_gradients.summed_gradient over the replicas: the sum of the shares' summed gradients, [P] fp32."""
    total = torch.zeros(ParameterLayout.of(models[0]).size, dtype=torch.float32)
    for _, part in each_share(models, len(groups), lambda model, share: probe_gradients.summed_gradient(
            model, *_pick(groups, rewards, share), **options)):
        total += part
    return total


def group_alignment(models: Sequence[torch.nn.Module], groups: Sequence[GroupTokens], rewards: Tensor,
                    direction: Tensor, **options) -> Alignment:
    """probe_gradients.group_alignment over the replicas: each group's g·u and ‖g‖ in the groups' order, and the
    chunk's mean Σ_g w_g·g with w_g = 1/N (a share's own mean divides by its own count, so it is reweighted by
    count / N)."""
    dots, norms = torch.zeros(len(groups)), torch.zeros(len(groups))
    mean = torch.zeros(direction.shape[0], dtype=torch.float32)
    for share, part in each_share(models, len(groups), lambda model, share: probe_gradients.group_alignment(
            model, *_pick(groups, rewards, share), direction, **options)):
        dots[share], norms[share] = part.dots, part.norms
        mean += part.mean * (len(share) / len(groups))
    return Alignment(dots, norms, mean)
