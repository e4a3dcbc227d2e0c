"""Planning allocations: allocate, reuse, renew, set up, release. Pure, like plan.py.

An allocation's jobs (``salloc --no-shell``, tagged kind ``alloc``) are judged one by one:

    queued      granted nodes not yet                  wait for it
    setting up  its setup step runs (or was started)   wait for it
    needs setup running, setup never started in it     start setup (action ``setup``)
    ready       running, set up, more than             runs start in it: ``reuse``
                min_remaining left
    expiring    running, min_remaining or less left    replaced (renewed)
    broken      its setup failed                       released; the spec is blocked

Compatible means the same spec hash: the hash covers the node shape, the time limit, the
container and the setup commands, and leaves out min_remaining, setup_retries and
idle_release. A job of another hash is replaced. Of several ready jobs the newest is
used and the older ones released.

A job is released only once no step runs in it (a run's, or setup): the plan then says
what it waits for ("released once step 12.3 (run train) ends"), and a later pass
releases it. Only a complete observation releases anything. Allocations that left the
repo are released like that (with ``prune``), and so are tagged allocations the journal
does not know and no spec declares (orphans, e.g. after the journal was lost), prune or
not; and, with ``idle_release``, a ready job no step has run in for that long that no run
starts in this pass (``idle_releases``). Nothing else in recon ever releases an
allocation.

Runs ask ``place`` where to start: in the ready job if their time limit fits the time it
has left, else they wait, and ``renewals`` allocates a fresh job for them. With
``idle_release`` a job is made only once a run waits for one (``on_demand``).

A GPU run's step reserves its GPUs, and the memory it states, against the steps beside it
(it is started without ``--overlap``: scheduler/slurm/steps.py ``sharing``), and srun holds
back, unlisted, a step that finds too few free. So a GPU run starts only where its share
is free now (``InUse``: what recon's GPU steps hold in the ready job, those started but not
listed and those srun holds back included, plus the runs this plan starts there); else it
waits in the plan, naming the runs that hold the GPUs. srun's holding back is then left
for what the plan does not count (CPUs, a step of unknown share).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from datetime import datetime, timedelta
from enum import Enum
from functools import cached_property

from reconciler.desired.desired import DesiredAllocation, DesiredRun
from reconciler.desired.models import NodeShape, RunResources
from reconciler.desired.resources import Gpus, Memory, span
from reconciler.engine.plan.actions import Action, ActionKind
from reconciler.engine.plan.fit import Fit
from reconciler.scheduler.base import OWN_STEPS, JobRecord, Launch, ObservedJob, job_order
from reconciler.scheduler.states import ENDED, ENDED_BADLY, Health, aggregate, ending
from reconciler.scheduler.tag import Tag
from reconciler.state.records import (
    UNSEEN_GRACE,
    SetupRecord,
    SubmissionRecord,
    SubmissionStatus,
    unseen_job,
)


class Stage(Enum):
    QUEUED = "queued"
    SETTING_UP = "setting up"
    NEEDS_SETUP = "needs setup"
    READY = "ready"
    EXPIRING = "expiring"
    BROKEN = "broken"


@dataclass(frozen=True)
class AllocationInputs:
    """What planning allocations needs besides the specs, all observed before planning."""

    project: str
    jobs: Sequence[ObservedJob]  # the whole observation's
    complete: bool
    records: Sequence[SubmissionRecord]
    setups: Sequence[SetupRecord]
    now: datetime
    backend: str
    # Container.features the cluster offers; None: not looked at (no allocation has one)
    containers: frozenset[str] | None = None
    fit: Fit | None = None
    prune: bool = True
    launches: Sequence[Launch] | None = ()  # step launchers running here; None: not looked at
    runs: Mapping[str, DesiredRun] = field(default_factory=dict)  # the runs, for their shares

    # Grouped once per plan and then looked up per allocation: the jobs and records are
    # mostly runs' (10,000 of them in a sweep), and a scan of them all per allocation
    # or per allocation job would grow with both.
    @cached_property
    def allocation_jobs(self) -> dict[str, list[ObservedJob]]:
        """The project's allocation jobs by allocation name, in observed order."""
        grouped: dict[str, list[ObservedJob]] = {}
        for job in self.jobs:
            if job.tag.project == self.project and job.tag.kind == "alloc":
                grouped.setdefault(job.tag.name, []).append(job)
        return grouped

    @cached_property
    def allocation_records(self) -> dict[str, list[SubmissionRecord]]:
        """The journal's records of allocation jobs, by allocation name, oldest first."""
        grouped: dict[str, list[SubmissionRecord]] = {}
        for record in self.records:
            if record.kind == "alloc":
                grouped.setdefault(record.name, []).append(record)
        return grouped

    @cached_property
    def run_specs(self) -> dict[tuple[str, str], Mapping[str, object]]:
        """The spec each run was started with as the journal recorded it (flat fields), by
        (run, spec hash); an adopted job's record holds none and is left out."""
        specs: dict[tuple[str, str], Mapping[str, object]] = {}
        for record in self.records:
            if record.kind == "run" and record.spec_fields:
                specs.setdefault((record.name, record.spec_hash), record.spec_fields)
        return specs

    @cached_property
    def step_records(self) -> dict[str, list[SubmissionRecord]]:
        """The journal's records of runs started as steps (12.3), by allocation job id."""
        grouped: dict[str, list[SubmissionRecord]] = {}
        for record in self.records:
            if record.kind == "run" and record.job_id is not None and "." in record.job_id:
                grouped.setdefault(record.job_id.split(".", 1)[0], []).append(record)
        return grouped


