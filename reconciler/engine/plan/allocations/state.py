"""Each allocation's state in this plan: which of its jobs is reused, set up, renewed or
released, and what the runs inside it need to know of it (``AllocationState``). Pure.

An allocation's jobs (``salloc --no-shell``, tagged kind ``alloc``) are judged one by one
(allocations/judging.py ``Stage``). Compatible means the same spec hash: the hash covers
the node shape, the time limit, the container and the setup commands, and leaves out
min_remaining, setup_retries and idle_release. A job of another hash is replaced. Of
several ready jobs the newest is used and the older ones released.

A job is released only once no step runs in it (a run's, or setup): the plan then says
what it waits for ("released once step 12.3 (run train) ends"), and a later pass
releases it. Only a complete observation releases anything. Allocations that left the
repo are released like that (with ``prune``), and so are tagged allocations the journal
does not know and no spec declares (orphans, e.g. after the journal was lost), prune or
not; and, with ``idle_release``, a ready job no step has run in for that long that no run
starts in this pass (``idle_releases``). Nothing else in recon ever releases an
allocation.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import replace
from datetime import timedelta

from reconciler.desired.desired import DesiredAllocation
from reconciler.desired.models import NodeShape, RunResources
from reconciler.desired.resources import span
from reconciler.engine.plan.actions import Action, ActionKind
from reconciler.engine.plan.allocation_state import AllocationState, Ready
from reconciler.engine.plan.allocations import judging
from reconciler.engine.plan.allocations.gpus import in_use
from reconciler.engine.plan.allocations.judging import Stage
from reconciler.engine.plan.causes import Cause
from reconciler.engine.plan.inputs import PlanInputs
from reconciler.engine.plan.unseen import refused_last
from reconciler.scheduler.base import ObservedJob, job_order
from reconciler.state.records import unseen_job
from reconciler.words import plural


def plan_allocations(
    inputs: PlanInputs, allocations: Sequence[DesiredAllocation]
) -> tuple[list[Action], dict[str, AllocationState]]:
    actions: list[Action] = []
    states = {}
    for allocation in allocations:
        decided, state = _decide(inputs, allocation)
        actions += decided
        states[allocation.name] = state
    return actions, states


def _decide(
    inputs: PlanInputs, allocation: DesiredAllocation
) -> tuple[list[Action], AllocationState]:
    spec = allocation.spec
    limit = timedelta(seconds=spec.time_limit.seconds)
    mine = inputs.allocation_jobs(allocation.name)
    live = sorted(
        (job for job in mine if judging.holds(job)), key=lambda job: job_order(job.job_id)
    )
    current = [job for job in live if job.tag.spec_hash == allocation.spec_hash]
    stages = {job.job_id: judging.stage(inputs, allocation, job) for job in current}
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
        _release(inputs, job, *_why_retired(job, allocation, stages, chosen, coming))
        for job in live
        if job.job_id not in keep
    ]
    failed = judging.setup_failures(inputs, allocation, mine)
    refusal = _refusal(inputs, allocation)
    cause = Cause.UNSUPPORTED if refusal is not None else Cause.SETUP_FAILED
    refused = refused_last(
        inputs.allocation_history(allocation.name), allocation.spec_hash, inputs.desired.commit
    )
    if refusal is None and refused is not None and not live:
        # Allocated again, it would be refused again; its runs would wait for ever.
        cause = Cause.REFUSED
        refusal = f"refused at submission: {refused}. Fix it and commit to try again"
    refusal = refusal or judging.setup_failure(allocation, failed)
    if refusal is not None:
        action = _action(ActionKind.BLOCKED, allocation, cause, refusal)
        blocked = AllocationState(name=allocation.name, time_limit=limit, blocked=refusal)
        return [action, *retired], blocked
    main: list[Action] = []
    state = AllocationState(
        name=allocation.name, time_limit=limit, coming=bool(coming), holds=spec.resources
    )
    if chosen is not None:
        left = judging.time_left(chosen)
        idle = None
        if spec.idle_release is not None and inputs.observation.complete:
            busy = bool(judging.unended_steps(inputs, chosen))
            idle = judging.idle_for(chosen, inputs.now, busy=busy)
        used = in_use(inputs, allocation, chosen)
        state = replace(state, ready=Ready(chosen.job_id, left), idle=idle, in_use=used)
        shown = f", {span(left)} left" if left is not None else ""
        shown += f", idle {span(idle)}" if idle is not None else ""
        main.append(
            _action(
                ActionKind.REUSE,
                allocation,
                Cause.READY,
                f"allocation job {chosen.job_id} on {judging.nodes(chosen)}{shown} (reused "
                f"while more than {span(timedelta(seconds=spec.min_remaining.seconds))} is "
                "left)",
            )
        )
    if coming:
        job = coming[-1]
        stage = stages[job.job_id]
        if stage is Stage.NEEDS_SETUP:
            commands = plural(len(spec.setup), "command")
            why = f"setup starts in allocation job {job.job_id} ({commands})"
            why += judging.tries_left(allocation, failed)
            main.append(_action(ActionKind.SETUP, allocation, Cause.SETUP, why, (job.job_id,)))
        else:
            why = _coming_reason(job, stage)
            if chosen is None:
                main.append(_action(ActionKind.NOOP, allocation, Cause.IN_PROGRESS, why))
        state = _waiting(state, why)
    elif chosen is None:
        unseen = _unseen(inputs, allocation, mine)
        if unseen is not None:
            why = f"allocation job {unseen} was made but Slurm does not list it yet"
            main.append(_action(ActionKind.NOOP, allocation, Cause.NOT_SEEN_YET, why))
            state = _waiting(state, why)
        elif spec.idle_release is not None:
            # Held only while used: a job is made once a run needs it (``on_demand``).
            kind, _, why = _allocate(live, stages)
            why += judging.tries_left(allocation, failed)
            release = span(timedelta(seconds=spec.idle_release.seconds))
            held = f"allocated when a run needs it (idle_release: {release})"
            ready_later = f"no job ready; {held}"
            main.append(_action(ActionKind.NOOP, allocation, Cause.ON_DEMAND, ready_later))
            state = replace(_waiting(state, held), on_demand=(kind, why))
        else:
            kind, cause, why = _allocate(live, stages)
            why += judging.tries_left(allocation, failed)
            main.append(_action(kind, allocation, cause, why))
            state = _waiting(state, "being allocated in this apply")
    # Allocate (or set up) before releasing: the new job exists before the old one goes.
    return [*main, *retired], state


def _waiting(state: AllocationState, why: str) -> AllocationState:
    return replace(state, waiting=why)


def _refusal(inputs: PlanInputs, allocation: DesiredAllocation) -> str | None:
    spec = allocation.spec
    containers = inputs.containers
    if inputs.scheduler == "local":  # report/plan.py says it as skipped in the summary
        return (
            "skipped on the local backend, which holds no allocations (runs start steps in "
            "one with srun --jobid, on Slurm only); --scheduler slurm allocates it"
        )
    if spec.container is not None and containers is not None:
        if "image" not in containers:
            return (
                f"container {spec.container.image} needs pyxis (srun --container-image), "
                "which this cluster does not have"
            )
        missing = sorted(spec.container.features - containers)
        if missing:
            return (
                f"container {', '.join(missing)} needs pyxis's "
                f"{', '.join('--container-' + name for name in missing)}, which this "
                "cluster's srun does not offer (srun --help); leave it out, or ask for a "
                "newer pyxis"
            )
    if inputs.fit is not None:
        shape = {field: getattr(spec.resources, field) for field in NodeShape.model_fields}
        unfit = inputs.fit.why_not(RunResources(**shape, time=spec.time_limit))
        if unfit is not None:
            return f"does not fit the cluster: {unfit}"
    return None


def _why_retired(
    job: ObservedJob,
    allocation: DesiredAllocation,
    stages: Mapping[str, Stage],
    chosen: ObservedJob | None,
    coming: Sequence[ObservedJob],
) -> tuple[Cause, str]:
    if job.tag.spec_hash != allocation.spec_hash:
        return Cause.SPEC_CHANGED, "allocation spec changed"
    stage = stages[job.job_id]
    if stage is Stage.EXPIRING:
        return Cause.RENEW, f"expiring ({span(judging.time_left(job))} left)"
    if stage is Stage.BROKEN:
        return Cause.SETUP_FAILED, "its setup failed"
    newer = coming[-1] if coming else chosen
    why = f"superseded by job {newer.job_id}" if newer is not None else "superseded"
    return Cause.SUPERSEDED, why


def _release(inputs: PlanInputs, job: ObservedJob, cause: Cause, why: str) -> Action:
    """Release the job, or say which steps it waits for: those sacct shows running, and
    those recon started in it whose end neither sacct nor the journal has seen yet
    (accounting can lag behind a running step)."""
    if not inputs.observation.complete:  # a step sacct did not show may be running in it
        return Action(
            kind=ActionKind.NOOP,
            target=job.tag.name,
            target_kind="alloc",
            cause=cause,
            reason=f"old allocation {job.job_id} ({why}) is released once the cluster "
            "can be fully observed",
            spec_hash=job.tag.spec_hash,
        )
    steps = judging.running_steps(inputs, job)
    if steps:
        named = ", ".join(steps)
        word = "step" if len(steps) == 1 else "steps"
        return Action(
            kind=ActionKind.NOOP,
            target=job.tag.name,
            target_kind="alloc",
            cause=cause,
            reason=f"old allocation {job.job_id} ({why}) released once {word} {named} "
            f"{'ends' if len(steps) == 1 else 'end'}",
            spec_hash=job.tag.spec_hash,
        )
    return Action(
        kind=ActionKind.CANCEL,
        target=job.tag.name,
        target_kind="alloc",
        cause=cause,
        reason=f"release allocation job {job.job_id}: {why}, no step runs in it",
        spec_hash=job.tag.spec_hash,
        job_ids=(job.job_id,),
    )


def _coming_reason(job: ObservedJob, stage: Stage) -> str:
    if stage is Stage.QUEUED:
        reason = next((row.reason for row in job.components if row.reason), None)
        return f"allocation job {job.job_id} is queued" + (f" ({reason})" if reason else "")
    running = [row.job_id for row in job.steps if row.step_tag == job.tag]
    where = f" (step {running[-1]})" if running else ""
    return f"setup runs in allocation job {job.job_id}{where}"


def _unseen(
    inputs: PlanInputs, allocation: DesiredAllocation, jobs: Sequence[ObservedJob]
) -> str | None:
    """A job of this spec salloc granted lately that observation does not show yet."""
    seen = {job.job_id for job in jobs}
    records = inputs.allocation_history(allocation.name)
    return unseen_job(records, allocation.spec_hash, seen, inputs.now)


def _allocate(
    live: Sequence[ObservedJob], stages: Mapping[str, Stage]
) -> tuple[ActionKind, Cause, str]:
    if not live:
        return ActionKind.SUBMIT, Cause.NONE_HELD, "allocation: none held"
    expiring = [job for job in live if stages.get(job.job_id) is Stage.EXPIRING]
    if expiring:
        job = expiring[-1]
        return (
            ActionKind.REPLACE,
            Cause.RENEW,
            (f"allocation renewed: job {job.job_id} has {span(judging.time_left(job))} left"),
        )
    if any(stages.get(job.job_id) is Stage.BROKEN for job in live):
        return ActionKind.REPLACE, Cause.SETUP_RETRY, "allocation: setup is tried again"
    return ActionKind.REPLACE, Cause.SPEC_CHANGED, "allocation spec changed"


def _action(
    kind: ActionKind,
    allocation: DesiredAllocation,
    cause: Cause,
    reason: str,
    job_ids: tuple[str, ...] = (),
) -> Action:
    return Action(
        kind=kind,
        target=allocation.name,
        target_kind="alloc",
        cause=cause,
        reason=reason,
        spec_hash=allocation.spec_hash,
        job_ids=job_ids,
    )


def prunes(inputs: PlanInputs, declared: set[str]) -> list[Action]:
    """Release the live allocations no spec declares: with prune, every one that left the
    repo; prune or not, the orphans the journal does not know."""
    if not inputs.observation.complete:
        return []
    known = {
        r.job_id
        for records in inputs.history_by_allocation.values()
        for r in records
        if r.job_id is not None
    }
    prune = inputs.desired.project.prune
    actions = []
    for job in inputs.observation.jobs:  # every allocation job of the project, in order
        if job.tag.project != inputs.project or job.tag.kind != "alloc":
            continue
        if job.tag.name in declared or not judging.holds(job):
            continue
        if job.job_id in known and not prune:
            continue
        if job.job_id in known:
            actions.append(_release(inputs, job, Cause.PRUNE, "allocation left the repo"))
        else:
            why = "tagged allocation that no spec declares and the journal does not know"
            actions.append(_release(inputs, job, Cause.ORPHAN, why))
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
            cause=Cause.IDLE,
            reason=f"release allocation job {job}: idle {span(state.idle)} (idle_release: "
            f"{span(timedelta(seconds=limit.seconds))}), no step runs in it; allocated "
            "again when a run needs it",
            spec_hash=allocations[name].spec_hash,
            job_ids=(job,),
        )
    return released
