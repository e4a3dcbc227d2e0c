"""The sinfo parser on literal text, and SlurmScheduler.partitions() on a fake runner."""

from __future__ import annotations

import subprocess

import pytest

from reconciler.errors import ObservationError
from reconciler.scheduler.partitions import Gres, Node, Partition
from reconciler.scheduler.slurm import SlurmScheduler
from reconciler.scheduler.slurm.sinfo import SINFO_FIELDS, parse_sinfo, sinfo
from reconciler.scheduler.slurm.testing import ScriptedRunner

# sinfo --noheader --Node --all --format=%P|%N|%c|%m|%G|%f|%T, as the dev cluster prints it.
DEV_CLUSTER = """\
cpu*|cpu1|8|16000|(null)|(null)|idle
cpu*|cpu2|8|16000|(null)|(null)|idle
gpu|gpu1|8|16000|gpu:a100:4|(null)|idle
"""

# A larger cluster: socket-bound gres, untyped gres, two types on one node, a socket list
# holding a comma, a non-GPU gres, features, a node in two partitions, drained and down
# nodes, and a default partition that is not listed first.
BIG_CLUSTER = """\
gpu|g001|64|512000|gpu:a100:4(S:0-1)|ib,haswell|mixed
gpu|g002|64|512000|gpu:a100:2(S:0,2),gpu:v100:2(S:1)|ib|drained
gpu|g003|32|256000|gpu:4|(null)|down*
long|c001|48|192000|(null)|ib,haswell|allocated
batch*|c001|48|192000|(null)|ib,haswell|allocated
batch*|c002|48|192000|bandwidth:lustre:4G,gpu:t4:1|(null)|idle
"""


def by_name(parsed: tuple[Partition, ...]) -> dict[str, Partition]:
    return {partition.name: partition for partition in parsed}


def test_the_format_asks_for_every_field_the_parser_reads() -> None:
    command = sinfo()
    assert command[:4] == ["sinfo", "--noheader", "--Node", "--all"]
    assert command[4] == "--format=%P|%N|%c|%m|%G|%f|%T"
    assert len(SINFO_FIELDS) == 7


def test_dev_cluster_partitions_nodes_and_default() -> None:
    parsed = parse_sinfo(DEV_CLUSTER)
    assert parsed.rejected == ()
    assert parsed.partitions == (
        Partition(
            name="cpu",
            default=True,
            nodes=(
                Node(name="cpu1", cpus=8, memory_mb=16000, state="idle"),
                Node(name="cpu2", cpus=8, memory_mb=16000, state="idle"),
            ),
        ),
        Partition(
            name="gpu",
            default=False,
            nodes=(
                Node(
                    name="gpu1",
                    cpus=8,
                    memory_mb=16000,
                    gres=(Gres(name="gpu", type="a100", count=4),),
                    state="idle",
                ),
            ),
        ),
    )


def test_gres_forms() -> None:
    parts = by_name(parse_sinfo(BIG_CLUSTER).partitions)
    g001, g002, g003 = parts["gpu"].nodes
    assert g001.gres == (Gres(name="gpu", type="a100", count=4),)
    assert g002.gres == (
        Gres(name="gpu", type="a100", count=2),
        Gres(name="gpu", type="v100", count=2),
    )
    assert g003.gres == (Gres(name="gpu", type=None, count=4),)
    c002 = parts["batch"].nodes[1]
    assert c002.gres == (
        Gres(name="bandwidth", type="lustre", count=4 * 2**30),
        Gres(name="gpu", type="t4", count=1),
    )


def test_gpus_by_type_any_case_and_untyped_counts_every_type() -> None:
    g002 = by_name(parse_sinfo(BIG_CLUSTER).partitions)["gpu"].nodes[1]
    assert g002.gpus("A100") == 2
    assert g002.gpus("v100") == 2
    assert g002.gpus("h100") == 0
    assert g002.gpus() == 4
    c002 = by_name(parse_sinfo(BIG_CLUSTER).partitions)["batch"].nodes[1]
    assert c002.gpus() == 1  # the bandwidth gres is no GPU


def test_features_and_null_features() -> None:
    parts = by_name(parse_sinfo(BIG_CLUSTER).partitions)
    assert parts["gpu"].nodes[0].features == ("ib", "haswell")
    assert parts["gpu"].nodes[2].features == ()


