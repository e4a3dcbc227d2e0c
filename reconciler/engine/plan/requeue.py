"""When a plan next needs a look: the earliest moment it would change with no new
observation, and why. Pure, like the rest of the planner.

controller-runtime's ``Reconcile`` returns ``Result{RequeueAfter}``: the time it wants to
be called again although nothing it watches has changed. A plan says the same in
``Plan.next_look``, and `recon watch` sleeps until then or its interval, whichever comes
first (engine/watch.py). Each source is a threshold one of the planner's rules crosses on
the clock alone:

    renewal       an allocation's ready job gets down to min_remaining: renewed
                  (allocations/judging.stage: min_remaining or less left is expiring)
    idle-release  an allocation's ready job has been idle for idle_release: released
                  (allocations/state.idle_releases)
    grace         a job the journal holds that the scheduler does not show yet (a run's,
                  an allocation's), a run's step not listed yet, an allocation's setup
                  started but not listed: each is waited for UNSEEN_GRACE, then taken as
                  lost (records.unseen_job, unseen.unlisted_step, allocations/judging's
                  setup stage)
    time-limit    a running job reaches its time limit, and Slurm ends it

A time the scheduler reports relative to its observation (a job's time left) counts from
when that was taken; one the planner judges against its own clock (idle, grace) from the
plan's ``now``. Only moments after ``now`` count: what is due already was decided by this
plan. A job's end before its limit, a queued job starting, a commit: those are news that
only a new observation or a ref change brings, and the watch's interval and ref watch are
there for them.

The planner has no back-off of its own: a failed run with retries left is submitted
again by the pass that sees it fail. The back-off after a failing pass belongs to the
loop (engine/watch.Schedule.backoff), which then has no plan to ask.
"""

from __future__ import annotations

from collections.abc import Collection, Iterator, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta

from reconciler.desired.resources import span
from reconciler.engine.plan.actions import Action, ActionKind, LookKind, NextLook
from reconciler.engine.plan.causes import Cause
from reconciler.engine.plan.inputs import Decision, PlanInputs
from reconciler.scheduler.base import ObservedJob
from reconciler.scheduler.states import SlurmState
from reconciler.state.records import (
    UNSEEN_GRACE,
    SetupRecord,
    SubmissionStatus,
    lost_at,
    unseen_job,
)


def next_look(
    inputs: PlanInputs,
    decided: Mapping[str, Decision],
    actions: Sequence[Action],
    *,
    used: Collection[str] = (),
    idle_from: PlanInputs | None = None,
) -> NextLook | None:
    """The earliest moment after ``inputs.now`` at which the same observation would be
    planned otherwise, or None when nothing is due. ``inputs``: with the allocations'
    states; ``decided``: each chosen run's decision; ``actions``: the plan's (a job it
    cancels or releases has nothing more to wait for); ``used``: the allocations a run
    starts a step in (or waits to be listed in) in this plan; ``idle_from``: the inputs
    the allocations' states were planned with, when ``inputs`` holds a later ``now``
    (a re-plan of the same allocations: an idle time counts from its plan's now)."""
    ending = frozenset(job for action in actions if action.kind in _ENDS for job in action.job_ids)
    found = [
        *renewals(inputs, ending),
        *idle_releases(idle_from or inputs, used, ending),
        *grace_ends(inputs, decided),
        *time_limits(inputs, decided, ending),
    ]
    due = [look for look in found if look.at > inputs.now]
    first = min(due, key=lambda look: (look.at, look.kind, look.target), default=None)
    if first is None:
        return None
    return NextLook(at=first.at, kind=first.kind, target=first.target, reason=first.reason)


@dataclass(frozen=True, slots=True)
class Due:
    """One moment a source names; the earliest becomes the plan's ``NextLook`` (a plain
    record, not a model: only that one is validated)."""

    at: datetime
    kind: LookKind
    target: str
    reason: str


# Actions that end the jobs they name: nothing is waited for of those any more.
_ENDS = frozenset({ActionKind.CANCEL, ActionKind.REPLACE, ActionKind.TEARDOWN})


def renewals(inputs: PlanInputs, ending: Collection[str] = ()) -> Iterator[Due]:
    """Each ready allocation job, when it gets down to its min_remaining (unless this plan
    releases it: ``ending`` holds the jobs it cancels)."""
    taken = inputs.observation.taken_at
    for name, state in inputs.allocation_states.items():
        ready = state.ready
        if ready is None or ready.time_left is None or ready.job_id in ending:
            continue
        margin = timedelta(seconds=inputs.desired.allocations[name].spec.min_remaining.seconds)
        yield Due(
            at=taken + ready.time_left - margin,
            kind=LookKind.RENEWAL,
            target=name,
            reason=f"allocation job {ready.job_id} of {name} is down to {span(margin)} "
            "(min_remaining): renewed",
        )


