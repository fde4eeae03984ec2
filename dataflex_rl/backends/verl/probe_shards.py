"""A selection round's backward passes over every GPU of the train job: the groups are dealt round-robin to one
replica of the round's weights per device, each replica runs probe_gradients on its share in its own thread (CUDA
kernels release the GIL, and autograd runs each device's backward on that device's own thread), and the shares'
reductions are put back together in the groups' order. Each GPU holds what the one GPU of an unsharded round holds
(probe_settings: its replica, one group's gradient, the unit direction and its share of the mean), so a round takes
about 1/G of the time on G GPUs. The host holds one fp32 [P] sum for all the replicas (probe_gradients.HostSum): each
replica, its backward passes done, waits for the one before it to have added its gradient (its share's mean), then
adds its own block by block, so the sum is `0 + share 0 + share 1 + …` in the shares' order whatever order the threads
finish in, and no replica's whole vector reaches the host (probe_settings.round_host_memory). With one device nothing
is copied or threaded, and the reductions come out as probe_gradients' own, bit for bit (one share of every group, in
order).
"""
from __future__ import annotations

import copy
import threading
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from typing import Any, Callable, Iterator, Sequence, TypeVar

import torch
from torch import Tensor

from dataflex_rl.backends.verl import probe_gradients
from dataflex_rl.backends.verl.gpu_memory import release_cached
from dataflex_rl.backends.verl.probe_gradients import GroupTokens, HostSum
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


class SharesInTurn:
    """One HostSum of `size` that the shares add into in their order: share i's `add` waits until shares 0 … i − 1
    have added theirs. A share that fails (`failed`) stops the shares after it, whose adds would leave its part out,
    and none before it; each waiting share then raises, the failed one's own error coming first in the shares' order."""

    def __init__(self, size: int):
        self.sum, self.turn, self.first_failed = HostSum(size), 0, None
        self.changed = threading.Condition()

    def share(self, index: int, scale: float | None = None) -> _Share:
        return _Share(self, index, scale)

    def failed(self, index: int) -> None:
        with self.changed:
            self.first_failed = index if self.first_failed is None else min(self.first_failed, index)
            self.changed.notify_all()


class _Share:
    """Share `index` of a SharesInTurn, as probe_gradients' `into`: its one `add` (times `scale`) in its turn."""

    def __init__(self, shares: SharesInTurn, index: int, scale: float | None):
        self.shares, self.index, self.scale = shares, index, scale
        self.total = shares.sum.total

    def add(self, pieces, scale: float | None = None) -> None:
        shares = self.shares
        with shares.changed:
            shares.changed.wait_for(lambda: shares.turn == self.index or (
                shares.first_failed is not None and shares.first_failed < self.index))
            if shares.turn != self.index:
                raise RuntimeError(f"share {self.index} of the round's backward passes was not added: share "
                                   f"{shares.first_failed} failed before it")
        shares.sum.add(pieces, self.scale if scale is None else scale)
        with shares.changed:
            shares.turn += 1
            shares.changed.notify_all()


def _in_turn(models: Sequence[torch.nn.Module], count: int, shares: SharesInTurn,
             compute: Callable[[torch.nn.Module, list[int], _Share], Result],
             weighted: bool = False) -> list[tuple[list[int], Result]]:
    """each_share over the replicas, each share's `compute(model, rows, its _Share)` (`weighted`: its adds scaled by
    its share of the `count` groups), marking its share failed when it raises."""
    def run(worker: tuple[int, torch.nn.Module], rows: list[int]) -> Result:
        index, model = worker
        try:
            return compute(model, rows, shares.share(index, len(rows) / count if weighted else None))
        except BaseException:
            shares.failed(index)
            raise

    return each_share(list(enumerate(models)), count, run)


def group_gradients(models: Sequence[torch.nn.Module], groups: Sequence[GroupTokens], rewards: Tensor,
                    **options) -> Tensor:
    """probe_gradients.group_gradients over the replicas: [N, P] fp32 rows on the CPU, in the groups' order, each
    replica writing its groups' rows in place."""
    rows = torch.zeros(len(groups), ParameterLayout.of(models[0]).size, dtype=torch.float32)
    each_share(models, len(groups), lambda model, share: probe_gradients.group_gradients(
        model, *_pick(groups, rewards, share), into=rows, rows=share, **options))
    return rows


def summed_gradient(models: Sequence[torch.nn.Module], groups: Sequence[GroupTokens], rewards: Tensor,
                    **options) -> Tensor:
    """probe_gradients.summed_gradient over the replicas: the sum of the shares' summed gradients, [P] fp32, added
    into one host sum in the shares' order (SharesInTurn)."""
    shares = SharesInTurn(ParameterLayout.of(models[0]).size)
    _in_turn(models, len(groups), shares, lambda model, share, into: probe_gradients.summed_gradient(
        model, *_pick(groups, rewards, share), into=into, **options))
    return shares.sum.total


def group_alignment(models: Sequence[torch.nn.Module], groups: Sequence[GroupTokens], rewards: Tensor,
                    direction: Tensor, **options) -> Alignment:
    """probe_gradients.group_alignment over the replicas: each group's g·u and ‖g‖ in the groups' order, and the
    chunk's mean Σ_g w_g·g with w_g = 1/N (a share's own mean divides by its own count, so it is reweighted by
    count / N as it is added into the one host sum, in the shares' order: SharesInTurn)."""
    dots, norms = torch.zeros(len(groups)), torch.zeros(len(groups))
    shares = SharesInTurn(direction.shape[0])
    for share, part in _in_turn(models, len(groups), shares, lambda model, share, into: probe_gradients.group_alignment(
            model, *_pick(groups, rewards, share), direction, into=into, **options), weighted=True):
        dots[share], norms[share] = part.dots, part.norms
    return Alignment(dots, norms, shares.sum.total)
