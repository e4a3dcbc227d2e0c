"""Fold one pass of sacct and squeue rows into an Observation of recon's jobs. Pure.

Who is right about what:
- squeue speaks for every job slurmctld still holds: sacct can lag behind a submission or
  a state change, and never lists a held pending job at all.
- sacct speaks for jobs slurmctld has forgotten, and alone knows steps' ends and exit
  codes. Steps count only for a component's latest run (see ``_of_latest_run``).
- The steps running in a job squeue lists count too (``live_steps``, from ``squeue
  --steps``), where sacct has no row of them yet: slurmctld records a job in accounting
  only some seconds after it starts (every 5 s, later under load), and until then sacct's
  window shows neither the job nor the steps started in it (``sacct -j`` does, under a
  stand-in row). An allocation's step started in those seconds would otherwise be
  missing, and its run waiting for a job "the scheduler does not show yet".
- A job-level row sacct reports as still alive but squeue no longer lists is stale (a
  state sacct has not caught up with) and is dropped when squeue speaks for the job.
- A job array is judged task by task, the fresher word winning. sacct is asked after squeue,
  so a task sacct shows started while squeue still holds it in its pending range started in
  between: sacct's row is kept, and ``ObservedJob.tasks`` reads a task's own row before a
  range. sacct's pending range keeps only the tasks squeue shows nowhere (none, once
  squeue lists the tasks that started; accounting lags seconds behind). A task sacct still
  shows alive that squeue no longer lists at all ended a moment ago: it stays, alive, until
  accounting catches up, rather than vanish and look never submitted.
- For a second or so after a het job or array task starts, slurmdbd knows its components
  only by their own ids: sacct prints ``42`` and ``42.0`` (JobName ``allocation``, no
  partition) where it later prints ``41+1`` and ``41+1.0``. squeue's ``%A`` column maps
  such an id back to the component (``42`` is ``41+1``). A row of that unsettled kind that
  squeue no longer explains makes the observation incomplete rather than a job of its own,
  and so does a step whose component has no row in either source yet.
- An end is final only when no source still shows the component alive: while squeue says
  COMPLETED and sacct still shows the job or its ``.batch`` step RUNNING (for seconds after
  slurmdbd restarts, now and then under load), the component reads COMPLETING, ended but
  not final, and the next pass looks again. Accounting that never catches up (a runaway
  step slurmdbd missed the end of) is waited for ``LAG_LIMIT`` past the job's end at most.

Rows are grouped by the id sbatch returned (the part before ``+``, ``_`` and ``.``), and a
group is recon's when one of its job-level rows carries a recon tag, the leader's first.
The steps of an allocation that carry a run's tag as their name are that run's jobs too
(``steps.step_runs``).
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import replace
from datetime import datetime, timedelta

from reconciler.scheduler.arrays import compress, expand
from reconciler.scheduler.base import JobRecord, Observation, ObservedJob, UntaggedJob
from reconciler.scheduler.slurm.parse import Parsed, Rejected, job_id_parts
from reconciler.scheduler.slurm.steps import step_runs
from reconciler.scheduler.states import ALIVE, ENDED, HEALTH, Health, SlurmState
from reconciler.scheduler.tag import PREFIX

# The job name slurmdbd gives a job it learnt of from a step before the job itself.
_UNSETTLED_NAME = "allocation"
# How long past a job's end a step sacct still shows alive holds the job's end back.
LAG_LIMIT = timedelta(minutes=10)


def combine(
    squeue: Parsed,
    sacct: Parsed | None,
    taken_at: datetime,
    sacct_failure: str = "",
    live_steps: Parsed | None = None,
) -> Observation:
    """The observation from both commands' rows; ``sacct`` None when it failed (say why);
    ``live_steps``: squeue's rows of the steps running in some of the jobs it lists."""
    aliases = _component_ids(squeue.records)
    history = [
        _as_listed(row, aliases) if row.job_id.partition(".")[0] in aliases else row
        for row in (sacct.records if sacct is not None else ())
    ]
    live_groups = _by_top_id(squeue.records)
    past_groups = _by_top_id(history)
    running_steps = _by_top_id(live_steps.records if live_steps is not None else ())
    problems = [f"sacct failed, only live jobs seen: {sacct_failure}"] if sacct is None else []
    jobs = []
    untagged = []
    for top_id in sorted(live_groups.keys() | past_groups.keys(), key=int):
        live, past = live_groups.get(top_id, []), past_groups.get(top_id, [])
        rows = _merge(live, past, taken_at, running_steps.get(top_id, []))
        tag = next((row.tag for row in rows if row.tag is not None and not row.is_step), None)
        if tag is None:
            untagged.append(UntaggedJob(job_id=top_id, rows=tuple(rows)))
            continue
        unsettled = top_id not in live_groups and any(_unsettled(row) for row in rows)
        if unsettled or _orphan_steps(rows):
            problems.append(f"accounting for job {top_id} ({tag.format()}) has not settled yet")
            continue
        job = ObservedJob(job_id=top_id, tag=tag, rows=tuple(rows))
        jobs += [job, *step_runs(job)]

    rejected = [
        *squeue.rejected,
        *(live_steps.rejected if live_steps is not None else ()),
        *(sacct.rejected if sacct is not None else ()),
    ]
    problems += [
        f"a row of recon's could not be read ({bad.why}): {bad.line}"
        for bad in rejected
        if f"{PREFIX}:" in bad.line
    ]
    return Observation(
        taken_at=taken_at,
        jobs=tuple(jobs),
        untagged=tuple(untagged),
        complete=not problems,
        problems=tuple(problems),
        skipped=tuple(_describe(bad) for bad in rejected),
    )