def idle_releases(
    inputs: PlanInputs, used: Collection[str] = (), ending: Collection[str] = ()
) -> Iterator[Due]:
    """Each ready allocation job that no step runs in, when it has been idle for its
    allocation's idle_release (unless a run starts in it first, or this plan releases it
    already)."""
    for name, state in inputs.allocation_states.items():
        limit = inputs.desired.allocations[name].spec.idle_release
        ready = state.ready
        if ready is None or state.idle is None or limit is None:
            continue
        if name in used or ready.job_id in ending:
            continue
        after = timedelta(seconds=limit.seconds)
        yield Due(
            at=inputs.now + after - state.idle,
            kind=LookKind.IDLE_RELEASE,
            target=name,
            reason=f"allocation job {ready.job_id} of {name} has been idle {span(after)} "
            "(idle_release): released",
        )


def grace_ends(inputs: PlanInputs, decided: Mapping[str, Decision]) -> Iterator[Due]:
    """When what the plan waits for because the scheduler does not show it yet counts as
    lost: a run's job, a run's step, an allocation's job, an allocation's setup."""
    lost = f"taken as lost if still not shown after {span(UNSEEN_GRACE)}"
    for name, made in decided.items():
        job_id = made.action.unseen_job
        if job_id is not None:
            record = next((r for r in inputs.history(name) if r.job_id == job_id), None)
            if record is not None:
                yield _grace(record.created_at, name, f"job {job_id} of run {name} is {lost}")
        elif made.action.cause is Cause.STEP_NOT_LISTED and made.uses is not None:
            spec = inputs.desired.runs[name].spec_hash
            for record in inputs.history(name):
                if record.spec_hash == spec and record.status is SubmissionStatus.INTENT:
                    why = f"the step of run {name} started in allocation {made.uses} is {lost}"
                    yield _grace(record.created_at, name, why)
    for name, state in inputs.allocation_states.items():
        if state.ready is not None or state.coming:
            continue
        spec = inputs.desired.allocations[name].spec_hash
        records = inputs.allocation_history(name)
        seen = {job.job_id for job in inputs.allocation_jobs(name)}
        job_id = unseen_job(records, spec, seen, inputs.now)
        record = next((r for r in records if r.job_id == job_id), None)
        if job_id is not None and record is not None:
            why = f"allocation job {job_id} of {name} is {lost}"
            yield _grace(record.created_at, name, why)
    live = {
        job.job_id
        for name in inputs.allocation_states
        for job in inputs.allocation_jobs(name)
        if not job.finished
    }
    last: dict[str, SetupRecord] = {}  # the last setup started in each live job
    for setup in inputs.setups:
        if setup.allocation_job in live:
            last[setup.allocation_job] = setup
    for job_id, setup in last.items():
        if setup.final_health is None and setup.step_id is None:
            why = f"setup started in allocation job {job_id} of {setup.name} is {lost}"
            yield _grace(setup.created_at, setup.name, why)


def time_limits(
    inputs: PlanInputs, decided: Mapping[str, Decision], ending: Collection[str] = ()
) -> Iterator[Due]:
    """The first running job of a chosen run, and of a planned allocation, to reach its
    time limit (as the time left the scheduler showed), those this plan cancels left out.
    Only the first of each is named: a sweep running has thousands."""
    runs = (
        (left, name, job.job_id)
        for name in decided
        for job in inputs.jobs(name)
        if job.job_id not in ending and (left := _time_left(job)) is not None
    )
    allocations = (
        (left, name, job.job_id)
        for name in inputs.allocation_states
        for job in inputs.allocation_jobs(name)
        if job.job_id not in ending and (left := _time_left(job)) is not None
    )
    taken = inputs.observation.taken_at
    first = min(runs, default=None)
    if first is not None:
        left, name, job_id = first
        why = f"job {job_id} of run {name} reaches its time limit"
        yield Due(taken + left, LookKind.TIME_LIMIT, name, why)
    first = min(allocations, default=None)
    if first is not None:
        left, name, job_id = first
        why = f"allocation job {job_id} of {name} reaches its time limit"
        yield Due(taken + left, LookKind.TIME_LIMIT, name, why)


def _time_left(job: ObservedJob) -> timedelta | None:
    """The least time left of the job's running components; None when none runs or
    Slurm shows no limit (or none left: the job is being ended already). A suspended
    job's time left stands still, and one completing has ended: neither counts."""
    lefts = [
        row.time_left
        for row in job.components
        if row.state is SlurmState.RUNNING
        and row.time_left is not None
        and row.time_left > timedelta()
    ]
    return min(lefts, default=None)


def _grace(since: datetime, target: str, reason: str) -> Due:
    return Due(lost_at(since), LookKind.GRACE, target, reason)
