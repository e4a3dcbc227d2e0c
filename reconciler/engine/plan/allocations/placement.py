"""Where a run inside an allocation starts, and the jobs made for runs that wait. Pure.

Runs ask ``place`` where to start: in the ready job if their time limit fits the time it
has left and, for a GPU run, its share is free there (allocations/gpus.py ``short_of``),
else they wait, and ``renewals`` allocates a fresh job for them. With ``idle_release`` a
job is made only once a run waits for one (``on_demand``). What a step asks for beyond
what the allocation holds blocks it (``beyond_allocation``).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import timedelta

from reconciler.desired.desired import DesiredAllocation
from reconciler.desired.models import NodeShape, RunResources
from reconciler.desired.resources import span
from reconciler.engine.plan.actions import Action, ActionKind
from reconciler.engine.plan.allocation_state import AllocationState, InUse
from reconciler.engine.plan.allocations.gpus import short_of
from reconciler.engine.plan.causes import Cause


@dataclass(frozen=True)
class Placement:
    job_id: str | None = None  # where to start now
    wait: str | None = None
    blocked: str | None = None
    renew: bool = False  # waits for a job with more time left than the ready one has
    allocate: bool = False  # waits for a job made for it now (idle_release: made on demand)


def place(
    state: AllocationState,
    needs: timedelta | None,
    asks: RunResources,
    in_use: InUse | None = None,
) -> Placement:
    """Where a run that is to start now starts, given its time limit (None: none), the
    CPUs, memory and GPUs it asks for, and what GPU steps hold in the ready job now
    (default: as observed; the plan adds the runs it starts there before this one)."""
    name = state.name
    if state.blocked is not None:
        return Placement(blocked=f"allocation {name} is blocked: {state.blocked}")
    if needs is not None and needs > state.time_limit:
        return Placement(
            blocked=f"needs {span(needs)}, but allocation {name} lives "
            f"{span(state.time_limit)} (time_limit)"
        )
    beyond = beyond_allocation(state.holds, asks)
    if beyond:
        return Placement(
            blocked=f"asks for more than allocation {name} holds: {'; '.join(beyond)}; "
            f"ask for less, or for more in allocation {name}"
        )
    if state.ready is None:
        if state.on_demand is not None:
            why = f"waits for allocation {name}: allocated for it in this apply"
            return Placement(wait=why, allocate=True)
        return Placement(wait=f"waits for allocation {name}: {state.waiting}")
    left = state.ready.time_left
    if needs is not None and left is not None and needs > left:
        return Placement(
            wait=f"waits for allocation {name}'s renewal: needs {span(needs)}, "
            f"{span(left)} left in job {state.ready.job_id}",
            renew=not state.coming,
        )
    short = short_of(state, asks, state.in_use if in_use is None else in_use)
    if short is not None:
        return Placement(wait=short)
    return Placement(job_id=state.ready.job_id)


def beyond_allocation(holds: NodeShape, asks: RunResources) -> list[str]:
    """What a step asks for that the allocation does not hold: more nodes than it has, or
    on one node more CPUs (its tasks there times each one's), memory or GPUs than each
    of its nodes holds (an allocation's cpus, memory and gpus are per node). What the
    allocation does not state is not judged (the cluster decides what it gets), except
    GPUs, and nodes (one, unless it says): an allocation that asks for no GPUs holds
    none, unless it takes whole nodes (--exclusive)."""
    found = []
    if asks.step_nodes > (holds.nodes or 1):
        found.append(f"nodes {asks.step_nodes} > {holds.nodes or 1}")
    per_node = asks.tasks_per_node
    each = asks.cpus.count if asks.cpus is not None else 1
    if holds.cpus is not None and per_node * each > holds.cpus.count:
        asked = asks.cpus.text if asks.cpus is not None else "1"
        if per_node > 1:
            asked = f"{per_node} tasks x {asked}"
        found.append(f"cpus {asked} > {holds.cpus.text} per node")
    if (
        asks.memory is not None
        and holds.memory is not None
        and asks.memory.mebibytes > holds.memory.mebibytes
    ):
        found.append(f"memory {asks.memory.text} > {holds.memory.text} per node")
    found.extend(_gpus_beyond(asks, holds))
    if asks.shards is not None:
        if holds.shards is None:
            found.append(f"shards {asks.shards}, but it holds no GPU shards")
        elif asks.shards > holds.shards:
            found.append(f"shards {asks.shards} > {holds.shards} per node")
    for name, count in sorted(asks.gres.items()):
        held = holds.gres.get(name)
        if held is None:
            found.append(f"gres {name}:{count.text}, but it holds no {name}")
        elif count.count > held.count:
            found.append(f"gres {name}:{count.text} > {held.text} per node")
    return found


def _gpus_beyond(asks: RunResources, holds: NodeShape) -> list[str]:
    """A run's GPUs (in any form) that its allocation's nodes do not hold: too many, or
    of another type (a MIG profile is a type)."""
    per_node, kind = asks.step_gpus, asks.step_gpu_type
    if not per_node:
        return []
    asked = asks.gpus_per_task or asks.node_gpus
    assert asked is not None
    what = "gpus_per_task" if asks.gpus_per_task is not None else "gpus"
    text = f"{what} {asked.text}"
    if asks.gpus_per_task is not None and asks.tasks_per_node > 1:
        text += f" x {asks.tasks_per_node} tasks"
    held = holds.node_gpus
    if held is None and holds.shards is not None:
        return [f"{text}, but it holds GPU shards, not whole GPUs"]
    if held is None:
        return [] if holds_gpus(holds) else [f"{text}, but it holds no GPUs"]
    if per_node > held.count:
        return [f"{text} > {held.text} per node"]
    if kind is not None and held.type is not None and kind.lower() != held.type.lower():
        return [f"{text}, but it holds {held.text}"]
    return []


def holds_gpus(holds: NodeShape) -> bool:
    """Whether an allocation may hold GPUs: it asks for them, or takes whole nodes
    (``--exclusive``) with whatever GPUs they have."""
    return (
        holds.node_gpus is not None
        or holds.shards is not None
        or any(f.startswith("--exclusive") for f in holds.sbatch_extra)
    )


def renewals(
    states: Mapping[str, AllocationState],
    needs: Mapping[str, Sequence[tuple[str, timedelta]]],
    allocations: Mapping[str, DesiredAllocation],
) -> list[Action]:
    """A fresh job for each ready allocation that runs wait on for want of time left."""
    actions = []
    for name, waiting in sorted(needs.items()):
        state = states[name]
        if not waiting or state.ready is None or state.coming:
            continue
        run, longest = max(waiting, key=lambda item: item[1])
        left = state.ready.time_left
        actions.append(
            Action(
                kind=ActionKind.REPLACE,
                target=name,
                target_kind="alloc",
                cause=Cause.RENEW,
                reason=f"allocation renewed early: run {run} needs {span(longest)}, job "
                f"{state.ready.job_id} has {span(left) if left else 'too little'} left",
                spec_hash=allocations[name].spec_hash,
            )
        )
    return actions


def on_demand(
    states: Mapping[str, AllocationState],
    needs: Mapping[str, Sequence[str]],
    allocations: Mapping[str, DesiredAllocation],
) -> list[Action]:
    """A job for each allocation with ``idle_release`` that holds none, once a run needs
    it: such an allocation is held only while it is used."""
    actions = []
    for name, runs in sorted(needs.items()):
        state = states[name]
        if not runs or state.on_demand is None:
            continue
        kind, why = state.on_demand
        actions.append(
            Action(
                kind=kind,
                target=name,
                target_kind="alloc",
                cause=Cause.ON_DEMAND,
                reason=f"{why}; run {runs[0]} needs it",
                spec_hash=allocations[name].spec_hash,
            )
        )
    return actions