def _component_ids(live: Iterable[JobRecord]) -> dict[str, str]:
    """Each het component's and array task's own id (squeue ``%A``) -> its printed id."""
    return {
        row.raw_id: row.job_id
        for row in live
        if row.raw_id and (row.het_offset is not None or (row.array_task or "").isdigit())
    }


def _as_listed(row: JobRecord, aliases: dict[str, str]) -> JobRecord:
    """sacct's row under the id squeue lists it by: ``42.0`` becomes ``41+1.0``."""
    head, dot, step = row.job_id.partition(".")
    parts = job_id_parts(aliases[head] + dot + step) if head in aliases else None
    if parts is None:
        return row
    return replace(row, **{"job_id": aliases[head] + dot + step, **parts._asdict()})


def _unsettled(row: JobRecord) -> bool:
    """A component row slurmdbd made from a step before it heard of the job: recon's own jobs
    are never named ``allocation`` (their names hold a dot)."""
    return (
        not row.is_step
        and row.source == "sacct"
        and row.name == _UNSETTLED_NAME
        and row.partition is None
    )


def _by_top_id(records: Iterable[JobRecord]) -> dict[str, list[JobRecord]]:
    groups: dict[str, list[JobRecord]] = {}
    for record in records:  # 300,000 rows of a sweep's tasks: no list made for each
        group = groups.get(record.top_id)
        if group is None:
            groups[record.top_id] = [record]
        else:
            group.append(record)
    return groups


def _merge(
    live: list[JobRecord],
    past: list[JobRecord],
    taken_at: datetime,
    live_steps: list[JobRecord],
) -> list[JobRecord]:
    """Job-level rows from squeue where it has them, from sacct otherwise; steps from sacct,
    and from squeue those of a component it lists that sacct has no row of yet; each
    component followed by its steps, in Slurm's own order."""
    past_by_id = {row.job_id: row for row in past if row.step is None}
    components = [_fill_from(row, past_by_id.get(row.job_id)) for row in live]
    listed = {row.job_id for row in live}
    live_tasks: set[int] | None = None  # the array tasks squeue shows, read when needed
    steps: dict[str, list[JobRecord]] = {}
    for row in past:
        if row.step is not None:  # (is_step, read inline: 300,000 rows)
            steps.setdefault(_owner(row), []).append(row)
        elif row.job_id in listed:
            continue
        elif not live or HEALTH[row.state] not in ALIVE or (row.array_task or "").isdigit():
            components.append(row)
        elif row.array_task is not None:  # a pending range
            live_tasks = _tasks_shown(live) if live_tasks is None else live_tasks
            left = _range_less(row, live_tasks)
            if left is not None:
                components.append(left)
    accounted = {row.job_id for row in past if row.step is not None}
    for row in live_steps:
        if row.job_id not in accounted and _owner(row) in listed:
            steps.setdefault(_owner(row), []).append(row)
    ordered: list[JobRecord] = []
    for component in sorted(components, key=_component_order):
        own = [step for step in steps.pop(component.job_id, ()) if _of_latest_run(step, component)]
        past_row = past_by_id.get(component.job_id)
        ordered += [_final_or_completing(component, past_row, own, taken_at)]
        ordered += own
    ordered += [step for orphans in steps.values() for step in orphans]
    return ordered