@dataclass(frozen=True)
class Ready:
    job_id: str
    time_left: timedelta | None  # None: Slurm shows no limit


@dataclass(frozen=True)
class Share:
    """What one run's step reserves in its allocation against the steps beside it, over
    all of its nodes: a GPU run's step (no ``--overlap``) its GPUs, and its memory when
    the run states it; any other step (``--overlap``) nothing."""

    gpus: int = 0
    memory_mb: int = 0


def share_of(asks: RunResources) -> Share:
    if asks.gpus is None:
        return Share()
    nodes = asks.step_nodes
    memory = asks.memory.mebibytes * nodes if asks.memory is not None else 0
    return Share(asks.gpus.count * nodes, memory)


@dataclass(frozen=True)
class InUse:
    """What recon's GPU steps reserve in an allocation's ready job (``Share``, summed), and
    by which runs. ``counted`` False: the observation is incomplete, so a step it missed
    may hold any of them."""

    gpus: int = 0
    memory_mb: int = 0
    runs: tuple[str, ...] = ()
    counted: bool = True

    def plus(self, run: str, share: Share) -> InUse:
        if not share.gpus:
            return self
        return replace(
            self,
            gpus=self.gpus + share.gpus,
            memory_mb=self.memory_mb + share.memory_mb,
            runs=(*self.runs, run),
        )


@dataclass(frozen=True)
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


@dataclass(frozen=True)
class Placement:
    job_id: str | None = None  # where to start now
    wait: str | None = None
    blocked: str | None = None
    renew: bool = False  # waits for a job with more time left than the ready one has
    allocate: bool = False  # waits for a job made for it now (idle_release: made on demand)


def plan_allocations(
    cluster: AllocationInputs, allocations: Sequence[DesiredAllocation]
) -> tuple[list[Action], dict[str, AllocationState]]:
    actions: list[Action] = []
    states = {}
    for allocation in allocations:
        decided, state = _decide(cluster, allocation)
        actions += decided
        states[allocation.name] = state
    return actions, states


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


