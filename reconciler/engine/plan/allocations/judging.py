"""How an allocation's jobs stand: each job's own health and stage, how its setup went,
which steps still run (or may run) in it, how long it has been idle. Pure.

    queued      granted nodes not yet                  wait for it
    setting up  its setup step runs (or was started)   wait for it
    needs setup running, setup never started in it     start setup (action ``setup``)
    ready       running, set up, more than             runs start in it: ``reuse``
                min_remaining left
    expiring    running, min_remaining or less left    replaced (renewed)
    broken      its setup failed                       released; the spec is blocked

A job is judged by the cluster's rows first (its own, then its setup step's, named with
the job's own tag), and by the journal's records once they have left sacct's window.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from datetime import datetime, timedelta
from enum import Enum

from reconciler.desired.desired import DesiredAllocation
from reconciler.engine.plan.inputs import PlanInputs
from reconciler.scheduler.base import OWN_STEPS, JobRecord, Launch, ObservedJob, job_order
from reconciler.scheduler.states import ENDED, ENDED_BADLY, Health, aggregate, ending
from reconciler.state.records import within_grace
from reconciler.words import plural


class Stage(Enum):
    QUEUED = "queued"
    SETTING_UP = "setting up"
    NEEDS_SETUP = "needs setup"
    READY = "ready"
    EXPIRING = "expiring"
    BROKEN = "broken"


def judged_health(job: ObservedJob) -> Health:
    """An allocation job's own health, by its components: its steps (a run that failed in
    it) are not its own."""
    return aggregate(row.health for row in job.components)


def holds(job: ObservedJob) -> bool:
    """Whether the job still holds (or waits for) its nodes."""
    return not job.finished and judged_health(job) not in ENDED


def stage(inputs: PlanInputs, allocation: DesiredAllocation, job: ObservedJob) -> Stage:
    if judged_health(job) is not Health.RUNNING:
        return Stage.QUEUED
    if allocation.spec.setup:
        setup = _setup_stage(inputs, job)
        if setup is not Stage.READY:
            return setup
    left = time_left(job)
    if left is not None and left.total_seconds() <= allocation.spec.min_remaining.seconds:
        return Stage.EXPIRING
    return Stage.READY


def _setup_stage(inputs: PlanInputs, job: ObservedJob) -> Stage:
    """How setup stands in a running job: by its steps (named with the job's own tag),
    else by the journal's record of starting it."""
    steps = [row for row in job.steps if row.step_tag == job.tag]
    if steps:
        health = aggregate(row.health for row in steps)
        if health in ENDED_BADLY:
            return Stage.BROKEN
        return Stage.READY if health is Health.SUCCEEDED else Stage.SETTING_UP
    started = [s for s in inputs.setups if s.allocation_job == job.job_id]
    if not started:
        return Stage.NEEDS_SETUP
    last = started[-1]
    if last.final_health is Health.SUCCEEDED:
        return Stage.READY  # its step has left sacct's window
    if last.final_health in ENDED_BADLY:
        return Stage.BROKEN
    if within_grace(last.created_at, inputs.now):
        return Stage.SETTING_UP
    return Stage.NEEDS_SETUP  # started long ago and never seen: lost, start it again


def setup_failures(
    inputs: PlanInputs, allocation: DesiredAllocation, jobs: Sequence[ObservedJob]
) -> dict[str, str]:
    """How setup failed in each job of this spec where it did (one setup per job), by the
    cluster's steps or by the journal once they have left sacct's window. A setup
    cancelled with its allocation (released, out of time) is no failure of its own."""
    failed: dict[str, str] = {}
    if not allocation.spec.setup:
        return failed
    for setup in inputs.setups:
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


def setup_failure(allocation: DesiredAllocation, failed: Mapping[str, str]) -> str | None:
    """Why this spec's setup is known to fail, once it has failed in more jobs than
    setup_retries allows: it is not allocated again until the spec changes."""
    if len(failed) <= allocation.spec.setup_retries:
        return None
    last = max(failed, key=job_order)
    tries = len(failed)
    return (
        f"setup failed in allocation job {last}: {failed[last]}, {tries} of {tries} tries "
        "failed; fix setup and commit"
    )


def tries_left(allocation: DesiredAllocation, failed: Mapping[str, str]) -> str:
    """How many tries of setup are left, once it has failed before (this one included)."""
    if not failed:
        return ""
    left = allocation.spec.setup_retries + 1 - len(failed)
    last = max(failed, key=job_order)
    return f"; setup failed in job {last}, {plural(left, 'try', 'tries')} left"


def idle_for(job: ObservedJob, now: datetime, busy: bool = False) -> timedelta | None:
    """How long no step has run in a running allocation job: since the last of its steps
    ended, else since it started. None while a step runs in it (or ``busy``: one started
    or held back that Slurm does not list), or before it starts."""
    if busy or job.live_steps or judged_health(job) is not Health.RUNNING:
        return None
    moments = [row.end for row in job.ended_steps if row.step not in OWN_STEPS and row.end]
    moments += [row.start for row in job.components if row.start is not None]
    if not moments:
        return None
    return max(now - max(moments), timedelta())


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


def running_steps(inputs: PlanInputs, job: ObservedJob) -> list[str]:
    """The steps that run in the job, named as a reason says them: those sacct shows
    running, then ``unended_steps``."""
    return [_step_name(row) for row in job.live_steps] + unended_steps(inputs, job)


def unended_steps(inputs: PlanInputs, job: ObservedJob) -> list[str]:
    """Steps the journal says recon started in the job, not shown by sacct at all, whose
    end is not recorded; and steps srun holds back in it (released, they would never run)."""
    shown = {row.job_id for row in job.steps}
    held = sorted(
        {
            f"{job.job_id}.? (run {launch.tag.name}, held back by srun)"
            for launch in held_back(job, inputs.observation.launches or ())
        }
    )
    prefix = f"{job.job_id}."
    runs = [
        f"{r.job_id} (run {r.name})"
        for r in inputs.step_records(job.job_id)
        if r.job_id is not None
        and r.job_id.startswith(prefix)
        and r.job_id not in shown
        and r.final_health is None
    ]
    setups = [
        f"{s.step_id or prefix + '?'} (setup)"
        for s in inputs.setups
        if s.allocation_job == job.job_id and s.step_id not in shown and s.final_health is None
    ]
    return runs + setups + held


def _step_name(row: JobRecord) -> str:
    tag = row.step_tag
    if tag is None:
        return row.job_id
    return f"{row.job_id} ({'run ' + tag.name if tag.kind == 'run' else 'setup'})"


def time_left(job: ObservedJob) -> timedelta | None:
    return next((row.time_left for row in job.components if row.time_left is not None), None)


def nodes(job: ObservedJob) -> str:
    return next((row.nodes for row in job.components if row.nodes), "its nodes")
