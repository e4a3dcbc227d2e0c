"""The dev cluster's pure decisions: node states, problems, daemon recognition, platform."""

from __future__ import annotations

import pytest

from reconciler.devcluster import host
from reconciler.devcluster.cli import render_health
from reconciler.devcluster.daemons import all_daemons, mariadb, slurmds
from reconciler.devcluster.health import (
    ClusterHealth,
    DaemonStatus,
    NodeState,
    find_problems,
    parse_sinfo,
)
from reconciler.devcluster.spec import default_cluster

CLUSTER = default_cluster("testhost")


def test_parse_sinfo_strips_the_default_partition_marker_and_joins_partitions() -> None:
    # Literal output on the dev cluster: gpu1 is listed once per partition it is in.
    text = "cpu1|cpu*|idle\ncpu2|cpu*|mix\ngpu1|preempt|drain\ngpu1|gpu|drain\n"
    assert parse_sinfo(text) == (
        NodeState("cpu1", ("cpu",), "idle"),
        NodeState("cpu2", ("cpu",), "mix"),
        NodeState("gpu1", ("gpu", "preempt"), "drain"),
    )
    assert parse_sinfo("") == ()


@pytest.mark.parametrize(
    ("state", "ready", "needs_resume"),
    [
        ("idle", True, False),
        ("mix", True, False),
        ("alloc", True, False),
        ("comp", True, False),
        ("idle*", False, False),  # registered once, not responding now
        ("unk*", False, False),  # slurmd has not registered yet
        ("down*", False, False),  # resuming it before slurmd answers would not stick
        ("down", False, True),
        ("drain", False, True),
        ("drng", False, True),
        ("drain*", False, False),
        ("idle~", False, False),  # powered down
        ("mix-", True, False),  # backfill has planned jobs for it
    ],
)
def test_node_state_readiness(state: str, ready: bool, needs_resume: bool) -> None:
    node = NodeState("n", ("p",), state)
    assert (node.ready, node.needs_resume) == (ready, needs_resume)


def all_up() -> tuple[DaemonStatus, ...]:
    return tuple(DaemonStatus(d.name, (100 + i,)) for i, d in enumerate(all_daemons(CLUSTER)))


IDLE = tuple(NodeState(n, ("cpu",), "idle") for n in CLUSTER.node_names)


def test_no_problems_when_everything_runs_and_nodes_are_idle_or_busy() -> None:
    nodes = (*IDLE[:2], NodeState("gpu1", ("gpu",), "alloc"))
    assert find_problems(CLUSTER, all_up(), nodes, ()) == ()


def test_problems_name_each_down_daemon_missing_node_and_bad_state() -> None:
    daemons = tuple(DaemonStatus(d.name, ()) if d.name == "slurmdbd" else d for d in all_up())
    nodes = (IDLE[0], NodeState("cpu2", ("cpu",), "drain"))
    assert find_problems(CLUSTER, daemons, nodes, ("sacct failed: x",)) == (
        "slurmdbd is not running",
        "sacct failed: x",
        "node gpu1 is not in sinfo",
        "node cpu2 is drain",
    )


def test_nodes_not_asked_are_not_reported_missing() -> None:
    down = tuple(DaemonStatus(s.name, ()) for s in all_up())
    assert find_problems(CLUSTER, down, None, ()) == tuple(f"{s.name} is not running" for s in down)


def test_render_health_lists_daemons_nodes_and_what_to_do() -> None:
    daemons = all_up()
    health = ClusterHealth(
        daemons, (NodeState("cpu1", ("cpu",), "down*"),), ("node cpu1 is down*",)
    )
    text = render_health(health)
    assert "slurmctld    up    pid 103" in text
    assert "cpu1     cpu          down*" in text
    assert text.endswith("start it with: sudo recon dev-cluster up")
    assert "problems" not in render_health(ClusterHealth(daemons, IDLE, ()))


@pytest.mark.parametrize(
    ("argv", "node"),
    [
        (("/usr/sbin/slurmd", "-N", "cpu2"), "cpu2"),
        (("slurmd", "-Ncpu2"), "cpu2"),
        (("/usr/sbin/slurmd", "-N", "cpu1"), "cpu1"),
        (("/usr/sbin/slurmd",), None),
        (("slurmstepd: [4.batch]",), None),
        (("/usr/bin/vim", "-N", "cpu2"), None),
    ],
)
def test_each_slurmd_is_recognised_by_its_node_argument(
    argv: tuple[str, ...], node: str | None
) -> None:
    matched = [d.node for d in slurmds(CLUSTER) if d.matches(argv)]
    assert matched == ([node] if node else [])


def test_mariadb_is_recognised_under_either_program_name() -> None:
    daemon = mariadb(CLUSTER)
    assert daemon.matches(("/usr/sbin/mariadbd", "--basedir=/usr"))
    assert daemon.matches(("/usr/sbin/mysqld",))
    assert not daemon.matches(("/bin/sh", "/usr/bin/mysqld_safe"))
    assert not daemon.matches(())


@pytest.mark.parametrize(
    ("os_release", "expected"),
    [
        ('PRETTY_NAME="Debian GNU/Linux 12 (bookworm)"\nID=debian\n', True),
        ("ID=ubuntu\nID_LIKE=debian\n", True),
        ('ID=linuxmint\nID_LIKE="ubuntu debian"\n', True),
        ('ID="fedora"\n', False),
        ('ID=rocky\nID_LIKE="rhel centos fedora"\n', False),
        ("", False),
    ],
)
def test_is_debian_like(os_release: str, expected: bool) -> None:
    assert host.is_debian_like(os_release) is expected


def test_platform_problem_asks_for_root_on_debian_and_for_debian_elsewhere() -> None:
    debian = "ID=debian\n"
    assert host.platform_problem(debian, euid=0) is None
    assert "must run as root: sudo recon dev-cluster up" in str(
        host.platform_problem(debian, euid=1000)
    )
    assert "needs Debian or Ubuntu" in str(host.platform_problem('ID="fedora"\n', euid=0))