def short_of(state: AllocationState, asks: RunResources, in_use: InUse) -> str | None:
    """Why a GPU run cannot have its share of the ready job now (None: it can): too few of
    its GPUs, or of its memory when both the run and the allocation state memory, are
    free of other GPU steps. Counted over the job's nodes together (a step spanning
    several needs its share on each, which srun checks). Not judged when the allocation
    states no GPUs (``--exclusive``): srun holds the step back if it must."""
    share = share_of(asks)
    holds = state.holds
    if not share.gpus or holds.gpus is None or state.ready is None:
        return None
    where = f"allocation {state.name} (job {state.ready.job_id})"
    if not in_use.counted:
        return (
            f"waits for {where} to be fully observed: a GPU step the observation missed "
            "may hold its GPUs"
        )
    nodes = holds.nodes or 1
    total = holds.gpus.count * nodes
    if share.gpus > total - in_use.gpus:
        return (
            f"waits for {_count(share.gpus, 'free GPU')} in {where}: {in_use.gpus} of "
            f"{total} in use by {_by(in_use.runs)}"
        )
    if share.memory_mb and holds.memory is not None:
        memory = holds.memory.mebibytes * nodes
        if share.memory_mb > memory - in_use.memory_mb:
            return (
                f"waits for {share.memory_mb} MiB free memory in {where}: "
                f"{in_use.memory_mb} of {memory} MiB reserved by GPU {_by(in_use.runs)}"
            )
    return None


def _count(count: int, noun: str) -> str:
    return f"{count} {noun}{'' if count == 1 else 's'}"


def _by(runs: Sequence[str], shown: int = 5) -> str:
    named = ", ".join(runs[:shown])
    more = f" and {len(runs) - shown} more" if len(runs) > shown else ""
    return f"{'run' if len(runs) == 1 else 'runs'} {named}{more}"


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
    if asks.gpus is not None:
        if holds.gpus is None:
            if not holds_gpus(holds):
                found.append(f"gpus {asks.gpus.text}, but it holds no GPUs")
        elif asks.gpus.count > holds.gpus.count:
            found.append(f"gpus {asks.gpus.text} > {holds.gpus.text} per node")
        elif (
            asks.gpus.type is not None
            and holds.gpus.type is not None
            and asks.gpus.type.lower() != holds.gpus.type.lower()
        ):
            found.append(f"gpus {asks.gpus.text}, but it holds {holds.gpus.text}")
    return found


def holds_gpus(holds: NodeShape) -> bool:
    """Whether an allocation may hold GPUs: it asks for them, or takes whole nodes
    (``--exclusive``) with whatever GPUs they have."""
    return holds.gpus is not None or any(f.startswith("--exclusive") for f in holds.sbatch_extra)


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
                reason=f"{why}; run {runs[0]} needs it",
                spec_hash=allocations[name].spec_hash,
            )
        )
    return actions


def idle_releases(
    states: Mapping[str, AllocationState],
    used: set[str],
    allocations: Mapping[str, DesiredAllocation],
) -> dict[str, Action]:
    """The release of each ready job idle for its allocation's ``idle_release`` or longer
    that no run starts in (or waits to be listed in) in this plan, by allocation: it
    takes the place of that job's reuse."""
    released = {}
    for name, state in states.items():
        limit = allocations[name].spec.idle_release
        if state.ready is None or state.idle is None or limit is None or name in used:
            continue
        if state.idle < timedelta(seconds=limit.seconds):
            continue
        job = state.ready.job_id
        released[name] = Action(
            kind=ActionKind.CANCEL,
            target=name,
            target_kind="alloc",
            reason=f"release allocation job {job}: idle {span(state.idle)} (idle_release: "
            f"{span(timedelta(seconds=limit.seconds))}), no step runs in it; allocated "
            "again when a run needs it",
            spec_hash=allocations[name].spec_hash,
            job_ids=(job,),
        )
    return released


