"""What the Slurm cluster this machine submits to can give one job: its nodes, as `sinfo` lists them at dry run.

Slurm never starts a job that asks a partition for more CPUs, memory or GPUs than any single node of it has, or for a
longer time than the partition's time limit: it refuses the job at submission, or holds it pending for ever (reason
`Resources`, `PartitionConfig` or `PartitionTimeLimit`), and the run waits on it.
Where `sinfo` answers, the dry run refuses such a job before anything is submitted; where it does not (no Slurm on this
machine, no controller answering), the dry run says nothing. A study's own `cluster.partitions` replaces the question.
A line of sinfo's answer that cannot be read (`N/A` where a number belongs, fewer fields) is left out with a note, and
no job of its partition is refused: the node left out might be the one that fits.
"""
from __future__ import annotations

import re
import subprocess
import sys
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

SINFO = ["sinfo", "--noheader", "--Node", "--format=%N|%P|%c|%m|%G|%l"]
FIELDS = "node|partition|CPUs|memory MB|GRES|time limit"  # what each line of SINFO's answer holds


@dataclass(frozen=True)
class Node:
    """One node of one partition (a node in two partitions is listed once per partition, as sinfo does)."""

    name: str
    partition: str
    default: bool  # the cluster's default partition (a `*` after its name)
    cpus: int
    mem_mb: int
    gpus: int
    max_minutes: int | None = None  # the partition's time limit (None: infinite)
    gpu_types: tuple[str, ...] = ()  # the GPU types its GRES names (`gpu:h200:8`: h200), a job's gpu_model


def gres_gpus(gres: str) -> int:
    """The GPUs a node's GRES string offers: `gpu:4`, `gpu:a100:4(S:0-1)`, `gpu:a100:2,gpu:v100:2` (4),
    `(null)` (0); other generic resources count nothing."""
    total = 0
    for entry in gres.split(","):
        fields = re.sub(r"\(.*?\)", "", entry.strip()).split(":")
        if fields[0] == "gpu" and len(fields) > 1 and fields[-1].isdigit():
            total += int(fields[-1])
    return total


def gres_gpu_types(gres: str) -> tuple[str, ...]:
    """The GPU types a node's GRES string names, sorted: `gpu:h200:8` (h200), `gpu:a100:2,gpu:v100:2(S:0)` (a100,
    v100); `gpu:4` and `(null)` none. A typed request (--gpus=h200:8, the Slurm executor's gpu_model) runs only on a
    node with that type."""
    types = set()
    for entry in gres.split(","):
        fields = re.sub(r"\(.*?\)", "", entry.strip()).split(":")
        if fields[0] == "gpu" and len(fields) > 2:
            types.add(fields[1])
    return tuple(sorted(types))


@dataclass(frozen=True)
class UnreadLine:
    """A line of sinfo's answer that could not be read: its number (from 1), its text, what was expected, and its
    partition where that much could be read."""

    number: int
    text: str
    problem: str
    partition: str | None

    def note(self) -> str:
        where = (f"no job of partition {self.partition!r} is refused" if self.partition is not None
                 else "no job of any partition is refused")
        return (f"note: sinfo line {self.number} {self.text!r} could not be read: {self.problem} (expected {FIELDS}, "
                f"as `{' '.join(SINFO)}` prints each node); that node is left out, and {where} on what the other "
                f"nodes give — give the study a cluster.partitions to check the jobs against stated limits instead")


@dataclass(frozen=True)
class SinfoAnswer:
    """The nodes of sinfo's answer, and the lines of it that could not be read."""

    nodes: list[Node]
    unread: list[UnreadLine] = field(default_factory=list)

    def unsure(self, partition: str) -> bool:
        """Whether a line that could not be read may be a node of `partition`."""
        return any(line.partition in (None, partition) for line in self.unread)


def _count(value: str) -> int | None:
    """A count as sinfo prints it (`64`, or `512000+` for the least of several), None where it is none (`N/A`)."""
    digits = value.strip().rstrip("+")
    return int(digits) if digits.isdigit() else None


_TIME = re.compile(r"(?:(?P<days>\d+)-)?(?P<clock>\d+(?::\d+){0,2})")


