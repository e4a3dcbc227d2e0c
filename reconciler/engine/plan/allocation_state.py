"""How each allocation stands in a plan, as the runs inside it read it (``AllocationState``):
its ready job, what each of its nodes holds, and the GPUs recon's steps hold there
(``InUse``). Pure values.

allocations/state.py makes them and the runs' decisions read them, through
``PlanInputs.allocation_states``: they live here, below both, so what a plan is made from
(engine/plan/inputs.py) needs nothing of the allocation planner that fills it.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from datetime import timedelta

from reconciler.desired.models import NodeShape
from reconciler.engine.plan.actions import ActionKind


@dataclass(frozen=True)
class GpuShare:
    """What one run's step reserves in its allocation against the steps beside it, over
    all of its nodes: a GPU run's step (no ``--overlap``) its GPUs (MIG slices: devices
    of their own) or GPU shards, and its memory when the run states it; any other step
    (``--overlap``) nothing."""

    gpus: int = 0
    memory_mb: int = 0
    shards: int = 0

    def __bool__(self) -> bool:
        return bool(self.gpus or self.shards)


@dataclass(frozen=True)
class InUse:
    """What recon's GPU steps reserve in an allocation's ready job (``GpuShare``, summed),
    and by which runs. ``counted`` False: the observation is incomplete, so a step it
    missed may hold any of them."""

    gpus: int = 0
    memory_mb: int = 0
    runs: tuple[str, ...] = ()
    counted: bool = True
    shards: int = 0

    def plus(self, run: str, share: GpuShare) -> InUse:
        if not share:
            return self
        return replace(
            self,
            gpus=self.gpus + share.gpus,
            shards=self.shards + share.shards,
            memory_mb=self.memory_mb + share.memory_mb,
            runs=(*self.runs, run),
        )


@dataclass(frozen=True)
class Ready:
    job_id: str
    time_left: timedelta | None  # None: Slurm shows no limit


@dataclass(frozen=True, kw_only=True)
class AllocationState:
    """What the runs inside an allocation need to know of it in this plan."""

    name: str
    time_limit: timedelta
    ready: Ready | None = None
    blocked: str | None = None
    waiting: str = ""  # why runs wait, when nothing is ready
    coming: bool = False  # a newer job is on its way: no renewal needed
    holds: NodeShape = field(default_factory=NodeShape)  # what each of its nodes holds
    # idle_release: how long no step has run in the ready job (None: one runs, or the
    # observation is incomplete), and what to allocate once a run needs it (None: made
    # now, or nothing to make)
    idle: timedelta | None = None
    on_demand: tuple[ActionKind, str] | None = None
    in_use: InUse = field(default_factory=InUse)  # in the ready job, as observed
