"""The cluster's nodes as `sinfo` lists them, and the jobs no node of their partition can run
(dataflex_rl/study/slurm_nodes.py): hand-written sinfo lines, so that these run without Slurm;
tests/test_slurm_cluster.py asks a real one."""
from dataflex_rl.study.slurm_nodes import Node, cluster_nodes, gres_gpus, node_fit_errors, parse_sinfo

SINFO = """\
cpu01|cpu*|64|256000|(null)
cpu02|cpu*|32|512000+|(null)
gpu01|gpu|48|1024000|gpu:a100:8(S:0-1)
gpu02|gpu|48|512000|gpu:v100:2,gpu:t4:2,shard:8
"""


def test_sinfo_lines_give_each_node_its_partition_cpus_memory_and_gpus():
    assert parse_sinfo(SINFO) == [Node("cpu01", "cpu", True, 64, 256000, 0), Node("cpu02", "cpu", True, 32, 512000, 0),
                                  Node("gpu01", "gpu", False, 48, 1024000, 8), Node("gpu02", "gpu", False, 48, 512000, 4)]
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
    fake.write_text("#!/bin/sh\nprintf 'node1|debug*|4|8000|(null)\\n'\n")
    assert cluster_nodes() == [Node("node1", "debug", True, 4, 8000, 0)]
