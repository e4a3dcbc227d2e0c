"""What the cluster offers: its partitions and the shape of every node in them.

Typed records only, read once per pass (``Scheduler.partitions()``) so that a run asking
for more than any node has can be refused up front, with a reason, instead of pending
forever. A node in several partitions appears in each of them, as the same node.
"""

from __future__ import annotations

from collections.abc import Iterable

from pydantic import BaseModel, ConfigDict, Field

from reconciler.desired.resources import mig_fraction

_FROZEN = ConfigDict(frozen=True, extra="forbid")

# Node states (Slurm's long form, lowercased) in which a node takes no new jobs right now.
# Such nodes still count when judging whether a run can ever fit: a drained or down node
# is usually brought back, and refusing every run meant for it would be wrong.
_UNAVAILABLE_STATES = frozenset(
    {"down", "drain", "drained", "draining", "fail", "failing", "future", "inval", "unknown"}
)
# Flags Slurm appends to a state: `*` not responding, `~` powered off, `#` powering up,
# `!` powering down, `%` powering down, `$` maintenance reservation, `@` reboot pending,
# `^` rebooting, `-` planned by backfill.
_STATE_FLAGS = "*~#!%$@^-"


class Gres(BaseModel):
    """One generic resource of a node: ``gpu:a100:4`` is name gpu, type a100, count 4."""

    model_config = _FROZEN

    name: str = Field(min_length=1)
    type: str | None = None
    count: int = Field(ge=0)


class Node(BaseModel):
    """One node as sinfo describes it: what a single job on it could at most be given."""

    model_config = _FROZEN

    name: str = Field(min_length=1)
    cpus: int = Field(ge=0)
    memory_mb: int = Field(ge=0, description="RealMemory, in Slurm's MB (MiB)")
    gres: tuple[Gres, ...] = ()
    features: tuple[str, ...] = Field(default=(), description="available features")
    state: str = Field(description="as sinfo prints it, e.g. idle, mixed, drained, down*")

    def gpus(self, gpu_type: str | None = None) -> int:
        """GPUs (MIG slices among them) of ``gpu_type`` (any case), or of every type when
        it is None, as Slurm counts an untyped ``--gres=gpu:N`` request."""
        return self.gres_count("gpu", gpu_type)

    def gres_count(self, name: str, gres_type: str | None = None) -> int:
        """How many of the generic resource ``name`` the node has: of ``gres_type`` (any
        case), or of every type when it is None (``shard:8``, ``localtmp:500000``)."""
        wanted = None if gres_type is None else gres_type.lower()
        return sum(
            gres.count
            for gres in self.gres
            if gres.name == name
            and (wanted is None or (gres.type is not None and gres.type.lower() == wanted))
        )

    @property
    def shards_per_gpu(self) -> float | None:
        """The node's GPU shards over its whole GPUs (those not MIG slices), as its
        configuration shares them out (``shard:8`` on 2 GPUs: 4); None: it has none."""
        shards = self.gres_count("shard")
        whole = sum(
            gres.count
            for gres in self.gres
            if gres.name == "gpu" and mig_fraction(gres.type) == 1.0
        )
        return shards / whole if shards and whole else None

    @property
    def gres_text(self) -> str:
        """Its GRES as sinfo names them, for messages: ``gpu:1g.10gb:4, shard:8``."""
        return ", ".join(
            ":".join(part for part in (g.name, g.type, str(g.count)) if part) for g in self.gres
        )

    @property
    def unavailable(self) -> bool:
        """Down, drained, failing or not responding now; may come back later."""
        # Newer Slurm joins a base state and its flags with `+` (idle+drain).
        words = self.state.rstrip(_STATE_FLAGS).lower().split("+")
        return self.state.endswith("*") or any(word in _UNAVAILABLE_STATES for word in words)


def shards_per_gpu(partitions: Iterable[Partition]) -> tuple[float | None, str | None]:
    """The cluster's GPU shards per whole GPU, for valuing a shard held (docs/cost.md),
    or None and why not: no node has shards, or nodes share their GPUs out differently
    (a job's accounting does not say on which node it held its shards)."""
    ratios = {
        ratio
        for partition in partitions
        for node in partition.nodes
        if (ratio := node.shards_per_gpu) is not None
    }
    if len(ratios) == 1:
        return ratios.pop(), None
    if not ratios:
        return None, "no node of the cluster has GPU shards"
    shown = ", ".join(f"{ratio:g}" for ratio in sorted(ratios))
    return None, f"the cluster's nodes have different shards per GPU ({shown})"


class Partition(BaseModel):
    """One partition and its nodes; ``default`` is where a job naming none goes."""

    model_config = _FROZEN

    name: str = Field(min_length=1)
    default: bool = False
    nodes: tuple[Node, ...] = ()
