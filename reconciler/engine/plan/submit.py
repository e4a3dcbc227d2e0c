"""Whether a run that is to be submitted can go now: it fits, its upstreams allow it, its
allocation has room and time. Pure.

The decision table (engine/plan/runs.py) says a run needs a new job; this says whether
that job is submitted in this plan (chained to upstreams in flight through Slurm's
afterok), waits for a later pass, or is blocked.
"""

from __future__ import annotations

from collections.abc import Mapping
from datetime import timedelta

from reconciler.desired.desired import DesiredRun
from reconciler.engine.plan.actions import Action, ActionKind, RunOutcome
from reconciler.engine.plan.allocation_state import InUse
from reconciler.engine.plan.allocations.placement import place
from reconciler.engine.plan.causes import Cause
from reconciler.engine.plan.changes import field_changes
from reconciler.engine.plan.inputs import Decision, PlanInputs
from reconciler.scheduler.states import Health


def submit(
    inputs: PlanInputs,
    run: DesiredRun,
    decided: Mapping[str, Decision],
    kind: ActionKind,
    cause: Cause,
    reason: str,
    cancels: tuple[str, ...] = (),
    in_use: Mapping[str, InUse] | None = None,
) -> Decision:
    """Submit now, for `cause` (`reason` in words); upstreams still in flight are waited
    for through Slurm's afterok.

    Not if no partition of the cluster can hold it: refused here, before anything is
    submitted, with the reason (only runs about to be submitted are checked: a current
    run takes no scheduler resources, so a CPU-only cluster still serves it).

    A run inside an allocation starts as a step in its ready job (``allocations/placement.place``)
    or waits for one; a GPU run also for its GPUs there to be free (``in_use``: what GPU
    steps hold in each ready job, this plan's starts included; default: as observed). A
    step cannot wait through afterok, nor a job for a step: where either side is a step,
    the run waits for its upstreams to finish.
    """
    held = _held_originals(inputs, run)
    if held and not inputs.observation.complete:
        return _stays(
            run,
            RunOutcome.WAITING,
            ActionKind.NOOP,
            Cause.OBSERVATION_INCOMPLETE,
            f"job {held[-1]} is held in the queue; not cancelling it "
            "to run again while the observation is incomplete",
        )
    cancels = (*cancels, *held)
    allocation = run.allocation
    placed = None
    if allocation is not None:
        placed = place(
            inputs.allocation_states[allocation],
            _time_limit(run),
            run.resources,
            (in_use or {}).get(allocation),
        )
        unfit = placed.blocked
    else:
        unfit = inputs.fit.why_not(run.resources) if inputs.fit is not None else None
        unfit = None if unfit is None else f"does not fit the cluster: {unfit}"
    if unfit is not None:
        return _stays(run, RunOutcome.BLOCKED, ActionKind.BLOCKED, Cause.DOES_NOT_FIT, unfit)
    upstreams = sorted(set(inputs.desired.upstreams[run.name]))
    outcomes = {up: decided[up].outcome for up in upstreams if up in decided}
    pending_upstreams = [up for up in upstreams if outcomes.get(up) is RunOutcome.INFLIGHT]
    waiting = [up for up in upstreams if outcomes.get(up) is RunOutcome.WAITING]
    why = f"waiting for upstream {', '.join(waiting)}"
    wait = Cause.WAITING_UPSTREAM
    steps = [up for up in pending_upstreams if inputs.desired.runs[up].allocation]
    renewal = None
    demand = None
    if not waiting and pending_upstreams and (allocation is not None or steps):
        waiting = pending_upstreams
        why = (
            f"waiting for upstream {', '.join(waiting)} to finish: a step in an allocation "
            "cannot wait through afterok, nor a job for a step"
        )
    elif not waiting and placed is not None and placed.wait is not None:
        if placed.renew and allocation is not None:
            needs = _time_limit(run)
            assert needs is not None  # only a time limit makes a run wait for renewal
            renewal = (allocation, needs)
        demand = allocation if placed.allocate else None
        waiting, why, wait = [allocation or ""], placed.wait, Cause.WAITING_ALLOCATION
    if waiting:
        stays = _stays(run, RunOutcome.WAITING, ActionKind.NOOP, wait, why)
        return Decision(stays.action, stays.outcome, renewal=renewal, demand=demand)
    live_jobs = {up: decided[up].live_job for up in pending_upstreams}
    after_jobs = whole_arrays(inputs, [job for job in live_jobs.values() if job is not None])
    submitted_with = tuple(up for up, job in live_jobs.items() if job is None)
    history = inputs.history(run.name)
    same_spec = kind in (ActionKind.RETRY, ActionKind.REQUEUE, ActionKind.MAY_RERUN)
    changes = field_changes(history, run) if not same_spec else ()
    action = Action(
        kind=kind,
        target=run.name,
        cause=cause,
        reason=reason,
        spec_hash=run.spec_hash,
        job_ids=cancels,
        after=submitted_with,
        after_jobs=after_jobs,
        changes=changes,
        allocation_job=placed.job_id if placed is not None else None,
        details=_component_lines(run),
    )
    return Decision(action, RunOutcome.INFLIGHT, uses=allocation)


def whole_arrays(inputs: PlanInputs, jobs: list[str]) -> tuple[str, ...]:
    """The jobs to wait for, a job array's tasks said once by the array's id where that
    waits for the same: every task of it is among them or has already succeeded (Slurm's
    afterok on an array waits for all its tasks). An aggregate of a 10,000-member sweep
    in flight then waits for ten ids, not 10,000. An array with a task the run does not
    read (a member pruned, or failed and retried elsewhere) keeps its tasks' own ids."""
    wanted = set(jobs)
    whole = {
        array
        for array in {job.partition("_")[0] for job in jobs if "_" in job}
        if all(
            task.job_id in wanted or task.health is Health.SUCCEEDED
            for task in inputs.tasks_by_array.get(array, ())
        )
        and inputs.tasks_by_array.get(array)
    }
    kept = [job for job in jobs if job.partition("_")[0] not in whole]
    return (*kept, *sorted(whole, key=int))


def _stays(
    run: DesiredRun, outcome: RunOutcome, kind: ActionKind, cause: Cause, reason: str
) -> Decision:
    action = Action(kind=kind, target=run.name, cause=cause, reason=reason, spec_hash=run.spec_hash)
    return Decision(action, outcome)


def _held_originals(inputs: PlanInputs, run: DesiredRun) -> tuple[str, ...]:
    """The run's jobs held in SpecialExit: ended for recon (failed) but still queued, and
    one release away from running beside a new job of the run. Whatever submits the run
    again cancels them first."""
    return tuple(
        job.job_id
        for job in inputs.jobs(run.name)
        if any(row.held_in_queue for row in job.components)
    )


def _time_limit(run: DesiredRun) -> timedelta | None:
    limit = run.resources.time
    return timedelta(seconds=limit.seconds) if limit is not None else None


def _component_lines(run: DesiredRun) -> tuple[str, ...]:
    """For a heterogeneous run, what each component asks for: they are scheduled
    together, so the plan shows them together."""
    components = run.resources.components
    if not components:
        return ()
    lines = []
    for index, shape in enumerate(components):
        asked = shape.model_dump(mode="json", exclude_defaults=True)
        text = ", ".join(f"{key} {value}" for key, value in asked.items())
        lines.append(f"component {index}: {text or 'cluster defaults'}")
    return tuple(lines)
