"""Local jobs as the Scheduler protocol's records, read like Slurm's. Pure.

A het script runs as one local job, but is reported as Slurm reports it: one component
row per het component (``12+0``, ``12+1``), all in the job's state. Rows of a job still
queued or running say ``source="squeue"``, rows of a job that has ended ``"sacct"``:
the queue's view and the accounting view, as on Slurm. Local jobs have no steps.

A job array runs as one local job per task and is reported as Slurm 22.05 reports it:
one job under the array's id, a row per task that started (``12_3``), the tasks that
never started in one range row per state (``12_[4-9%2]``, a single one as ``12_4``), and
no row for a task cancelled alone before it started (see ``decide.CANCELLED_ALONE``).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace
from datetime import datetime, timedelta

from reconciler.scheduler.arrays import compress
from reconciler.scheduler.base import Held, JobRecord, ObservedJob
from reconciler.scheduler.local.decide import CANCELLED_ALONE, JobFacts, Status
from reconciler.scheduler.local.store import JobSpec
from reconciler.scheduler.states import ALIVE, HEALTH, Health, SlurmState
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
    base = _record(spec, facts, status, host, now, tag)
    if not het:
        return ObservedJob(job_id=top, tag=tag, rows=(base,))
    rows = tuple(
        replace(
            base,
            job_id=f"{top}+{offset}",
            het_offset=offset,
            held=_held(component.cpus, component.gpus) if base.held is not None else None,
            # one script ran them all: its CPU time is counted once, on the first
            cpu_time=base.cpu_time if offset == 0 else None,
        )
        for offset, component in enumerate(spec.components)
    )
    return ObservedJob(job_id=top, tag=tag, rows=rows)


Task = tuple[JobSpec, JobFacts, Status]


def observed_array(tasks: Sequence[Task], host: str, now: datetime) -> ObservedJob | None:
    """One array's record from its tasks (every one the store holds, in index order);
    None when its comment is no recon tag or no task is left to report."""
    first, _, _ = tasks[0]
    tag = Tag.parse(first.comment)
    if tag is None or first.array is None:
        return None
    top = str(first.array.array_id)
    rows: list[JobRecord] = []
    waited: dict[tuple[SlurmState, str | None], list[Task]] = {}
    for task in tasks:
        spec, facts, status = task
        assert spec.array is not None
        if facts.started is None:
            if status.reason != CANCELLED_ALONE:
                waited.setdefault((status.state, status.reason), []).append(task)
            continue
        row = _record(spec, facts, status, host, now, tag)
        index = str(spec.array.index)
        rows.append(replace(row, job_id=f"{top}_{index}", array_task=index))
    for (state, _), group in waited.items():
        spec, facts, status = group[0]
        indices = [task[0].array.index for task in group if task[0].array is not None]
        limit = spec.array.max_parallel if spec.array is not None else None
        if len(indices) == 1:
            text = str(indices[0])
        else:
            capped = limit is not None and state is SlurmState.PENDING
            text = f"[{compress(indices)}{f'%{limit}' if capped else ''}]"
        row = _record(spec, facts, status, host, now, tag)
        rows.append(replace(row, job_id=f"{top}_{text}", array_task=text, raw_id=top))
    if not rows:
        return None
    return ObservedJob(job_id=top, tag=tag, rows=tuple(rows))


def _record(
    spec: JobSpec, facts: JobFacts, status: Status, host: str, now: datetime, tag: Tag
) -> JobRecord:
    top = str(spec.job_id) if spec.array is None else str(spec.array.array_id)
    return JobRecord(
        job_id=top,
        top_id=top,
        raw_id=str(spec.job_id),
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
        elapsed=_elapsed(facts, status, now),
        time_limit=None if spec.time_limit is None else timedelta(seconds=spec.time_limit),
        held=_held(spec.cpus, spec.gpus) if facts.started is not None else None,
        peak_memory_mb=None if facts.ended is None else facts.ended.peak_memory_mb,
        cpu_time=_cpu_time(facts),
        source="squeue" if HEALTH[status.state] in ALIVE else "sacct",
    )


def _elapsed(facts: JobFacts, status: Status, now: datetime) -> timedelta:
    """How long it has held its CPUs, as sacct's ElapsedRaw says it: none before it
    started, until now while it runs."""
    if facts.started is None:
        return timedelta(0)
    return max((status.end or now) - facts.started, timedelta(0))


def _cpu_time(facts: JobFacts) -> timedelta | None:
    seconds = None if facts.ended is None else facts.ended.cpu_time_s
    return None if seconds is None else timedelta(seconds=seconds)


def _held(cpus: int, gpus: int) -> Held:
    """What a local job holds: its CPUs and the GPUs it was handed on this one host (no
    memory booked)."""
    return Held(cpus=cpus, gpus=gpus, nodes=1)


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