def time_limit_minutes(value: str) -> int | None | str:
    """A partition's time limit as sinfo prints it (Slurm's time format: `30` minutes, `30:00` minutes:seconds,
    `2:00:00`, `2-00:00:00`, `1-12`, `1-12:30` days-hours[:minutes]) in whole minutes, rounded up; None for
    `infinite` / `UNLIMITED`; the text itself where it is neither."""
    text = value.strip()
    if text.lower() in ("infinite", "unlimited"):
        return None
    match = _TIME.fullmatch(text)
    if match is None:
        return text
    parts = [int(part) for part in match["clock"].split(":")]
    if match["days"] is not None:  # days-hours[:minutes[:seconds]]
        hours, minutes, seconds = (parts + [0, 0])[:3]
        minutes += 60 * (24 * int(match["days"]) + hours)
    elif len(parts) == 3:  # hours:minutes:seconds
        minutes, seconds = 60 * parts[0] + parts[1], parts[2]
    else:  # minutes[:seconds]
        minutes, seconds = (parts + [0])[:2]
    return minutes + (seconds > 0)


def _read_line(number: int, line: str) -> Node | UnreadLine:
    fields = line.strip().split("|", 5)
    partition = fields[1].strip().rstrip("*") if len(fields) > 1 else None
    if len(fields) < 6:
        return UnreadLine(number, line, f"{len(fields)} field(s) separated by '|', not 6", partition)
    name, partition_field, cpus_field, memory_field, gres, time_field = fields
    cpus, memory, minutes = _count(cpus_field), _count(memory_field), time_limit_minutes(time_field)
    problems = [f"{label} {text!r} is not a whole number" for label, text, count
                in (("CPUs", cpus_field, cpus), ("memory (MB)", memory_field, memory)) if count is None]
    if isinstance(minutes, str):
        problems.append(f"time limit {minutes!r} is neither a Slurm time (e.g. 2-00:00:00) nor infinite")
    if problems:
        return UnreadLine(number, line, "; ".join(problems), partition)
    return Node(name, partition, partition_field.endswith("*"), cpus, memory, gres_gpus(gres), minutes,
                gres_gpu_types(gres))


def parse_sinfo(text: str) -> SinfoAnswer:
    """The nodes of `sinfo --noheader --Node --format=%N|%P|%c|%m|%G|%l` output, and the lines that cannot be read."""
    read = [_read_line(number, line) for number, line in enumerate(text.splitlines(), 1) if line.strip()]
    return SinfoAnswer([item for item in read if isinstance(item, Node)],
                       [item for item in read if isinstance(item, UnreadLine)])


def cluster_nodes(timeout: float = 10) -> SinfoAnswer | None:
    """The nodes `sinfo` lists, or None where it is not installed, fails, answers nothing or does not answer within
    `timeout` s."""
    try:
        answer = subprocess.run(SINFO, capture_output=True, text=True, timeout=timeout)
    except (OSError, subprocess.TimeoutExpired):
        return None
    if answer.returncode != 0:
        return None
    nodes = parse_sinfo(answer.stdout)
    return nodes if nodes.nodes or nodes.unread else None


