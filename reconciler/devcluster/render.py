"""Render the dev cluster's config files from a ClusterSpec: pure text, no I/O.

Every key here is one that a real bring-up on Debian 12 with Slurm 22.05 needed, or one
that keeps integration tests fast; the comments say which.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from reconciler.devcluster.daemons import PROGRAM_LINK_DIR
from reconciler.devcluster.spec import HOST_RELEASE, ClusterSpec, Node, PreemptMode


@dataclass(frozen=True)
class ConfigFile:
    path: Path
    text: str
    mode: int
    owner: str


def render_all(cluster: ClusterSpec) -> tuple[ConfigFile, ...]:
    etc = cluster.layout.config_dir
    files = (
        ConfigFile(etc / "slurm.conf", render_slurm_conf(cluster), 0o644, "root"),
        ConfigFile(etc / "gres.conf", render_gres_conf(cluster), 0o644, "root"),
        ConfigFile(etc / "cgroup.conf", render_cgroup_conf(cluster.slurm_release), 0o644, "root"),
        # slurmdbd refuses a config that others can read: it holds the database password.
        ConfigFile(etc / "slurmdbd.conf", render_slurmdbd_conf(cluster), 0o600, "slurm"),
    )
    mariadb = render_mariadb_conf(cluster)
    if mariadb is None:
        return files
    return (*files, ConfigFile(MARIADB_CONF, mariadb, 0o644, "root"))


# Read after Debian's own 50-server.cnf, so its settings win.
MARIADB_CONF = Path("/etc/mysql/mariadb.conf.d/90-recon-dev.cnf")


def render_mariadb_conf(cluster: ClusterSpec) -> str | None:
    """MariaDB settings of a cluster that shares this machine with another's MariaDB;
    None for a cluster that runs it as packaged."""
    if cluster.mariadb_port is None and not cluster.program_suffix:
        return None
    lines = [_HEADER]
    if cluster.mariadb_port is not None:
        lines += ["[mysqld]", "bind-address=127.0.0.1", f"port={cluster.mariadb_port}"]
    if cluster.program_suffix:
        # mysqld_safe reads these two only from its config, never from its command line.
        lines += [
            "[mysqld_safe]",
            f"ledir={PROGRAM_LINK_DIR}",
            f"mysqld={cluster.program('mariadbd')}",
        ]
    return "\n".join(lines) + "\n"


def fake_gpu_paths(cluster: ClusterSpec, node: Node) -> tuple[Path, ...]:
    """The device files standing in for a node's GPUs, minor numbers 0..count-1: those of
    its ``gres``, then those of its slices (the GPU forms' configuration)."""
    if node.gres is None:
        return ()
    count = node.gres.count + sum(kind.count for kind in node.slices)
    return tuple(cluster.layout.fake_gpu_dir / f"nvidia{i}" for i in range(count))


def _files(paths: tuple[Path, ...]) -> str:
    """gres.conf's File= for consecutive fake devices: one path, or a bracketed range."""
    if len(paths) == 1:
        return str(paths[0])
    first, last = (int(p.name.removeprefix("nvidia")) for p in (paths[0], paths[-1]))
    return f"{paths[0].parent}/nvidia[{first}-{last}]"


def render_slurm_conf(cluster: ClusterSpec) -> str:
    layout = cluster.layout
    lines = [
        _HEADER,
        f"ClusterName={cluster.cluster_name}",
        f"SlurmctldHost={cluster.hostname}(127.0.0.1)",
        f"SlurmctldPort={cluster.slurmctld_port}",
        "SlurmUser=slurm",
        "AuthType=auth/munge",
        # A requeued job (preempted, or by `scontrol requeue`) may start again only after
        # the job credential's lifetime (slurm.conf(5)): 120 s by default, 30 s here, so a
        # test of a run requeued several times takes minutes, not a quarter of an hour.
        # Steps launch in milliseconds here; the credential needs no longer.
        "AuthInfo=cred_expire=30",
        f"StateSaveLocation={layout.state_dir}",
        f"SlurmctldPidFile={layout.run_dir / 'slurmctld.pid'}",
        f"SlurmctldLogFile={layout.slurmctld_log}",
        # %n expands to the node name: several slurmd share this host and must not
        # share a pid file, spool directory or log.
        f"SlurmdPidFile={layout.run_dir / 'slurmd-%n.pid'}",
        f"SlurmdSpoolDir={layout.slurmd_spool_root / '%n'}",
        f"SlurmdLogFile={layout.log_dir / 'slurmd-%n.log'}",
        # Lets a node declare more CPUs and memory than the machine has.
        "SlurmdParameters=config_overrides",
        # No systemd here: processes are tracked by their parent pids. task/cgroup puts
        # each step in a cgroup v1 memory group capped at its --mem (cgroup.conf), so the
        # kernel kills a job past its memory and sacct shows OUT_OF_MEMORY. Polling
        # instead (JobAcctGatherParams=OverMemoryKill) ends such a job FAILED on 22.05.
        "ProctrackType=proctrack/linuxproc",
        "TaskPlugin=task/cgroup",
        # Samples each step's processes every 2 s, so sacct reports a step's MaxRSS.
        "JobAcctGatherType=jobacct_gather/linux",
        "JobAcctGatherFrequency=task=2",
        "SelectType=select/cons_tres",
        "SelectTypeParameters=CR_Core_Memory",
        f"DefMemPerCPU={cluster.def_mem_per_cpu_mb}",
        "SchedulerType=sched/backfill",
        # Fast tests: backfill every second, finished jobs leave slurmctld after 5 s,
        # and a node that comes back healthy is returned to service on its own.
        "SchedulerParameters=bf_interval=1",
        "MinJobAge=5",
        "ReturnToService=2",
        f"MaxJobCount={cluster.max_job_count}",
        "AccountingStorageType=accounting_storage/slurmdbd",
        "AccountingStorageHost=localhost",
        f"AccountingStoragePort={cluster.slurmdbd_port}",
        # Without it sacct shows every job's Comment as empty.
        "AccountingStoreFlags=job_comment",
        # A pending job of a higher-tier partition requeues the running jobs of a lower
        # tier on a node both share; partitions say OFF for jobs that are never preempted.
        "PreemptType=preempt/partition_prio",
        f"PreemptMode={PreemptMode.REQUEUE}",
        "JobCompType=jobcomp/none",
        "MpiDefault=none",
        "SwitchType=switch/none",
    ]
    if cluster.slurm_release != HOST_RELEASE:
        # Debian 13's Slurm ships scrontab (Debian 12's does not): `recon cron install
        # --scrontab` is tested there.
        lines.append("ScronParameters=enable")
    gres = sorted(_gres_names(cluster))
    if gres:
        lines.append("GresTypes=" + ",".join(gres))
        # So that sacct's AllocTRES shows the GPUs a job got, not only CPUs and memory.
        lines.append("AccountingStorageTRES=" + ",".join(_accounted(cluster)))
    lines.append("")
    lines += [_node_line(cluster, node) for node in cluster.nodes]
    lines.append("")
    for partition in cluster.partitions:
        default = "YES" if partition.name == cluster.default_partition else "NO"
        lines.append(
            f"PartitionName={partition.name} Nodes={','.join(partition.nodes)} "
            f"Default={default} MaxTime=INFINITE State=UP "
            f"PriorityTier={partition.priority_tier} PreemptMode={partition.preempt_mode}"
        )
    return "\n".join(lines) + "\n"


def _gres_names(cluster: ClusterSpec) -> set[str]:
    names = {node.gres.name for node in cluster.nodes if node.gres is not None}
    if any(node.shards_per_gpu for node in cluster.nodes):
        names.add("shard")
    return names


def _accounted(cluster: ClusterSpec) -> list[str]:
    """AccountingStorageTRES: each GRES, and each slice type, so that sacct's AllocTRES
    says which slice a job held (recon cost values a slice by its type)."""
    typed = {f"gres/gpu:{kind.type}" for node in cluster.nodes for kind in node.slices}
    return [f"gres/{name}" for name in sorted(_gres_names(cluster))] + sorted(typed)


def _node_gres(node: Node) -> list[str]:
    if node.gres is None:
        return []
    kinds = (node.gres, *node.slices)
    items = [f"{kind.name}:{kind.type}:{kind.count}" for kind in kinds]
    if node.shards_per_gpu:
        items.append(f"shard:{node.shards_per_gpu * node.gres.count}")
    return items


def _node_line(cluster: ClusterSpec, node: Node) -> str:
    gres = f" Gres={','.join(_node_gres(node))}" if node.gres else ""
    return (
        f"NodeName={node.name} NodeHostname={cluster.hostname} NodeAddr=127.0.0.1 "
        f"Port={node.port} CPUs={node.cpus} RealMemory={node.real_memory_mb}{gres} "
        "State=UNKNOWN"
    )


def render_gres_conf(cluster: ClusterSpec) -> str:
    lines = [_HEADER]
    for node in cluster.nodes:
        if node.gres is None:
            continue
        # Without File= the node reports zero GPUs and slurmctld drains it
        # ("gres/gpu count reported lower than configured").
        devices = fake_gpu_paths(cluster, node)
        start = 0
        for kind in (node.gres, *node.slices):
            files = _files(devices[start : start + kind.count])
            lines.append(f"NodeName={node.name} Name={kind.name} Type={kind.type} File={files}")
            start += kind.count
        # Shards over the whole GPUs, the same number on each (gres.conf's one line per
        # device file).
        for device in devices[: node.gres.count] if node.shards_per_gpu else ():
            lines.append(
                f"NodeName={node.name} Name=shard Count={node.shards_per_gpu} File={device}"
            )
    return "\n".join(lines) + "\n"


def render_cgroup_conf(release: str = HOST_RELEASE) -> str:
    # cgroup v1 is what this machine mounts (/sys/fs/cgroup/memory); slurmd makes its
    # groups itself under it, one tree per node (slurm_<node>), so automount stays off.
    # 24.11 logs an error for CgroupAutomount at every step ("defunct"): left out there.
    lines = [_HEADER, "CgroupPlugin=cgroup/v1", "CgroupMountpoint=/sys/fs/cgroup"]
    if release == HOST_RELEASE:
        lines.append("CgroupAutomount=no")
    lines.append("IgnoreSystemd=yes")
    # A step's memory group is capped at what the job asked (--mem or DefMemPerCPU).
    lines.append("ConstrainRAMSpace=yes")
    return "\n".join(lines) + "\n"


def render_slurmdbd_conf(cluster: ClusterSpec) -> str:
    layout = cluster.layout
    return (
        "\n".join(
            [
                _HEADER,
                "AuthType=auth/munge",
                "DbdHost=localhost",
                f"DbdPort={cluster.slurmdbd_port}",
                "SlurmUser=slurm",
                f"PidFile={layout.run_dir / 'slurmdbd.pid'}",
                f"LogFile={layout.slurmdbd_log}",
                "StorageType=accounting_storage/mysql",
                "StorageHost=localhost",
                f"StorageLoc={cluster.db_name}",
                f"StorageUser={cluster.db_user}",
                f"StoragePass={cluster.db_password}",
            ]
        )
        + "\n"
    )


_HEADER = "# Written by `recon dev-cluster up`; rewritten on every up, edits are lost."