def test_node_in_two_partitions_appears_in_both() -> None:
    parts = by_name(parse_sinfo(BIG_CLUSTER).partitions)
    assert [node.name for node in parts["long"].nodes] == ["c001"]
    assert [node.name for node in parts["batch"].nodes] == ["c001", "c002"]
    assert parts["long"].nodes[0] == parts["batch"].nodes[0]


def test_default_partition_need_not_come_first() -> None:
    parsed = parse_sinfo(BIG_CLUSTER).partitions
    assert [(p.name, p.default) for p in parsed] == [
        ("gpu", False),
        ("long", False),
        ("batch", True),
    ]


def test_drained_and_down_nodes_are_kept_and_marked() -> None:
    nodes = {node.name: node for node in by_name(parse_sinfo(BIG_CLUSTER).partitions)["gpu"].nodes}
    assert set(nodes) == {"g001", "g002", "g003"}
    assert nodes["g002"].state == "drained"
    assert nodes["g003"].state == "down*"
    assert [name for name, node in nodes.items() if node.unavailable] == ["g002", "g003"]


@pytest.mark.parametrize(
    ("state", "unavailable"),
    [
        ("idle", False),
        ("mixed", False),
        ("allocated", False),
        ("idle~", False),  # powered off, powered up on demand
        ("draining", True),
        ("drained", True),
        ("down", True),
        ("idle*", True),  # not responding
        ("idle+drain", True),
        ("fail", True),
    ],
)
def test_unavailable_states(state: str, unavailable: bool) -> None:
    assert Node(name="n", cpus=1, memory_mb=1, state=state).unavailable is unavailable


@pytest.mark.parametrize(
    ("line", "why"),
    [
        ("cpu*|cpu1|8|16000|(null)|(null)", "expected 7"),
        ("cpu*|cpu1|8|16000|(null)|(null)|idle|extra", "expected 7"),
        ("cpu*|cpu1|8+|16000|(null)|(null)|idle", "CPU count"),
        ("cpu*|cpu1|8|lots|(null)|(null)|idle", "memory"),
        ("cpu*|cpu1|8|16000|gpu:a100:many|(null)|idle", "gres"),
        ("cpu*|cpu1|8|16000|:4|(null)|idle", "gres"),
        ("|cpu1|8|16000|(null)|(null)|idle", "no partition or node name"),
    ],
)
def test_unreadable_lines_are_rejected_not_guessed(line: str, why: str) -> None:
    parsed = parse_sinfo(DEV_CLUSTER + line + "\n")
    assert [bad.line for bad in parsed.rejected] == [line]
    assert why in parsed.rejected[0].why
    assert [node.name for p in parsed.partitions for node in p.nodes] == ["cpu1", "cpu2", "gpu1"]


def test_empty_output_has_no_partitions() -> None:
    assert parse_sinfo("\n").partitions == ()


def sinfo_answering(code: int, stdout: str, stderr: str = "") -> ScriptedRunner:
    """Answers sinfo only: any other command fails the test."""
    return ScriptedRunner(sinfo=[subprocess.CompletedProcess([], code, stdout, stderr)])


def test_scheduler_reads_partitions_with_one_sinfo_call() -> None:
    runner = sinfo_answering(0, DEV_CLUSTER)
    partitions = SlurmScheduler(runner).partitions()
    assert [argv for argv, _ in runner.calls] == [sinfo()]
    assert [p.name for p in partitions] == ["cpu", "gpu"]


def test_scheduler_refuses_a_partial_picture() -> None:
    runner = sinfo_answering(0, DEV_CLUSTER + "gpu|gpu2|8|16000|gpu:a100:x|(null)|idle\n")
    with pytest.raises(ObservationError, match=r"cannot read: unknown gres .*gpu2"):
        SlurmScheduler(runner).partitions()


def test_scheduler_reports_sinfo_failing() -> None:
    runner = sinfo_answering(1, "", "sinfo: error: Unable to contact slurm controller")
    with pytest.raises(ObservationError, match=r"sinfo failed.*Unable to contact"):
        SlurmScheduler(runner).partitions()
    assert len(runner.calls) == 1