def idle_for(job: ObservedJob, now: datetime, busy: bool = False) -> timedelta | None:
    """How long no step has run in a running allocation job: since the last of its steps
    ended, else since it started. None while a step runs in it (or ``busy``: one started
    or held back that Slurm does not list), or before it starts."""
    if busy or job.live_steps or _own_health(job) is not Health.RUNNING:
        return None
    moments = [row.end for row in job.ended_steps if row.step not in OWN_STEPS and row.end]
    moments += [row.start for row in job.components if row.start is not None]
    if not moments:
        return None
    return max(now - max(moments), timedelta())


def prunes(cluster: AllocationInputs, declared: set[str]) -> list[Action]:
    """Release the live allocations no spec declares: with prune, every one that left the
    repo; prune or not, the orphans the journal does not know."""
    if not cluster.complete:
        return []
    known = {
        r.job_id
        for records in cluster.allocation_records.values()
        for r in records
        if r.job_id is not None
    }
    actions = []
    for job in _alloc_jobs(cluster):
        if job.tag.name in declared or not _holds(job):
            continue
        if job.job_id in known and not cluster.prune:
            continue
        why = (
            "allocation left the repo"
            if job.job_id in known
            else "tagged allocation that no spec declares and the journal does not know"
        )
        actions.append(_release(cluster, job, why))
    return actions


def _decide(
    cluster: AllocationInputs, allocation: DesiredAllocation
) -> tuple[list[Action], AllocationState]:
    spec = allocation.spec
    limit = timedelta(seconds=spec.time_limit.seconds)
    mine = cluster.allocation_jobs.get(allocation.name, [])
    live = sorted((job for job in mine if _holds(job)), key=lambda job: job_order(job.job_id))
    current = [job for job in live if job.tag.spec_hash == allocation.spec_hash]
    stages = {job.job_id: _stage(cluster, allocation, job) for job in current}
    ready = [job for job in current if stages[job.job_id] is Stage.READY]
    chosen = ready[-1] if ready else None
    coming = [
        job
        for job in current
        if stages[job.job_id] in (Stage.QUEUED, Stage.SETTING_UP, Stage.NEEDS_SETUP)
        and (chosen is None or job_order(job.job_id) > job_order(chosen.job_id))
    ]
    keep = {job.job_id for job in (chosen, coming[-1] if coming else None) if job is not None}
    retired = [
        _release(cluster, job, _why_retired(job, allocation, stages, chosen, coming))
        for job in live
        if job.job_id not in keep
    ]
    failed = _setup_failures(cluster, allocation, mine)
    refusal = _refusal(cluster, allocation) or _setup_failure(allocation, failed)
    if refusal is not None:
        action = _action(ActionKind.BLOCKED, allocation, refusal)
        return [action, *retired], AllocationState(allocation.name, limit, blocked=refusal)
    main: list[Action] = []
    state = AllocationState(allocation.name, limit, coming=bool(coming), holds=spec.resources)
    if chosen is not None:
        left = _time_left(chosen)
        idle = None
        if spec.idle_release is not None and cluster.complete:
            idle = idle_for(chosen, cluster.now, busy=bool(_unended_steps(cluster, chosen)))
        in_use = _in_use(cluster, allocation, chosen)
        state = replace(state, ready=Ready(chosen.job_id, left), idle=idle, in_use=in_use)
        shown = f", {span(left)} left" if left is not None else ""
        shown += f", idle {span(idle)}" if idle is not None else ""
        main.append(
            _action(
                ActionKind.REUSE,
                allocation,
                f"allocation job {chosen.job_id} on {_nodes(chosen)}{shown} (reused while "
                f"more than {span(timedelta(seconds=spec.min_remaining.seconds))} is left)",
            )
        )
    if coming:
        job = coming[-1]
        stage = stages[job.job_id]
        if stage is Stage.NEEDS_SETUP:
            why = f"setup starts in allocation job {job.job_id} ({_plural(len(spec.setup))})"
            why += _try(allocation, failed)
            main.append(_action(ActionKind.SETUP, allocation, why, (job.job_id,)))
        else:
            why = _coming_reason(job, stage)
            if chosen is None:
                main.append(_action(ActionKind.NOOP, allocation, why))
        state = _waiting(state, why)
    elif chosen is None:
        unseen = _unseen(cluster, allocation, mine)
        if unseen is not None:
            why = f"allocation job {unseen} was made but Slurm does not list it yet"
            main.append(_action(ActionKind.NOOP, allocation, why))
            state = _waiting(state, why)
        elif spec.idle_release is not None:
            # Held only while used: a job is made once a run needs it (``on_demand``).
            kind, why = _allocate(live, stages)
            why += _try(allocation, failed)
            release = span(timedelta(seconds=spec.idle_release.seconds))
            held = f"allocated when a run needs it (idle_release: {release})"
            main.append(_action(ActionKind.NOOP, allocation, f"no job ready; {held}"))
            state = replace(_waiting(state, held), on_demand=(kind, why))
        else:
            kind, why = _allocate(live, stages)
            main.append(_action(kind, allocation, why + _try(allocation, failed)))
            state = _waiting(state, "being allocated in this apply")
    # Allocate (or set up) before releasing: the new job exists before the old one goes.
    return [*main, *retired], state


