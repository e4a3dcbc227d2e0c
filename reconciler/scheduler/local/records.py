"""Local jobs as the Scheduler protocol's records, read like Slurm's. Pure.

A het script runs as one local job, but is reported as Slurm reports it: one component
row per het component (``12+0``, ``12+1``), all in the job's state. Rows of a job still
queued or running say ``source="squeue"``, rows of a job that has ended ``"sacct"``:
the queue's view and the accounting view, as on Slurm. Local jobs have no steps.
"""

from __future__ import annotations

from datetime import datetime, timedelta

from reconciler.scheduler.base import JobRecord, ObservedJob
from reconciler.scheduler.local.decide import JobFacts, Status
from reconciler.scheduler.local.store import JobSpec
from reconciler.scheduler.states import ALIVE, HEALTH, Health
from reconciler.scheduler.tag import Tag

PARTITION = "local"


def observed_job(
    spec: JobSpec, facts: JobFacts, status: Status, host: str, now: datetime
) -> ObservedJob | None:
    """The job's record; None when its comment is no recon tag (nothing recon submitted)."""
    tag = Tag.parse(spec.comment)
    if tag is None:
        return None
    top = str(spec.job_id)
    het = len(spec.components) > 1
    base = JobRecord(
        job_id=top,
        top_id=top,
        raw_id=top,
        name=spec.name,
        tag=tag,
        state=status.state,
        cancelled_by=facts.cancelled.by if facts.cancelled is not None else None,
        exit_code=_exit_code(facts),
        signal=facts.ended.signal if facts.ended is not None else None,
        reason=status.reason,
        submit=facts.submitted,
        start=facts.started,
        end=status.end,
        time_left=_time_left(spec, facts, status, now),
        nodes=host if facts.started is not None else None,
        partition=PARTITION,
        workdir=spec.workdir,
        source="squeue" if HEALTH[status.state] in ALIVE else "sacct",
    )
    if not het:
        return ObservedJob(job_id=top, tag=tag, rows=(base,))
    rows = tuple(
        base.model_copy(update={"job_id": f"{top}+{offset}", "het_offset": offset})
        for offset in range(len(spec.components))
    )
    return ObservedJob(job_id=top, tag=tag, rows=rows)


def _exit_code(facts: JobFacts) -> int | None:
    if facts.ended is not None:
        return facts.ended.exit_code
    # Cancelled before it started: sacct prints 0:0.
    return 0 if facts.cancelled is not None and facts.started is None else None


def _time_left(spec: JobSpec, facts: JobFacts, status: Status, now: datetime) -> timedelta | None:
    if (
        spec.time_limit is None
        or facts.started is None
        or HEALTH[status.state] is not Health.RUNNING
    ):
        return None
    left = timedelta(seconds=spec.time_limit) - (now - facts.started)
    return max(left, timedelta(0))


def in_window(spec: JobSpec, facts: JobFacts, status: Status, since: datetime) -> bool:
    """Submitted since ``since``, still alive, or ended since: what sacct -S shows."""
    if spec.submitted >= since or HEALTH[status.state] in ALIVE:
        return True
    return status.end is None or status.end >= since