def _tasks_shown(live: list[JobRecord]) -> set[int]:
    """Every array task index squeue shows, on a row of its own or in a pending range."""
    shown: set[int] = set()
    for row in live:
        task = row.array_task
        if task is not None:
            shown.update((int(task),) if task.isdigit() else expand(task))
    return shown


def _range_less(pending: JobRecord, shown: set[int]) -> JobRecord | None:
    """sacct's pending range with the tasks squeue shows taken out; None when none is left."""
    left = [index for index in expand(pending.array_task or "") if index not in shown]
    if not left:
        return None
    task = f"[{compress(left)}]"
    return replace(pending, job_id=f"{pending.top_id}_{task}", array_task=task)


def _fill_from(live: JobRecord, past: JobRecord | None) -> JobRecord:
    """squeue's row, with what only sacct knows (exit code, end, its id) filled in."""
    if past is None:
        return live
    return replace(
        live,
        exit_code=past.exit_code,
        signal=past.signal,
        end=live.end or past.end,
        raw_id=live.raw_id or past.raw_id,
        cancelled_by=past.cancelled_by,
        elapsed=past.elapsed,
        time_limit=past.time_limit,
        held=past.held,
    )


def _final_or_completing(
    component: JobRecord, past: JobRecord | None, steps: list[JobRecord], taken_at: datetime
) -> JobRecord:
    """The component as it is, or COMPLETING when it ended by one source's word while the
    other still shows it or one of its steps alive: its end is not final yet."""
    if component.health not in ENDED or component.held_in_queue:
        return component  # a job held in SpecialExit is still queued: sacct says PENDING
    alive = [row for row in (past, *steps) if row is not None and row.health in ALIVE]
    if not alive or (component.end is not None and taken_at - component.end > LAG_LIMIT):
        return component
    lagging = ", ".join(f"{row.job_id} {row.state}" for row in alive)
    return replace(
        component,
        state=SlurmState.COMPLETING,
        reason=f"{component.state} by {component.source}, sacct still shows {lagging}",
        exit_code=None,
        signal=None,
    )


def _orphan_steps(rows: list[JobRecord]) -> bool:
    """Whether a step is listed whose component neither source lists: accounting has the
    step before the job, and the job's end cannot be told yet."""
    components = {row.job_id for row in rows if row.step is None}
    return any(_owner(row) not in components for row in rows if row.step is not None)


def _of_latest_run(step: JobRecord, component: JobRecord) -> bool:
    """Whether a step ran in its component's latest run. A requeued job keeps its earlier
    run's steps (a CANCELLED batch step) in sacct until it starts again, and sacct may not
    have caught up when squeue already shows the new start."""
    if component.health is Health.PENDING:
        return False
    return component.start is None or step.start is None or step.start >= component.start


def _owner(step: JobRecord) -> str:
    return step.job_id.split(".", 1)[0]


def _component_order(row: JobRecord) -> tuple[int, int, str]:
    """Het components by offset; array tasks by index, a pending range ``[..]`` last."""
    task = row.array_task or ""
    return (row.het_offset or 0, int(task) if task.isdigit() else 1 << 62, task)


def _describe(bad: Rejected) -> str:
    return f"{bad.why}: {bad.line}"