def _waiting(state: AllocationState, why: str) -> AllocationState:
    return replace(state, waiting=why)


def _alloc_jobs(cluster: AllocationInputs) -> list[ObservedJob]:
    """Every allocation job of the project, in observed order (once per plan: prunes)."""
    return [
        job
        for job in cluster.jobs
        if job.tag.project == cluster.project and job.tag.kind == "alloc"
    ]


def _own_health(job: ObservedJob) -> Health:
    """The allocation's own state: its steps (a run that failed in it) are not its own."""
    return aggregate(row.health for row in job.components)


def _holds(job: ObservedJob) -> bool:
    return not job.finished and _own_health(job) not in ENDED


def _stage(cluster: AllocationInputs, allocation: DesiredAllocation, job: ObservedJob) -> Stage:
    if _own_health(job) is not Health.RUNNING:
        return Stage.QUEUED
    if allocation.spec.setup:
        setup = _setup_stage(cluster, job)
        if setup is not Stage.READY:
            return setup
    left = _time_left(job)
    if left is not None and left.total_seconds() <= allocation.spec.min_remaining.seconds:
        return Stage.EXPIRING
    return Stage.READY


def _setup_stage(cluster: AllocationInputs, job: ObservedJob) -> Stage:
    """How setup stands in a running job: by its steps (named with the job's own tag),
    else by the journal's record of starting it."""
    steps = [row for row in job.steps if row.step_tag == job.tag]
    if steps:
        health = aggregate(row.health for row in steps)
        if health in ENDED_BADLY:
            return Stage.BROKEN
        return Stage.READY if health is Health.SUCCEEDED else Stage.SETTING_UP
    started = [s for s in cluster.setups if s.allocation_job == job.job_id]
    if not started:
        return Stage.NEEDS_SETUP
    last = started[-1]
    if last.final_health is Health.SUCCEEDED:
        return Stage.READY  # its step has left sacct's window
    if last.final_health in ENDED_BADLY:
        return Stage.BROKEN
    if cluster.now - last.created_at < UNSEEN_GRACE:
        return Stage.SETTING_UP
    return Stage.NEEDS_SETUP  # started long ago and never seen: lost, start it again


def _setup_failures(
    cluster: AllocationInputs, allocation: DesiredAllocation, jobs: Sequence[ObservedJob]
) -> dict[str, str]:
    """How setup failed in each job of this spec where it did (one setup per job), by the
    cluster's steps or by the journal once they have left sacct's window. A setup
    cancelled with its allocation (released, out of time) is no failure of its own."""
    failed: dict[str, str] = {}
    if not allocation.spec.setup:
        return failed
    for setup in cluster.setups:
        if (
            setup.spec_hash == allocation.spec_hash
            and setup.name == allocation.name
            and setup.final_health is Health.FAILED
        ):
            how = setup.reason or f"{setup.final_health} (exit {setup.exit_code})"
            failed[setup.allocation_job] = how
    for job in jobs:
        if job.tag.spec_hash != allocation.spec_hash:
            continue
        for row in job.steps:
            if row.step_tag == job.tag and row.health is Health.FAILED:
                failed[job.job_id] = f"step {row.job_id} {ending(row.health, row.exit_code)}"
    return failed


