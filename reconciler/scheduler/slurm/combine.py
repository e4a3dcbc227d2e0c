"""Fold one pass of sacct and squeue rows into an Observation of recon's jobs. Pure.

Who is right about what:
- squeue speaks for every job slurmctld still holds: sacct can lag behind a submission or
  a state change, and never lists a held pending job at all.
- sacct speaks for jobs slurmctld has forgotten, and alone knows steps and exit codes.
- A job-level row sacct reports as still alive but squeue no longer lists is stale (an
  array's pending range after tasks started, a state sacct has not caught up with) and is
  dropped when squeue speaks for the job.

Rows are grouped by the id sbatch returned (the part before ``+``, ``_`` and ``.``), and a
group is recon's when one of its job-level rows carries a recon tag, the leader's first.
"""

from __future__ import annotations

from collections.abc import Iterable
from datetime import datetime

from reconciler.scheduler.base import JobRecord, Observation, ObservedJob
from reconciler.scheduler.slurm.parse import Parsed, Rejected
from reconciler.scheduler.states import HEALTH, Health
from reconciler.scheduler.tag import PREFIX

_ALIVE = {Health.PENDING, Health.RUNNING}


def combine(
    squeue: Parsed, sacct: Parsed | None, taken_at: datetime, sacct_failure: str = ""
) -> Observation:
    """The observation from both commands' rows; ``sacct`` None when it failed (say why)."""
    history = sacct.records if sacct is not None else ()
    live_groups = _by_top_id(squeue.records)
    past_groups = _by_top_id(history)
    jobs = []
    for top_id in sorted(live_groups.keys() | past_groups.keys(), key=int):
        rows = _merge(live_groups.get(top_id, []), past_groups.get(top_id, []))
        tag = next((row.tag for row in rows if row.tag is not None and not row.is_step), None)
        if tag is not None:
            jobs.append(ObservedJob(job_id=top_id, tag=tag, rows=tuple(rows)))

    rejected = [*squeue.rejected, *(sacct.rejected if sacct is not None else ())]
    problems = [f"sacct failed, only live jobs seen: {sacct_failure}"] if sacct is None else []
    problems += [
        f"a row of recon's could not be read ({bad.why}): {bad.line}"
        for bad in rejected
        if f"{PREFIX}:" in bad.line
    ]
    return Observation(
        taken_at=taken_at,
        jobs=tuple(jobs),
        complete=not problems,
        problems=tuple(problems),
        skipped=tuple(_describe(bad) for bad in rejected),
    )


def _by_top_id(records: Iterable[JobRecord]) -> dict[str, list[JobRecord]]:
    groups: dict[str, list[JobRecord]] = {}
    for record in records:
        groups.setdefault(record.top_id, []).append(record)
    return groups


def _merge(live: list[JobRecord], past: list[JobRecord]) -> list[JobRecord]:
    """Job-level rows from squeue where it has them, from sacct otherwise; steps from sacct;
    each component followed by its steps, in Slurm's own order."""
    past_by_id = {row.job_id: row for row in past}
    components = [_fill_from(row, past_by_id.get(row.job_id)) for row in live]
    listed = {row.job_id for row in live}
    components += [
        row
        for row in past
        if not row.is_step
        and row.job_id not in listed
        and not (live and HEALTH[row.state] in _ALIVE)
    ]
    steps = [row for row in past if row.is_step]
    ordered: list[JobRecord] = []
    for component in sorted(components, key=_component_order):
        ordered.append(component)
        ordered += [step for step in steps if _owner(step) == component.job_id]
    owners = {component.job_id for component in components}
    ordered += [step for step in steps if _owner(step) not in owners]
    return ordered


def _fill_from(live: JobRecord, past: JobRecord | None) -> JobRecord:
    """squeue's row, with what only sacct knows (exit code, end, its id) filled in."""
    if past is None:
        return live
    return live.model_copy(
        update={
            "exit_code": past.exit_code,
            "signal": past.signal,
            "end": live.end or past.end,
            "raw_id": live.raw_id or past.raw_id,
            "cancelled_by": past.cancelled_by,
        }
    )


def _owner(step: JobRecord) -> str:
    return step.job_id.split(".", 1)[0]


def _component_order(row: JobRecord) -> tuple[int, int, str]:
    """Het components by offset; array tasks by index, a pending range ``[..]`` last."""
    task = row.array_task or ""
    return (row.het_offset or 0, int(task) if task.isdigit() else 1 << 62, task)


def _describe(bad: Rejected) -> str:
    return f"{bad.why}: {bad.line}"
