"""Is the dev cluster up? Daemons running, every node usable, accounting answering.

`up`, `status` and the integration-test fixture all ask this one question, here.
"""

from __future__ import annotations

from dataclasses import dataclass

from reconciler.devcluster.daemons import all_daemons, slurmctld, slurmdbd
from reconciler.devcluster.processes import pids_of
from reconciler.devcluster.runner import run
from reconciler.devcluster.spec import ClusterSpec

# sinfo's compact states (%t) in which a node runs jobs or is free to.
_READY = frozenset({"idle", "mix", "alloc", "comp", "plnd"})
# States an operator clears with `scontrol update state=resume`.
_RESUMABLE = frozenset({"drain", "drng", "drained", "down"})
# Suffixes sinfo appends to a state: "*" means the node is not responding;
# the others are about power saving, reboots and maintenance.
_FLAGS = "*~#!%$@^-"

SINFO_FORMAT = "%N|%P|%t"


@dataclass(frozen=True)
class NodeState:
    name: str
    # A node may be in several partitions (gpu1: gpu and preempt), shown sorted.
    partitions: tuple[str, ...]
    state: str

    @property
    def responding(self) -> bool:
        return "*" not in self.state

    @property
    def base_state(self) -> str:
        return self.state.rstrip(_FLAGS)

    @property
    def ready(self) -> bool:
        # "-" only says backfill has planned jobs for the node; every other flag
        # (not responding, powered off, rebooting) means it cannot run them now.
        flags = self.state[len(self.base_state) :]
        return self.base_state in _READY and set(flags) <= {"-"}

    @property
    def needs_resume(self) -> bool:
        # A node that is not responding would only go down again: wait for its slurmd.
        return self.responding and self.base_state in _RESUMABLE


def parse_sinfo(text: str) -> tuple[NodeState, ...]:
    """Parse `sinfo --noheader --Node --format='%N|%P|%t'`, one line per node and partition
    (the default partition has a '*'), into one state per node, in order of first line."""
    partitions: dict[str, set[str]] = {}
    states: dict[str, str] = {}
    for line in text.splitlines():
        if not line.strip():
            continue
        name, partition, state = line.strip().split("|")
        partitions.setdefault(name, set()).add(partition.rstrip("*"))
        states[name] = state  # a node has one state, whichever partition lists it
    return tuple(NodeState(name, tuple(sorted(partitions[name])), states[name]) for name in states)


@dataclass(frozen=True)
class DaemonStatus:
    name: str
    pids: tuple[int, ...]

    @property
    def up(self) -> bool:
        return bool(self.pids)


@dataclass(frozen=True)
class ClusterHealth:
    daemons: tuple[DaemonStatus, ...]
    nodes: tuple[NodeState, ...]
    problems: tuple[str, ...]

    @property
    def healthy(self) -> bool:
        return not self.problems


def find_problems(
    cluster: ClusterSpec,
    daemons: tuple[DaemonStatus, ...],
    nodes: tuple[NodeState, ...] | None,
    errors: tuple[str, ...],
) -> tuple[str, ...]:
    """Everything that keeps the cluster from serving jobs; `nodes` None means not asked."""
    problems = [f"{daemon.name} is not running" for daemon in daemons if not daemon.up]
    problems += errors
    if nodes is not None:
        listed = {node.name for node in nodes}
        problems += [f"node {n} is not in sinfo" for n in cluster.node_names if n not in listed]
        problems += [f"node {node.name} is {node.state}" for node in nodes if not node.ready]
    return tuple(problems)


def check_health(cluster: ClusterSpec) -> ClusterHealth:
    daemons = tuple(DaemonStatus(d.name, pids_of(d)) for d in all_daemons(cluster))
    up = {d.name for d in daemons if d.up}
    errors: list[str] = []
    nodes: tuple[NodeState, ...] | None = None
    # Clients retry for many seconds against a daemon that is not there: ask only live ones.
    if slurmctld(cluster).name in up:
        done = run(
            ["/usr/bin/sinfo", "--noheader", "--Node", f"--format={SINFO_FORMAT}"],
            check=False,
            timeout=30,
        )
        if done.ok:
            nodes = parse_sinfo(done.stdout)
        else:
            errors.append(f"sinfo failed: {done.stderr.strip()}")
    if slurmdbd(cluster).name in up:
        error = sacct_error()
        if error:
            errors.append(error)
    problems = find_problems(cluster, daemons, nodes, tuple(errors))
    return ClusterHealth(daemons, nodes or (), problems)


def sacct_error() -> str | None:
    """Why sacct cannot list jobs, or None when it can (slurmdbd and the database answer)."""
    done = run(
        ["/usr/bin/sacct", "--noheader", "--parsable2", "--allocations", "--starttime=now-1hours"],
        check=False,
        timeout=30,
    )
    return None if done.ok else f"sacct failed: {done.stderr.strip() or done.returncode}"