def _setup_failure(allocation: DesiredAllocation, failed: Mapping[str, str]) -> str | None:
    """Why this spec's setup is known to fail, once it has failed in more jobs than
    setup_retries allows: it is not allocated again until the spec changes."""
    if len(failed) <= allocation.spec.setup_retries:
        return None
    last = max(failed, key=job_order)
    tries = len(failed)
    return _setup_failed(last, f"{failed[last]}, {tries} of {tries} tries failed")


def _try(allocation: DesiredAllocation, failed: Mapping[str, str]) -> str:
    """How many tries of setup are left, once it has failed before (this one included)."""
    if not failed:
        return ""
    left = allocation.spec.setup_retries + 1 - len(failed)
    last = max(failed, key=job_order)
    return f"; setup failed in job {last}, {left} {'try' if left == 1 else 'tries'} left"


def _setup_failed(job_id: str, how: str) -> str:
    return f"setup failed in allocation job {job_id}: {how}; fix setup and commit"


def _refusal(cluster: AllocationInputs, allocation: DesiredAllocation) -> str | None:
    spec = allocation.spec
    if cluster.backend == "local":  # report/plan.py says it as skipped in the summary
        return (
            "skipped on the local backend, which holds no allocations (runs start steps in "
            "one with srun --jobid, on Slurm only); --scheduler slurm allocates it"
        )
    if spec.container is not None and cluster.containers is not None:
        if "image" not in cluster.containers:
            return (
                f"container {spec.container.image} needs pyxis (srun --container-image), "
                "which this cluster does not have"
            )
        missing = sorted(spec.container.features - cluster.containers)
        if missing:
            return (
                f"container {', '.join(missing)} needs pyxis's "
                f"{', '.join('--container-' + name for name in missing)}, which this "
                "cluster's srun does not offer (srun --help); leave it out, or ask for a "
                "newer pyxis"
            )
    if cluster.fit is not None:
        shape = {field: getattr(spec.resources, field) for field in NodeShape.model_fields}
        unfit = cluster.fit.why_not(RunResources(**shape, time=spec.time_limit))
        if unfit is not None:
            return f"does not fit the cluster: {unfit}"
    return None


def _why_retired(
    job: ObservedJob,
    allocation: DesiredAllocation,
    stages: Mapping[str, Stage],
    chosen: ObservedJob | None,
    coming: Sequence[ObservedJob],
) -> str:
    if job.tag.spec_hash != allocation.spec_hash:
        return "allocation spec changed"
    stage = stages[job.job_id]
    if stage is Stage.EXPIRING:
        return f"expiring ({span(_time_left(job))} left)"
    if stage is Stage.BROKEN:
        return "its setup failed"
    newer = coming[-1] if coming else chosen
    return f"superseded by job {newer.job_id}" if newer is not None else "superseded"


def _release(cluster: AllocationInputs, job: ObservedJob, why: str) -> Action:
    """Release the job, or say which steps it waits for: those sacct shows running, and
    those recon started in it whose end neither sacct nor the journal has seen yet
    (accounting can lag behind a running step)."""
    if not cluster.complete:  # a step sacct did not show may be running in it
        return Action(
            kind=ActionKind.NOOP,
            target=job.tag.name,
            target_kind="alloc",
            reason=f"old allocation {job.job_id} ({why}) is released once the cluster "
            "can be fully observed",
            spec_hash=job.tag.spec_hash,
        )
    steps = [_step_name(row) for row in job.live_steps]
    steps += _unended_steps(cluster, job)
    if steps:
        named = ", ".join(steps)
        word = "step" if len(steps) == 1 else "steps"
        return Action(
            kind=ActionKind.NOOP,
            target=job.tag.name,
            target_kind="alloc",
            reason=f"old allocation {job.job_id} ({why}) released once {word} {named} "
            f"{'ends' if len(steps) == 1 else 'end'}",
            spec_hash=job.tag.spec_hash,
        )
    return Action(
        kind=ActionKind.CANCEL,
        target=job.tag.name,
        target_kind="alloc",
        reason=f"release allocation job {job.job_id}: {why}, no step runs in it",
        spec_hash=job.tag.spec_hash,
        job_ids=(job.job_id,),
    )


