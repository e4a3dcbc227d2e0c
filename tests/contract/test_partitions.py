"""Partitions on every backend: every partition with its nodes' shapes, one the default,
and a job that names none runs on a node of it."""

from __future__ import annotations

from tests.contract.harness import Harness, final


def test_partitions_give_every_nodes_shape_and_a_job_naming_none_runs_in_the_default(
    backend: Harness,
) -> None:
    partitions = backend.scheduler.partitions()
    names = [partition.name for partition in partitions]
    assert len(names) == len(set(names)) and names
    (default,) = [partition for partition in partitions if partition.default]
    for partition in partitions:
        assert partition.nodes, partition
        for node in partition.nodes:
            assert node.cpus > 0 and node.memory_mb > 0 and node.state, node
    backend.submit("anywhere", "true")
    (component,) = backend.wait("anywhere", final).components
    assert component.partition in (None, default.name)
    assert component.nodes in {node.name for node in default.nodes}
