"""The jobs of a run's current spec whose fate recon has not seen: the journal holds them,
the cluster does not show them (yet). Pure.

Slurm's views lag behind each other and slurmctld can lose a job it had just accepted,
so the decision table (engine/plan/runs.py) asks here whether to wait for such a job
(``unseen``, ``unlisted_step``), take it as lost (``lost_jobs``, ``vanished``), hold back
because its fate is unknown (``fate_unknown``), or not send again what was refused
(``refused_last``).
"""

from __future__ import annotations

from collections.abc import Collection, Sequence

from reconciler.desired.desired import DesiredRun
from reconciler.engine.plan.inputs import PlanInputs
from reconciler.state.records import SubmissionRecord, SubmissionStatus, unseen_job, within_grace


def unseen(inputs: PlanInputs, run: DesiredRun) -> str | None:
    """A job of the current spec the journal holds but no observation shows yet.

    Slurm's two views lag behind each other (a job can leave squeue before sacct stores
    its comment), so absence right after submission proves nothing. Only once it has
    stayed unseen for `UNSEEN_GRACE` is it taken as lost, and the run submitted again;
    at once when Slurm shows its id as another job of recon's (``lost_jobs``).
    """
    observed = {job.job_id for job in inputs.jobs(run.name)}
    lost = {job_id for job_id, _ in lost_jobs(inputs, run)}
    return unseen_job(inputs.history(run.name), run.spec_hash, observed | lost, inputs.now)


def lost_jobs(inputs: PlanInputs, run: DesiredRun) -> list[tuple[str, str]]:
    """(job id, the tag it shows now) for each job of the run's current spec whose end the
    journal has not recorded and whose id Slurm now shows carrying another tag
    (``identity.by_id``): slurmctld killed and restarted can lose jobs it had just
    accepted and hand their ids to new submissions. Such a job is lost, not live, and
    waiting for it is pointless."""
    reused = inputs.observation.reused_ids
    return [
        (record.job_id, reused[record.job_id])
        for record in inputs.history(run.name)
        if record.spec_hash == run.spec_hash
        and record.final_health is None
        and record.job_id in reused
    ]


def vanished(inputs: PlanInputs, run: DesiredRun) -> list[str]:
    """The jobs of the run's current spec the journal holds, whose end it never saw, that
    no observation shows: once past their grace (``unseen``), lost without a trace."""
    seen = {job.job_id for job in inputs.jobs(run.name)}
    return [
        record.job_id
        for record in inputs.history(run.name)
        if record.spec_hash == run.spec_hash
        and record.job_id is not None
        and record.final_health is None
        and record.job_id not in seen
    ]


def unlisted_step(inputs: PlanInputs, run: DesiredRun) -> str | None:
    """A step of the current spec started whose id Slurm has not told yet: srun holds it
    back until the allocation has room (for what the planner does not count before it
    starts a step, engine/plan/allocations/gpus.py ``short_of``: CPUs, a step of unknown
    share), or Slurm is slow to list it. It is found by its name once listed (and
    adopted); starting it again meanwhile would run it twice. While its srun runs here it
    waits, however long; with no srun seen, for ``UNSEEN_GRACE``; and when the processes
    could not be looked at, until they can."""
    if run.allocation is None:
        return None
    started = [
        record
        for record in inputs.history(run.name)
        if record.spec_hash == run.spec_hash and record.status is SubmissionStatus.INTENT
    ]
    if not started:
        return None
    launches = inputs.observation.launches
    held = [
        launch
        for launch in launches or ()
        if launch.tag.project == inputs.project
        and launch.tag.kind == "run"
        and launch.tag.name == run.name
        and launch.tag.spec_hash == run.spec_hash
    ]
    if held:
        return (
            f"srun holds its step back until allocation {run.allocation} (job "
            f"{held[-1].allocation_id}) has room for it; not starting it again"
        )
    if launches is None:
        return (
            f"started in allocation {run.allocation}, not listed yet, and its srun "
            "could not be looked for; not starting it again"
        )
    if any(within_grace(record.created_at, inputs.now) for record in started):
        return (
            f"started in allocation {run.allocation}, but Slurm does not list "
            "its step yet; not starting it again"
        )
    return None


def fate_unknown(
    history: Sequence[SubmissionRecord], run: DesiredRun, seen: Collection[str] = ()
) -> bool:
    """The journal holds a job of the current spec whose end it never saw, and that the
    observation does not show (``seen``: the ids it shows; a job it shows has its fate
    told there)."""
    return any(
        record.spec_hash == run.spec_hash
        and record.status is not SubmissionStatus.REFUSED
        and record.final_health is None
        and record.job_id not in seen
        for record in history
    )


def refused_last(
    history: Sequence[SubmissionRecord], spec_hash: str, commit: str | None
) -> str | None:
    """Why the last submission of a run or allocation was refused, if it was, at this
    spec hash and commit (the scheduler's words, or recon's before it sent it): sent
    again, it would be refused again. None otherwise, and once the commit moves on."""
    if not history:
        return None
    last = history[-1]
    if (
        last.status is not SubmissionStatus.REFUSED
        or last.spec_hash != spec_hash
        or last.commit != commit
    ):
        return None
    return last.reason or "no reason given"