def _unended_steps(cluster: AllocationInputs, job: ObservedJob) -> list[str]:
    """Steps the journal says recon started in the job, not shown by sacct at all, whose
    end is not recorded; and steps srun holds back in it (released, they would never run)."""
    shown = {row.job_id for row in job.steps}
    held = sorted(
        {
            f"{job.job_id}.? (run {launch.tag.name}, held back by srun)"
            for launch in held_back(job, cluster.launches or ())
        }
    )
    prefix = f"{job.job_id}."
    runs = [
        f"{r.job_id} (run {r.name})"
        for r in cluster.step_records.get(job.job_id, [])
        if r.job_id is not None
        and r.job_id.startswith(prefix)
        and r.job_id not in shown
        and r.final_health is None
    ]
    setups = [
        f"{s.step_id or prefix + '?'} (setup)"
        for s in cluster.setups
        if s.allocation_job == job.job_id and s.step_id not in shown and s.final_health is None
    ]
    return runs + setups + held


def _in_use(cluster: AllocationInputs, allocation: DesiredAllocation, job: ObservedJob) -> InUse:
    """What recon's GPU steps reserve in the ready job: those Slurm lists running, those
    srun holds back, and those started but not listed yet (the journal's open intents of
    runs in this allocation, counted as long as ``unlisted_step`` waits for them: while
    their srun runs here, for ``UNSEEN_GRACE`` without, for ever when the launchers could
    not be looked at). A step whose share is not known (its spec is neither the current
    one nor in the journal) is not counted: srun holds back what that leaves too little
    room for."""
    if not cluster.complete:
        return InUse(counted=False)
    holding: dict[Tag, str] = {}  # step's tag -> how it is named in the reason
    for row in job.live_steps:
        tag = row.step_tag
        if tag is not None and tag.kind == "run" and tag.project == cluster.project:
            holding[tag] = tag.name
    for launch in held_back(job, cluster.launches or ()):
        holding.setdefault(launch.tag, launch.tag.name)
    shown = {row.job_id for row in job.steps}
    for record in cluster.step_records.get(job.job_id, []):
        if record.job_id not in shown and record.final_health is None:
            holding.setdefault(_run_tag(job, record), record.name)
    launched = {launch.tag for launch in cluster.launches or ()}
    listed = {row.step_tag for row in job.steps}  # a listed step holds GPUs while it runs
    for record in cluster.records:
        if record.kind != "run" or record.status is not SubmissionStatus.INTENT:
            continue
        run = cluster.runs.get(record.name)
        if (
            record.job_id is not None
            or run is None
            or run.spec_hash != record.spec_hash  # as unlisted_step: the current spec's
            or run.allocation != allocation.name
        ):
            continue
        tag = _run_tag(job, record)
        if tag in listed:
            continue
        if (
            tag in launched
            or cluster.launches is None
            or cluster.now - record.created_at < UNSEEN_GRACE
        ):
            holding.setdefault(tag, record.name)
    in_use = InUse()
    for tag, name in sorted(holding.items(), key=lambda item: item[1]):
        share = _share_of_step(cluster, tag)
        if share is not None:
            in_use = in_use.plus(name, share)
    return in_use


def _run_tag(job: ObservedJob, record: SubmissionRecord) -> Tag:
    """The tag the run's step carries as its name (the allocation's deployment is the
    run's)."""
    return job.tag.model_copy(
        update={"kind": "run", "name": record.name, "spec_hash": record.spec_hash}
    )


