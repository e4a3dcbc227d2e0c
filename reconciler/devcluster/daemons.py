"""The daemons of the dev cluster: how each is started and how to recognise it running.

Pure description. A daemon is recognised by its command line in /proc rather than by
its pid file: after a killed run the pid files lie (stale, or pointing at a reused pid),
while the command line of a live process does not.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path, PurePath

from reconciler.devcluster.spec import ClusterSpec

# Where the links of program_links live: on PATH for root, outside the packages' files.
PROGRAM_LINK_DIR = Path("/usr/local/sbin")
# Slurm's daemons are not among them: each learns which daemon it is from its own name
# (24.11's slurmctld refuses to start as `slurmctld-24.11`), so they keep it, and only
# their root directory tells the clusters' apart (processes.pids_of).
_PACKAGED_PROGRAMS = ("/usr/sbin/munged", "/usr/sbin/mariadbd")


@dataclass(frozen=True)
class Daemon:
    name: str
    programs: frozenset[str]
    start: tuple[str, ...]
    log: Path
    # slurmd only: every virtual node is one slurmd process started with `-N <node>`.
    node: str | None = None

    def matches(self, argv: tuple[str, ...]) -> bool:
        if not argv or PurePath(argv[0]).name not in self.programs:
            return False
        return self.node is None or _node_argument(argv) == self.node


def _node_argument(argv: tuple[str, ...]) -> str | None:
    for i, arg in enumerate(argv):
        if arg == "-N" and i + 1 < len(argv):
            return argv[i + 1]
        if arg.startswith("-N") and len(arg) > 2:
            return arg[2:]
    return None


def program_path(cluster: ClusterSpec, path: str) -> str:
    """Where a daemon's program is started from: the packaged path, or a link to it
    named with the cluster's program suffix (see ClusterSpec.program_suffix)."""
    if not cluster.program_suffix:
        return path
    return str(PROGRAM_LINK_DIR / cluster.program(PurePath(path).name))


def program_links(cluster: ClusterSpec) -> dict[Path, Path]:
    """The links program_path starts daemons through: link to packaged program."""
    if not cluster.program_suffix:
        return {}
    return {
        PROGRAM_LINK_DIR / cluster.program(PurePath(path).name): Path(path)
        for path in _PACKAGED_PROGRAMS
    }


def munged(cluster: ClusterSpec) -> Daemon:
    return Daemon(
        name="munged",
        programs=frozenset({cluster.program("munged")}),
        # --force: a killed munged leaves its socket behind, and munged would refuse to
        # start over it. Only ever started after checking that no munged runs.
        start=(
            "/usr/sbin/runuser",
            "-u",
            "munge",
            "--",
            program_path(cluster, "/usr/sbin/munged"),
            "--force",
        ),
        log=Path("/var/log/munge/munged.log"),
    )


def mariadb(cluster: ClusterSpec) -> Daemon:
    log = cluster.layout.mysql_log
    return Daemon(
        name="mariadb",
        programs=frozenset({cluster.program("mariadbd"), cluster.program("mysqld")}),
        # mysqld_safe does not daemonize: --nowatch makes it return once mariadbd is
        # launched, and setsid detaches that from our terminal's process group. It takes
        # the program to launch (a suffixed one) only from its config file: render.py.
        start=(
            "/usr/bin/setsid",
            "/usr/bin/mysqld_safe",
            "--user=mysql",
            "--nowatch",
            f"--log-error={log}",
        ),
        log=log,
    )


def slurmdbd(cluster: ClusterSpec) -> Daemon:
    return Daemon(
        name="slurmdbd",
        programs=frozenset({"slurmdbd"}),
        start=("/usr/sbin/runuser", "-u", "slurm", "--", "/usr/sbin/slurmdbd"),
        log=cluster.layout.slurmdbd_log,
    )


def slurmctld(cluster: ClusterSpec) -> Daemon:
    # Started as root, it switches to SlurmUser itself once it has read slurm.conf.
    return Daemon(
        name="slurmctld",
        programs=frozenset({"slurmctld"}),
        start=("/usr/sbin/slurmctld",),
        log=cluster.layout.slurmctld_log,
    )


def slurmds(cluster: ClusterSpec) -> tuple[Daemon, ...]:
    return tuple(
        Daemon(
            name=f"slurmd {node}",
            programs=frozenset({"slurmd"}),
            start=("/usr/sbin/slurmd", "-N", node),
            log=cluster.layout.slurmd_log(node),
            node=node,
        )
        for node in cluster.node_names
    )


def all_daemons(cluster: ClusterSpec) -> tuple[Daemon, ...]:
    """Every daemon, in the order they must start (each needs the ones before it)."""
    return (
        munged(cluster),
        mariadb(cluster),
        slurmdbd(cluster),
        slurmctld(cluster),
        *slurmds(cluster),
    )
