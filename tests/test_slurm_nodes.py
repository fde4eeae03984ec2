"""The cluster's nodes as `sinfo` lists them, and the jobs no node of their partition can run
(dataflex_rl/study/slurm_nodes.py): hand-written sinfo lines, so that these run without Slurm;
tests/test_slurm_cluster.py asks a real one."""
import os
from pathlib import Path

from dataflex_rl.study.slurm_nodes import (Node, SinfoAnswer, UnreadLine, cluster_fit_errors, cluster_nodes,
                                           gres_gpu_types, gres_gpus, node_fit_errors, parse_sinfo, time_limit_minutes)

import forked_snakemake

REPO = Path(__file__).resolve().parents[1]

SINFO = """\
cpu01|cpu*|64|256000|(null)|infinite
cpu02|cpu*|32|512000+|(null)|infinite
gpu01|gpu|48|1024000|gpu:a100:8(S:0-1)|2-00:00:00
gpu02|gpu|48|512000|gpu:v100:2,gpu:t4:2,shard:8|2-00:00:00
"""


def test_sinfo_lines_give_each_node_its_partition_cpus_memory_and_gpus():
    assert parse_sinfo(SINFO) == SinfoAnswer([
        Node("cpu01", "cpu", True, 64, 256000, 0, None), Node("cpu02", "cpu", True, 32, 512000, 0, None),
        Node("gpu01", "gpu", False, 48, 1024000, 8, 2880, ("a100",)),
        Node("gpu02", "gpu", False, 48, 512000, 4, 2880, ("t4", "v100"))])
    assert [gres_gpus(g) for g in ("(null)", "gpu:4", "gpu:a100:4(S:0-1)", "mps:100", "gpu:h100:4(IDX:0-3),gpu:2")] \
        == [0, 4, 4, 0, 6]


def test_a_job_fits_when_one_node_gives_all_it_asks_at_once():
    nodes = parse_sinfo(SINFO)
    fits = {"train": {"slurm_partition": "gpu", "gpu": 8, "cpus_per_task": 40, "mem_mb": 320000},
            "merge": {"slurm_partition": "cpu", "cpus_per_task": 64, "mem_mb": 128000},
            "corpus": {"cpus_per_task": 500}}  # no partition named: not a Slurm job, not checked
    assert node_fit_errors(fits, nodes) == []
    # 64 CPUs on cpu01, 512 GB on cpu02, but no node with both
    errors = node_fit_errors({"merge": {"slurm_partition": "cpu", "cpus_per_task": 64, "mem_mb": 300000}}, nodes)
    assert errors == ["resources of rule merge: cpus_per_task=64, mem_mb=300000 fit no node of Slurm partition 'cpu' "
                      "(sinfo: 2 node(s), at most 64 CPUs, 512000 MB and 0 GPUs each); Slurm would refuse the job or "
                      "hold it pending for ever — ask less, e.g. --set-resources merge:mem_mb=256000 (README: a small "
                      "cluster), or use another partition"]


def test_gpus_beyond_any_node_and_an_unknown_partition_are_refused():
    nodes = parse_sinfo(SINFO)
    [gpus] = node_fit_errors({"train": {"slurm_partition": "gpu", "gpu": 16, "cpus_per_task": 8}}, nodes)
    assert "gpu=16 fit no node of Slurm partition 'gpu'" in gpus and "--set-resources train:gpu=8 " in gpus
    # two nodes: 16 GPUs spread over them, 8 a node
    assert node_fit_errors({"train": {"slurm_partition": "gpu", "gpu": 16, "nodes": 2}}, nodes) == []
    [unknown] = node_fit_errors({"score": {"slurm_partition": "a100", "gpu": 1}}, nodes)
    assert unknown.startswith("resources of rule score: slurm_partition='a100' is not a partition of the Slurm "
                              "cluster sinfo answers for (its partitions: cpu, gpu)")


def test_no_answer_from_sinfo_means_no_nodes(monkeypatch, tmp_path):
    """No Slurm installed, or a Slurm whose controller cannot be reached: the dry run has nothing to check against."""
    monkeypatch.setenv("PATH", str(tmp_path))  # no sinfo on it
    assert cluster_nodes() is None
    fake = tmp_path / "sinfo"
    fake.write_text("#!/bin/sh\necho 'sinfo: error: Unable to contact slurm controller (connect failure)' >&2\nexit 1\n")
    fake.chmod(0o755)
    assert cluster_nodes() is None
    fake.write_text("#!/bin/sh\nprintf 'node1|debug*|4|8000|(null)|infinite\\n'\n")
    assert cluster_nodes() == SinfoAnswer([Node("node1", "debug", True, 4, 8000, 0)])


