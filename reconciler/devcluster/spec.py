"""What the dev cluster is: its nodes, partitions, account, and where its files live.

Plain frozen data, no I/O: the renderers turn it into config text and the lifecycle
module acts on it. Tests build their own instances instead of touching the machine.
"""

from __future__ import annotations

from enum import StrEnum
from pathlib import Path

from pydantic import BaseModel, ConfigDict, Field, model_validator

# The Slurm the host's own Debian packages give (Debian 12); the default everywhere.
HOST_RELEASE = "22.05"
# Debian 13's, run in a Debian 13 root (reconciler/devcluster/rootfs.py).
ROOT_RELEASE = "24.11"
RELEASES = (HOST_RELEASE, ROOT_RELEASE)


class _Frozen(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")


class Gres(_Frozen):
    """Generic resources on one node, backed by fake device files (no real hardware)."""

    name: str = "gpu"
    type: str
    count: int = Field(gt=0)


class Node(_Frozen):
    name: str
    cpus: int = Field(gt=0)
    real_memory_mb: int = Field(gt=0)
    # Every slurmd of the cluster runs on this one host, so each needs its own port.
    port: int = Field(gt=1024, lt=65536)
    gres: Gres | None = None
    # More GPU types on the node, each on fake device files after those of ``gres``
    # (MIG-like slices: `1g.10gb`, `3g.40gb`), and GPU shards over ``gres``'s devices
    # (``shards_per_gpu`` each): the GPU forms' configuration, off unless asked for
    # (``gpu_forms``).
    slices: tuple[Gres, ...] = ()
    shards_per_gpu: int = Field(default=0, ge=0)


class PreemptMode(StrEnum):
    """What Slurm does to a job of this partition when a higher tier's job needs its node."""

    OFF = "OFF"
    # The job is stopped and put back in the queue under the same id (sacct: PREEMPTED,
    # then a new record of the same job once it starts again).
    REQUEUE = "REQUEUE"


class Partition(_Frozen):
    name: str
    nodes: tuple[str, ...] = Field(min_length=1)
    # With PreemptType=preempt/partition_prio, a pending job of a higher tier preempts
    # running jobs of a lower tier whose PreemptMode is not OFF, on the nodes both share.
    priority_tier: int = Field(default=1, ge=1)
    preempt_mode: PreemptMode = PreemptMode.OFF


class Layout(_Frozen):
    """Where the daemons read config and write state, logs and pid files.

    /etc/slurm is not a choice: it is where the Debian binaries look for slurm.conf.
    """

    config_dir: Path = Path("/etc/slurm")
    run_dir: Path = Path("/run/slurm")
    log_dir: Path = Path("/var/log/slurm")
    state_dir: Path = Path("/var/spool/slurmctld")
    slurmd_spool_root: Path = Path("/var/spool/slurmd")
    fake_gpu_dir: Path = Path("/dev/fakegpu")
    mysql_log: Path = Path("/var/log/mysql/error.log")

    @property
    def slurmctld_log(self) -> Path:
        return self.log_dir / "slurmctld.log"

    @property
    def slurmdbd_log(self) -> Path:
        return self.log_dir / "slurmdbd.log"

    def slurmd_log(self, node: str) -> Path:
        return self.log_dir / f"slurmd-{node}.log"


class ClusterSpec(_Frozen):
    cluster_name: str
    # The Slurm release the cluster runs: the config keys and daemons' programs differ.
    slurm_release: str = HOST_RELEASE
    hostname: str
    account: str  # root's default account
    # More accounts root belongs to, so a job can be held under an account other than the
    # default one and sacct's Account tells them apart.
    other_accounts: tuple[str, ...] = ()
    nodes: tuple[Node, ...]
    # A node may be in several partitions: that is how one is preempted by another.
    partitions: tuple[Partition, ...]
    default_partition: str
    # Without a default, a job that does not ask for memory is given the whole node.
    def_mem_per_cpu_mb: int = Field(gt=0)
    max_job_count: int = Field(gt=0)
    slurmctld_port: int = 6817
    slurmdbd_port: int = 6819
    db_name: str = "slurm_acct_db"
    db_user: str = "slurm"
    # Only reachable from this host (MariaDB binds to 127.0.0.1); it guards nothing of value.
    db_password: str = "recon-dev"
    layout: Layout = Layout()
    # Several clusters share this machine's process table: munged's and MariaDB's program
    # names end in this, so that even a recon that tells daemons apart by name alone
    # finds only its own cluster's (daemons.program_links).
    program_suffix: str = ""
    # MariaDB's TCP port, when it must not be the packaged default (3306, the host's).
    mariadb_port: int | None = Field(default=None, gt=1024, lt=65536)

    @model_validator(mode="after")
    def _consistent(self) -> ClusterSpec:
        names = [node.name for node in self.nodes]
        if len(set(names)) != len(names):
            raise ValueError(f"node names must be unique: {names}")
        ports = [node.port for node in self.nodes] + [self.slurmctld_port, self.slurmdbd_port]
        ports += [self.mariadb_port] if self.mariadb_port is not None else []
        if len(set(ports)) != len(ports):
            raise ValueError(f"every daemon needs its own port: {ports}")
        partitions = [partition.name for partition in self.partitions]
        if len(set(partitions)) != len(partitions):
            raise ValueError(f"partition names must be unique: {partitions}")
        if self.default_partition not in partitions:
            raise ValueError(f"default partition {self.default_partition!r} is not declared")
        placed = {name for partition in self.partitions for name in partition.nodes}
        if placed - set(names):
            raise ValueError(f"partitions name undeclared nodes: {sorted(placed - set(names))}")
        if set(names) - placed:
            raise ValueError(f"nodes in no partition: {sorted(set(names) - placed)}")
        return self

    @property
    def node_names(self) -> tuple[str, ...]:
        return tuple(node.name for node in self.nodes)

    def program(self, name: str) -> str:
        """The name a daemon's program runs under in this cluster (see program_suffix)."""
        return name + self.program_suffix


def default_cluster(hostname: str) -> ClusterSpec:
    """The cluster `recon dev-cluster up` brings up: two CPU nodes and one with four GPUs.

    gpu1 is in two partitions: `gpu`, whose jobs are never preempted, and `preempt`, a
    lower tier whose jobs a `gpu` job that needs their place requeues."""
    return ClusterSpec(
        cluster_name="recondev",
        hostname=hostname,
        account="recon",
        other_accounts=("recon-other-acct",),
        nodes=(
            Node(name="cpu1", cpus=8, real_memory_mb=16000, port=6821),
            Node(name="cpu2", cpus=8, real_memory_mb=16000, port=6822),
            Node(
                name="gpu1",
                cpus=8,
                real_memory_mb=16000,
                port=6823,
                gres=Gres(type="a100", count=4),
            ),
        ),
        partitions=(
            Partition(name="cpu", nodes=("cpu1", "cpu2")),
            Partition(name="gpu", nodes=("gpu1",), priority_tier=2),
            Partition(name="preempt", nodes=("gpu1",), preempt_mode=PreemptMode.REQUEUE),
        ),
        default_partition="cpu",
        def_mem_per_cpu_mb=500,
        max_job_count=100_000,
    )


def root_release_cluster(hostname: str) -> ClusterSpec:
    """The Slurm 24.11 cluster of the Debian 13 root: the same nodes, partitions and
    accounts as the host's, so every test runs unchanged on either, but its own name,
    ports and program names, so that both run side by side on one machine."""
    host = default_cluster(hostname).model_dump()
    return ClusterSpec.model_validate(
        {
            **host,
            "cluster_name": "recondev2411",
            "slurm_release": ROOT_RELEASE,
            "nodes": [{**node, "port": node["port"] + 100} for node in host["nodes"]],
            "slurmctld_port": host["slurmctld_port"] + 100,
            "slurmdbd_port": host["slurmdbd_port"] + 100,
            "mariadb_port": 3307,
            "program_suffix": "-" + ROOT_RELEASE,
        }
    )


def cluster_for(release: str, hostname: str, *, gpu_forms: bool = False) -> ClusterSpec:
    """The dev cluster of a Slurm release (one of RELEASES); ``gpu_forms``: with
    ``with_gpu_forms``'s GPU node."""
    if release == ROOT_RELEASE:
        cluster = root_release_cluster(hostname)
    elif release == HOST_RELEASE:
        cluster = default_cluster(hostname)
    else:
        raise ValueError(
            f"no dev cluster for Slurm {release!r}: choose one of {', '.join(RELEASES)}"
        )
    return with_gpu_forms(cluster) if gpu_forms else cluster


# The GPU forms' configuration: set, `recon dev-cluster up` (and status, down) render the
# GPU node with MIG-like slices and shards. Off by default: a cluster up without it is
# left as it is (applying it means restarting the daemons with the new slurm.conf and
# gres.conf, which every job on the cluster then sees).
GPU_FORMS_VARIABLE = "RECON_DEV_CLUSTER_GPU_FORMS"
MIG_LIKE_SLICES = (Gres(type="1g.10gb", count=2), Gres(type="3g.40gb", count=1))
SHARDS_PER_GPU = 2


def with_gpu_forms(cluster: ClusterSpec) -> ClusterSpec:
    """The cluster with its GPU node also offering MIG-like types (two `1g.10gb`, one
    `3g.40gb`, each a fake device of its own) and GPU shards (two on each `a100`), so
    that every GPU form recon renders runs on real Slurm. The devices are files: no
    process sees a GPU, and the slices are types like any other to Slurm (real MIG is
    found by AutoDetect=nvml); `CUDA_VISIBLE_DEVICES` and `SLURM_*` are what a test
    checks inside the job."""
    nodes = tuple(
        node.model_copy(update={"slices": MIG_LIKE_SLICES, "shards_per_gpu": SHARDS_PER_GPU})
        if node.gres is not None and node.gres.name == "gpu"
        else node
        for node in cluster.nodes
    )
    return cluster.model_copy(update={"nodes": nodes})