def _request(values: Mapping[str, Any]) -> dict[str, int]:
    """What one node must give a job: its CPUs per task, memory and GPUs (a multi-node job's GPUs spread evenly)."""
    nodes = int(values.get("nodes") or 1)
    return {"cpus": int(values.get("cpus_per_task") or 1), "mem_mb": int(values.get("mem_mb") or 0),
            "gpus": -(-int(values.get("gpu") or 0) // nodes)}


def partition_requests(resources: Mapping[str, Mapping[str, Any]]):
    """(rule, its resource values, its partition) for each rule whose resources name a `slurm_partition`."""
    for rule, values in resources.items():
        if values.get("slurm_partition") is not None:
            yield rule, values, values["slurm_partition"]


def node_fit_errors(resources: Mapping[str, Mapping[str, Any]], cluster: SinfoAnswer) -> list[str]:
    """Each rule whose resources name a `slurm_partition` that the cluster lacks, ask more than any one node of it
    has, or a runtime beyond its time limit; `resources` maps a rule to its effective values
    (config_checks.resource_errors). None for a partition a line of sinfo's answer that could not be read may belong
    to."""
    nodes = cluster.nodes
    partitions = sorted({node.partition for node in nodes})
    errors = []
    for rule, values, partition in partition_requests(resources):
        if cluster.unsure(partition):
            continue
        if partition not in partitions:
            errors.append(f"resources of rule {rule}: slurm_partition={partition!r} is not a partition of the Slurm "
                          f"cluster sinfo answers for (its partitions: {', '.join(partitions)}); name one of them "
                          f"(--set-resources {rule}:slurm_partition=..., or models.<m>.resources.{rule}"
                          f".slurm_partition for a GPU job)")
            continue
        request = _request(values)
        members = [node for node in nodes if node.partition == partition]
        errors += _time_limit_errors(rule, values, partition, members) + _gpu_type_errors(rule, values, partition,
                                                                                            members)
        if any(all(getattr(node, key) >= amount for key, amount in request.items()) for node in members):
            continue
        largest = {key: max(getattr(node, key) for node in members) for key in request}
        # the node that gives the most of what is asked: the suggestion is what it lacks, sized to it
        closest = max(members, key=lambda node: sum(getattr(node, key) >= amount for key, amount in request.items()))
        short = [key for key in request if request[key] > getattr(closest, key)]
        asked = ", ".join(f"{_NAMES[key]}={values.get(_NAMES[key]) or 0}" for key in request
                          if request[key] or key == "cpus")
        errors.append(f"resources of rule {rule}: {asked} fit no node of Slurm partition {partition!r} (sinfo: "
                      f"{len(members)} node(s), at most {largest['cpus']} CPUs, {largest['mem_mb']} MB and "
                      f"{largest['gpus']} GPUs each); Slurm would refuse the job or hold it pending for ever — ask "
                      f"less, e.g. --set-resources "
                      + " ".join(f"{rule}:{_NAMES[key]}={getattr(closest, key)}" for key in short)
                      + " (README: a small cluster), or use another partition")
    return errors


_NAMES = {"cpus": "cpus_per_task", "mem_mb": "mem_mb", "gpus": "gpu"}


def _time_limit_errors(rule: str, values: Mapping[str, Any], partition: str, members: list[Node]) -> list[str]:
    """A runtime beyond the partition's time limit (the longest its nodes are listed with; all share it)."""
    limits = [node.max_minutes for node in members]
    runtime = values.get("runtime")
    if runtime is None or None in limits or int(runtime) <= max(limits):
        return []
    return [f"resources of rule {rule}: runtime={runtime} minutes is longer than the time limit of Slurm partition "
            f"{partition!r} (sinfo: {max(limits)} minutes); Slurm would refuse the job or hold it pending for ever "
            f"(reason PartitionTimeLimit) — ask at most that, e.g. --set-resources {rule}:runtime={max(limits)} "
            f"(a train, score or solve-rate job resumes from what it kept when a retry follows its time limit), or "
            f"use another partition"]


def _gpu_type_errors(rule: str, values: Mapping[str, Any], partition: str, members: list[Node]) -> list[str]:
    """A `gpu_model` that no node of the partition has: the Slurm executor asks --gpus=<gpu_model>:<gpu>
    (snakemake_executor_plugin_slurm utils.py:384-402), which Slurm refuses or holds pending for ever."""
    model = values.get("gpu_model")
    types = sorted({kind for node in members for kind in node.gpu_types})
    if not model or model in types:
        return []
    return [f"resources of rule {rule}: gpu_model={model!r} is no GPU type of Slurm partition {partition!r} (sinfo's "
            f"GRES: {', '.join(types) if types else 'no typed GPUs'}); Slurm would refuse --gpus={model}:"
            f"{values.get('gpu') or 1} or hold it pending for ever — name one of its types "
            f"(models.<m>.resources.{rule}.gpu_model, or --set-resources {rule}:gpu_model=...), or use another "
            f"partition"]


def cluster_fit_errors(resources: Mapping[str, Mapping[str, Any]]) -> list[str]:
    """Jobs meant for Slurm (their resources name a slurm_partition) that no node of the cluster `sinfo` answers for
    can run (`node_fit_errors`); nothing where no job names a partition or sinfo does not answer. Each line of its
    answer that cannot be read is a note on stderr."""
    if not any("slurm_partition" in values for values in resources.values()):
        return []
    cluster = cluster_nodes()
    if cluster is None:
        return []
    for line in cluster.unread:
        print(line.note(), file=sys.stderr)
    return node_fit_errors(resources, cluster)