# sinfo lines the dry run cannot read: memory and CPUs as N/A, a line of three fields, a line of one
UNREADABLE = SINFO + """\
gpu03|gpu|48|N/A|gpu:h100:8|2-00:00:00
gpu04|gpu|N/A|N/A|gpu:h100:8|2-00:00:00
gpu05|gpu|48
"""


def test_a_line_sinfo_prints_that_cannot_be_read_is_left_out_and_named_with_what_was_expected():
    answer = parse_sinfo(UNREADABLE)
    assert answer.nodes == parse_sinfo(SINFO).nodes
    assert answer.unread == [
        UnreadLine(5, "gpu03|gpu|48|N/A|gpu:h100:8|2-00:00:00", "memory (MB) 'N/A' is not a whole number", "gpu"),
        UnreadLine(6, "gpu04|gpu|N/A|N/A|gpu:h100:8|2-00:00:00",
                   "CPUs 'N/A' is not a whole number; memory (MB) 'N/A' is not a whole number", "gpu"),
        UnreadLine(7, "gpu05|gpu|48", "3 field(s) separated by '|', not 6", "gpu")]
    assert answer.unread[0].note() == (
        "note: sinfo line 5 'gpu03|gpu|48|N/A|gpu:h100:8|2-00:00:00' could not be read: memory (MB) 'N/A' is not a "
        "whole number (expected node|partition|CPUs|memory MB|GRES|time limit, as `sinfo --noheader --Node "
        "--format=%N|%P|%c|%m|%G|%l` prints each node); that node is left out, and no job of partition 'gpu' is "
        "refused on what the other nodes give — give the study a cluster.partitions to check the jobs against stated "
        "limits instead")
    assert parse_sinfo("gpu06\n").unread == [UnreadLine(1, "gpu06", "1 field(s) separated by '|', not 6", None)]


def test_no_job_is_refused_on_a_partition_a_line_that_cannot_be_read_may_belong_to():
    """The node left out might be the one that fits: 16 GPUs on one node fit none of those read, but gpu03 (N/A
    memory) is not read; the cpu partition's nodes are all read, so a job beyond them is still refused."""
    too_big = {"train": {"slurm_partition": "gpu", "gpu": 16, "cpus_per_task": 8},
               "merge": {"slurm_partition": "cpu", "cpus_per_task": 128}}
    assert [error.split(" fit ")[0] for error in node_fit_errors(too_big, parse_sinfo(SINFO))] == [
        "resources of rule train: cpus_per_task=8, gpu=16", "resources of rule merge: cpus_per_task=128"]
    [merge] = node_fit_errors(too_big, parse_sinfo(UNREADABLE))
    assert merge.startswith("resources of rule merge: cpus_per_task=128 fit no node of Slurm partition 'cpu'")
    assert node_fit_errors({**too_big, "score": {"slurm_partition": "a100"}}, parse_sinfo(SINFO + "gpu06\n")) == []


def _fake_slurm(folder: Path, sinfo: str) -> Path:
    """A sinfo printing `sinfo`, and a squeue (the Slurm executor looks for one), in `folder`."""
    folder.mkdir()
    (folder / "sinfo").write_text(f"#!/bin/sh\ncat <<'EOF'\n{sinfo}EOF\n")
    (folder / "squeue").write_text("#!/bin/sh\nexit 0\n")
    for name in ("sinfo", "squeue"):
        (folder / name).chmod(0o755)
    return folder


def test_the_node_check_notes_a_line_it_cannot_read_and_checks_the_others(monkeypatch, tmp_path, capsys):
    monkeypatch.setenv("PATH", f"{_fake_slurm(tmp_path / 'bin', UNREADABLE)}{os.pathsep}{os.environ['PATH']}")
    assert cluster_fit_errors({"train": {"slurm_partition": "gpu", "gpu": 16}}) == []
    notes = capsys.readouterr().err.splitlines()
    assert [note.split(" could not be read")[0] for note in notes] == [
        "note: sinfo line 5 'gpu03|gpu|48|N/A|gpu:h100:8|2-00:00:00'",
        "note: sinfo line 6 'gpu04|gpu|N/A|N/A|gpu:h100:8|2-00:00:00'",
        "note: sinfo line 7 'gpu05|gpu|48'"]


