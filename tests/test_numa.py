"""NUMA placement from a given (fake) /sys topology: one process per node bound to its cores with a
thread per core, consecutive processes sharing a node, and nothing at all on one node."""
from __future__ import annotations

import os

import pytest
import torch

from unigraph import numa


def _topology(root, nodes: dict[int, str]):
    for node, cpulist in nodes.items():
        (root / f"node{node}").mkdir(parents=True)
        (root / f"node{node}" / "cpulist").write_text(cpulist + "\n")
    (root / "online").write_text("0-3\n")     # files beside the nodes are ignored
    return root


def test_parse_cpulist():
    assert numa.parse_cpulist("0-3,8-9,5\n") == [0, 1, 2, 3, 5, 8, 9]
    assert numa.parse_cpulist("") == []
    for bad in ("0-", "3-1", "a", "1,,2"):
        with pytest.raises(ValueError, match="malformed"):
            numa.parse_cpulist(bad)


def test_topology_keeps_usable_cores_and_drops_empty_nodes(tmp_path):
    root = _topology(tmp_path, {0: "0-3", 1: "4-7", 2: "", 10: "8-9"})   # node 2: memory only; ids need not be dense
    assert numa.topology(root, allowed=range(10)) == {0: (0, 1, 2, 3), 1: (4, 5, 6, 7), 10: (8, 9)}
    assert numa.topology(root, allowed=[1, 2, 9]) == {0: (1, 2), 10: (9,)}
    assert numa.topology(tmp_path / "absent", allowed=[0, 1]) == {0: (0, 1)}


def test_plan_one_process_per_node_and_shared_nodes(tmp_path):
    root = _topology(tmp_path, {0: "0-3", 1: "4-7"})
    one_each = numa.plan(root=root, allowed=range(8))
    assert [(p.rank, p.node, p.cpus, p.threads) for p in one_each] == [(0, 0, (0, 1, 2, 3), 4), (1, 1, (4, 5, 6, 7), 4)]
    four = numa.plan(4, root=root, allowed=range(8))
    assert [(p.node, p.cpus) for p in four] == [(0, (0, 1)), (0, (2, 3)), (1, (4, 5)), (1, (6, 7))]
    three = numa.plan(3, root=root, allowed=range(8))
    assert [(p.node, p.cpus, p.threads) for p in three] == [(0, (0, 1), 2), (0, (2, 3), 2), (1, (4, 5, 6, 7), 4)]
    with pytest.raises(ValueError, match="at most one process per core"):
        numa.plan(10, root=root, allowed=range(8))


def test_one_node_is_a_no_op(tmp_path):
    root = _topology(tmp_path, {0: "0-3", 1: "4-7"})
    assert numa.plan(root=root, allowed=[0, 1]) is None            # allowed on one node's cores only
    assert numa.plan(2, root=_topology(tmp_path / "single", {0: "0-7"}), allowed=range(8)) is None
    assert numa.plan(root=tmp_path / "absent") is None


def test_bind_pins_the_process_and_sets_threads():
    before, threads = os.sched_getaffinity(0), torch.get_num_threads()
    core = min(before)
    try:
        numa.bind(numa.Placement(0, 0, (core,), 1))
        assert os.sched_getaffinity(0) == {core} and torch.get_num_threads() == 1
    finally:
        os.sched_setaffinity(0, before)
        torch.set_num_threads(threads)


def report_placement() -> tuple:
    return sorted(os.sched_getaffinity(0)), torch.get_num_threads()


@pytest.mark.slow   # spawns two processes: 3-18 s on the shared machine; bind() itself is tested above
def test_launch_binds_every_process(tmp_path):
    cores = sorted(os.sched_getaffinity(0))
    if len(cores) < 2:
        pytest.skip("needs two cores")
    root = _topology(tmp_path, {0: str(cores[0]), 1: str(cores[1])})
    assert numa.launch(report_placement, root=root, timeout=120) == [([cores[0]], 1), ([cores[1]], 1)]