def _share_of_step(cluster: AllocationInputs, tag: Tag) -> Share | None:
    """A run's step's share by its spec: the current one, else as the journal recorded the
    spec it was started with; None when neither is known."""
    run = cluster.runs.get(tag.name)
    if run is not None and run.spec_hash == tag.spec_hash:
        return share_of(run.resources)
    recorded = cluster.run_specs.get((tag.name, tag.spec_hash))
    return _recorded_share(recorded) if recorded is not None else None


def _recorded_share(fields: Mapping[str, object]) -> Share | None:
    gpus, memory, nodes = (fields.get(f"resources.{key}") for key in ("gpus", "memory", "nodes"))
    try:
        count = Gpus.parse(gpus).count if gpus is not None else 0
        mebibytes = Memory.parse(memory).mebibytes if memory is not None else 0
        spans = int(str(nodes)) if nodes is not None else 1
    except ValueError:
        return None
    if not count:
        return Share()
    return Share(count * spans, mebibytes * spans)


def held_back(job: ObservedJob, launches: Sequence[Launch]) -> list[Launch]:
    """The runs' steps srun holds back in the job: launched there, not listed in it."""
    named = {row.step_tag for row in job.steps}
    return [
        launch
        for launch in launches
        if launch.allocation_id == job.job_id
        and launch.tag.kind == "run"
        and launch.tag not in named
    ]


def _step_name(row: JobRecord) -> str:
    tag = row.step_tag
    if tag is None:
        return row.job_id
    return f"{row.job_id} ({'run ' + tag.name if tag.kind == 'run' else 'setup'})"


def _coming_reason(job: ObservedJob, stage: Stage) -> str:
    if stage is Stage.QUEUED:
        reason = next((row.reason for row in job.components if row.reason), None)
        return f"allocation job {job.job_id} is queued" + (f" ({reason})" if reason else "")
    running = [row.job_id for row in job.steps if row.step_tag == job.tag]
    where = f" (step {running[-1]})" if running else ""
    return f"setup runs in allocation job {job.job_id}{where}"


def _unseen(
    cluster: AllocationInputs, allocation: DesiredAllocation, jobs: Sequence[ObservedJob]
) -> str | None:
    """A job of this spec salloc granted lately that observation does not show yet."""
    seen = {job.job_id for job in jobs}
    records = cluster.allocation_records.get(allocation.name, [])
    return unseen_job(records, allocation.spec_hash, seen, cluster.now)


def _allocate(live: Sequence[ObservedJob], stages: Mapping[str, Stage]) -> tuple[ActionKind, str]:
    if not live:
        return ActionKind.SUBMIT, "allocation: none held"
    expiring = [job for job in live if stages.get(job.job_id) is Stage.EXPIRING]
    if expiring:
        job = expiring[-1]
        return ActionKind.REPLACE, (
            f"allocation renewed: job {job.job_id} has {span(_time_left(job))} left"
        )
    if any(stages.get(job.job_id) is Stage.BROKEN for job in live):
        return ActionKind.REPLACE, "allocation: setup is tried again"
    return ActionKind.REPLACE, "allocation spec changed"


def _action(
    kind: ActionKind, allocation: DesiredAllocation, reason: str, job_ids: tuple[str, ...] = ()
) -> Action:
    return Action(
        kind=kind,
        target=allocation.name,
        target_kind="alloc",
        reason=reason,
        spec_hash=allocation.spec_hash,
        job_ids=job_ids,
    )


def _time_left(job: ObservedJob) -> timedelta | None:
    return next((row.time_left for row in job.components if row.time_left is not None), None)


def _nodes(job: ObservedJob) -> str:
    return next((row.nodes for row in job.components if row.nodes), "its nodes")


def _plural(count: int) -> str:
    return f"{count} command{'' if count == 1 else 's'}"