def test_the_dry_run_on_the_slurm_profile_reads_past_a_line_it_cannot_read(tmp_path):
    """The real `snakemake -n --profile profiles/slurm` of the smoke study, its sinfo printing an N/A memory: the
    dry run notes the line and plans the study (before: a raw int() error for 'N/A')."""
    fake = _fake_slurm(tmp_path / "bin", "cpu01|cpu*|64|256000|(null)|infinite\n"
                                             "gpu01|gpu|48|N/A|gpu:a100:8|2-00:00:00\n")
    result = forked_snakemake.snakemake(
        ["-n", "--quiet", "--snakefile", str(REPO / "Snakefile"), "--directory", str(tmp_path), "--configfile",
         str(REPO / "config/smoke.yaml"), "--profile", str(REPO / "profiles/slurm")], timeout=300,
        env={**os.environ, "PATH": f"{fake}{os.pathsep}{os.environ['PATH']}"})
    assert result.returncode == 0, result.stderr[-3000:]
    assert ("note: sinfo line 2 'gpu01|gpu|48|N/A|gpu:a100:8|2-00:00:00' could not be read: memory (MB) 'N/A' is "
            "not a whole number") in result.stderr
    assert "invalid literal" not in result.stderr and "Building DAG of jobs" in result.stdout + result.stderr


def test_slurm_time_limits_read_in_minutes_as_sinfo_prints_them():
    """Slurm's time formats (sbatch(1), --time): minutes, minutes:seconds, hours:minutes:seconds, days-hours,
    days-hours:minutes, days-hours:minutes:seconds; a started minute counts whole."""
    cases = {"infinite": None, "UNLIMITED": None, "30": 30, "30:00": 30, "30:01": 31, "0:30": 1, "2:00:00": 120,
             "2-00:00:00": 2880, "1-12": 2160, "1-12:30": 2190, "1-12:30:01": 2191, "7-00:00:00": 10080}
    assert {text: time_limit_minutes(text) for text in cases} == cases
    [line] = parse_sinfo("gpu07|gpu|48|512000|gpu:8|n/a\n").unread
    assert line.problem == "time limit 'n/a' is neither a Slurm time (e.g. 2-00:00:00) nor infinite"


def test_a_runtime_beyond_the_partitions_time_limit_is_refused_with_the_limit_to_ask():
    """The gpu partition's limit is 2 days (2880 minutes); the cpu partition's is infinite. A solve-rate job sized at
    35,843 minutes (GradAlign's S3 at its upper bound, docs/backends.md) is refused; 2880 minutes fits."""
    nodes = parse_sinfo(SINFO)
    long_jobs = {"solve_rates": {"slurm_partition": "gpu", "gpu": 1, "runtime": 35843},
                 "decontaminate": {"slurm_partition": "cpu", "runtime": 100000}}
    assert node_fit_errors(long_jobs, nodes) == [
        "resources of rule solve_rates: runtime=35843 minutes is longer than the time limit of Slurm partition 'gpu' "
        "(sinfo: 2880 minutes); Slurm would refuse the job or hold it pending for ever (reason PartitionTimeLimit) — "
        "ask at most that, e.g. --set-resources solve_rates:runtime=2880 (a train, score or solve-rate job resumes "
        "from what it kept when a retry follows its time limit), or use another partition"]
    assert node_fit_errors({"solve_rates": {"slurm_partition": "gpu", "gpu": 1, "runtime": 2880}}, nodes) == []


def test_a_gpu_type_no_node_of_the_partition_has_is_refused_with_the_types_it_has():
    """sinfo's GRES types (gpu:a100:8, gpu:v100:2,gpu:t4:2): a job's gpu_model is held to them (the Slurm executor
    asks --gpus=<gpu_model>:<gpu>); an untyped `gpu:4` names none."""
    assert [gres_gpu_types(g) for g in ("(null)", "gpu:4", "gpu:h200:8(S:0-1)", "gpu:v100:2,gpu:t4:2,shard:8")] \
        == [(), (), ("h200",), ("t4", "v100")]
    nodes = parse_sinfo(SINFO)
    assert node_fit_errors({"train": {"slurm_partition": "gpu", "gpu": 8, "gpu_model": "a100"}}, nodes) == []
    errors = node_fit_errors({"train": {"slurm_partition": "gpu", "gpu": 8, "gpu_model": "h200"}}, nodes)
    assert errors == ["resources of rule train: gpu_model='h200' is no GPU type of Slurm partition 'gpu' (sinfo's "
                      "GRES: a100, t4, v100); Slurm would refuse --gpus=h200:8 or hold it pending for ever — name one "
                      "of its types (models.<m>.resources.train.gpu_model, or --set-resources train:gpu_model=...), "
                      "or use another partition"]
