"""Bring the dev cluster up and down: decide from what runs now, start or stop the rest.

`up` is level-based like the reconciler itself: every step looks at the machine as it
is (processes in /proc, config text on disk, node states in sinfo), so it is quick on a
running cluster and it repairs what a killed earlier run left behind.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path

from filelock import FileLock, Timeout

from reconciler.devcluster import host
from reconciler.devcluster.accounting import ensure_cluster_records, ensure_database
from reconciler.devcluster.daemons import (
    Daemon,
    all_daemons,
    mariadb,
    munged,
    slurmctld,
    slurmdbd,
    slurmds,
)
from reconciler.devcluster.health import SINFO_FORMAT, NodeState, parse_sinfo, sacct_error
from reconciler.devcluster.processes import is_running, log_tail, start, stop
from reconciler.devcluster.render import render_all
from reconciler.devcluster.runner import run
from reconciler.devcluster.spec import ClusterSpec
from reconciler.errors import DevClusterError

Report = Callable[[str], None]

# Two `up`s at once (two test sessions, say) would start every daemon twice.
_LOCK = Path("/run/recon-dev-cluster.lock")


def up(cluster: ClusterSpec, *, timeout: float = 180, report: Report = print) -> tuple[str, ...]:
    """Make the cluster run and wait until it serves jobs. Returns what it changed."""
    host.check_platform()
    if host.ensure_packages():
        report("installed " + " ".join(host.PACKAGES))
    with _locked():
        return _Up(cluster, time.monotonic() + timeout, report).run()


def down(cluster: ClusterSpec, *, report: Report = print) -> tuple[str, ...]:
    """Cancel every job and stop every daemon. Returns what it stopped."""
    host.check_platform()
    actions = []
    with _locked():
        if is_running(slurmctld(cluster)):
            cancelled = _cancel_all_jobs()
            if cancelled:
                actions.append(f"cancelled {cancelled} job(s)")
                report(actions[-1])
        for daemon in reversed(all_daemons(cluster)):
            if is_running(daemon):
                stop(daemon)
                actions.append(f"stopped {daemon.name}")
                report(actions[-1])
    return tuple(actions)


class _Up:
    """One `up` pass: the steps in start order, sharing one deadline and one action log."""

    def __init__(self, cluster: ClusterSpec, deadline: float, report: Report) -> None:
        self.cluster = cluster
        self.deadline = deadline
        self.report = report
        self.actions: list[str] = []

    def run(self) -> tuple[str, ...]:
        cluster = self.cluster
        host.prepare_directories(cluster)
        host.ensure_munge_key()
        host.ensure_fake_gpus(cluster)
        host.ensure_program_links(cluster)
        if host.ensure_mariadb_datadir():
            self._did(f"initialised MariaDB's data directory {host.MARIADB_DATADIR}")
        changed = host.write_configs(render_all(cluster))
        dbd_conf = cluster.layout.config_dir / "slurmdbd.conf"
        for path in sorted(changed):
            self._did(f"wrote {path}")

        self._ensure(munged(cluster), _munge_error)
        self._ensure(mariadb(cluster), _mariadb_error)
        ensure_database(cluster)

        dbd = slurmdbd(cluster)
        if dbd_conf in changed:
            self._stop_if_running(dbd, "slurmdbd.conf changed")
        self._ensure(dbd, sacct_error)
        for command in ensure_cluster_records(cluster):
            self._did(command)

        controller, nodes = slurmctld(cluster), slurmds(cluster)
        if changed - {dbd_conf}:
            # Node and partition definitions are only read at start in 22.05.
            for daemon in (*nodes, controller):
                self._stop_if_running(daemon, "slurm.conf changed")
        self._ensure(controller, _slurmctld_error)
        for node in nodes:
            if not is_running(node):
                start(node)
                self._did(f"started {node.name}")
        self._wait_for_nodes()
        return tuple(self.actions)

    def _did(self, action: str) -> None:
        self.actions.append(action)
        self.report(action)

    def _ensure(self, daemon: Daemon, probe: Callable[[], str | None]) -> None:
        if not is_running(daemon):
            start(daemon)
            self._did(f"started {daemon.name}")
        self._wait(daemon.name, probe, daemon)

    def _stop_if_running(self, daemon: Daemon, why: str) -> None:
        if is_running(daemon):
            stop(daemon)
            self._did(f"stopped {daemon.name}: {why}")

    def _wait(self, what: str, probe: Callable[[], str | None], daemon: Daemon) -> None:
        """Poll `probe` (None means ready, text says why not) until ready or the deadline."""
        while True:
            problem = probe()
            if problem is None:
                return
            if not is_running(daemon):
                raise DevClusterError(
                    f"{daemon.name} exited while starting: {problem}\n{log_tail(daemon.log)}"
                )
            if time.monotonic() > self.deadline:
                raise DevClusterError(
                    f"{what} not ready in time: {problem}\n{log_tail(daemon.log)}"
                )
            time.sleep(0.5)

    def _wait_for_nodes(self) -> None:
        resumed: set[str] = set()
        while True:
            done = run(
                ["/usr/bin/sinfo", "--noheader", "--Node", f"--format={SINFO_FORMAT}"],
                check=False,
            )
            states = {node.name: node for node in parse_sinfo(done.stdout)}
            waiting = [
                name
                for name in self.cluster.node_names
                if name not in states or not states[name].ready
            ]
            if not waiting:
                return
            for name in waiting:
                # A node drained or downed by an earlier run stays so until resumed;
                # resume once, so a node that drains again is reported, not looped on.
                if name in states and states[name].needs_resume and name not in resumed:
                    run(
                        ["/usr/bin/scontrol", "update", f"nodename={name}", "state=resume"],
                        check=False,
                    )
                    resumed.add(name)
                    self._did(f"resumed node {name} (was {states[name].state})")
            if time.monotonic() > self.deadline:
                self._nodes_not_ready(waiting, states)
            time.sleep(0.5)

    def _nodes_not_ready(self, waiting: list[str], states: dict[str, NodeState]) -> None:
        reasons = run(
            ["/usr/bin/sinfo", "--list-reasons", "--noheader", "--Node", "--format=%N %t: %E"],
            check=False,
        ).stdout
        node_logs = "\n".join(log_tail(self.cluster.layout.slurmd_log(n), 10) for n in waiting)
        raise DevClusterError(
            "nodes not idle in time: "
            + ", ".join(f"{n} ({states[n].state if n in states else 'missing'})" for n in waiting)
            + (f"\n{reasons.rstrip()}" if reasons.strip() else "")
            + f"\n{node_logs}\n{log_tail(self.cluster.layout.slurmctld_log, 10)}"
        )


def _munge_error() -> str | None:
    credential = run(["/usr/bin/munge", "--no-input"], check=False)
    if not credential.ok:
        return credential.stderr.strip()
    decoded = run(["/usr/bin/unmunge"], input=credential.stdout, check=False)
    return None if decoded.ok else decoded.stderr.strip()


def _mariadb_error() -> str | None:
    done = run(["/usr/bin/mariadb-admin", "--user=root", "ping"], check=False)
    return None if done.ok else done.stderr.strip()


def _slurmctld_error() -> str | None:
    done = run(["/usr/bin/scontrol", "ping"], check=False)
    return None if done.ok and "UP" in done.stdout else done.stdout.strip()


def _cancel_all_jobs() -> int:
    """Cancel every job and give slurmctld a little time to kill their processes."""
    listed = run(["/usr/bin/squeue", "--noheader", "--format=%A"], check=False)
    jobs = listed.stdout.split() if listed.ok else []
    if not jobs:
        return 0
    run(["/usr/bin/scancel", *jobs], check=False)
    deadline = time.monotonic() + 15
    while time.monotonic() < deadline:
        if not run(["/usr/bin/squeue", "--noheader"], check=False).stdout.strip():
            break
        time.sleep(0.5)
    return len(jobs)


@contextmanager
def _locked() -> Iterator[None]:
    try:
        with FileLock(str(_LOCK), timeout=600):
            yield
    except Timeout as error:
        raise DevClusterError(f"another recon dev-cluster command still holds {_LOCK}") from error
