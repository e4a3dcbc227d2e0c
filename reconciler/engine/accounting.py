"""What `recon cost` asks the cluster beyond the journal, when it can reach it.

The journal alone says what every settled job held (``scheduler/usage``, recorded when it
was settled). Two things it cannot say:
- what a job still running has held so far: read from one observation, as a pass makes
  it (one squeue, sacct over the journal's window; ``observe.observation.observe``'s calls without
  sinfo), and judged as a pass judges it, writing nothing (``running``);
- what a job settled before recon read usage held: asked of the scheduler's accounting
  by id, in a few calls whatever their number, over the window of their records, and
  written into the journal with the jobs it has no record of, so each is asked once
  (``backfill``).
Neither is ever one call per job. Offline (``--offline``, or a cluster that does not
answer) the journal's figures stand, and the report says what they leave out.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime

from reconciler.desired.desired import Desired
from reconciler.engine.ledger.cost import running_usage
from reconciler.engine.observe import endings
from reconciler.engine.observe.arrays import read_maps
from reconciler.engine.observe.journal import JournalState, read_journal
from reconciler.engine.observe.observation import observation_window, scheduler_for
from reconciler.engine.plan.identity import split_by_owner
from reconciler.errors import ReconError
from reconciler.scheduler.base import (
    JOURNAL_CLOCK_MARGIN,
    AccountingScheduler,
    Observation,
    Scheduler,
)
from reconciler.scheduler.select import Choice
from reconciler.scheduler.usage import JobUsage, usage_of
from reconciler.state.journal import Journal
from reconciler.state.paths import deployment, journal_path
from reconciler.state.records import SubmissionRecord


@dataclass(frozen=True)
class Accounted:
    """The journal's records for `recon cost`, with what the cluster added."""

    records: Sequence[SubmissionRecord]
    live: Mapping[str, JobUsage] | None = None  # job id -> held so far; None: not asked
    looked_at: datetime | None = None  # when the cluster was observed for running jobs
    # why the cluster was not asked, did not answer, or answered in part
    not_reached: str | None = None
    backfilled: int = 0  # jobs whose usage this call back-filled
    not_found: int = 0  # jobs the accounting was asked for and had no record of


def unaccounted(records: Sequence[SubmissionRecord]) -> list[SubmissionRecord]:
    """Jobs that ended with no usage in the journal (settled before recon read it), or
    with usage from before recon read what they used (peak memory, CPU time), that the
    scheduler has not been asked for yet."""
    return [
        record
        for record in records
        if record.job_id is not None
        and record.final_health is not None
        and (record.usage_json is None or not record.used_read)
        and not record.usage_sought
    ]


def account(
    desired: Desired,
    now: datetime,
    *,
    offline: bool = False,
    choice: Choice | None = None,
    scheduler: Scheduler | None = None,
) -> Accounted:
    """The journal's records, back-filled and with the running jobs' usage so far when
    the cluster answers. The cluster is asked only when the journal has a job running or
    one to back-fill."""
    journal = read_journal(desired)
    running = any(r.job_id is not None and r.final_health is None for r in journal.records)
    missing = unaccounted(journal.records)
    if not (running or missing):
        return Accounted(journal.records)
    if offline:
        return Accounted(journal.records, not_reached="--offline: the cluster was not asked")
    filled = not_found = 0
    try:
        scheduler = scheduler or scheduler_for(desired, choice)
        if missing and isinstance(scheduler, AccountingScheduler):
            filled, not_found = backfill(desired, scheduler, missing, now)
            journal = read_journal(desired)
        if not running:
            return Accounted(journal.records, backfilled=filled, not_found=not_found)
        records, observation = _judged(desired, scheduler, journal, now)
    except ReconError as error:
        why = f"the cluster could not be asked: {error}"
        return Accounted(journal.records, not_reached=why, backfilled=filled, not_found=not_found)
    live = running_usage(observation, records)
    partial = None if observation.complete else "; ".join(observation.problems[:3])
    return Accounted(records, live, observation.taken_at, partial, filled, not_found)


def _judged(
    desired: Desired, scheduler: Scheduler, journal: JournalState, now: datetime
) -> tuple[Sequence[SubmissionRecord], Observation]:
    """The journal's records as a pass would judge them now (a job ended since the last
    apply with how it ended and its usage; nothing written), and the deployment's jobs."""
    found = scheduler.observe(observation_window(journal.records, journal.setups, now))
    project, place = desired.project.project, deployment(desired)
    own = split_by_owner(
        found, project, place, journal.records, read_maps(found, project, place)
    ).own
    ended = endings.judge(desired, own, journal.records)
    return endings.as_recorded(journal.records, ended), own


def backfill(
    desired: Desired,
    scheduler: AccountingScheduler,
    missing: Sequence[SubmissionRecord],
    now: datetime,
) -> tuple[int, int]:
    """Ask the accounting for ``missing`` jobs' usage (their ids, over their records'
    window) and write it into the journal; jobs it has no record of at all are stamped,
    not asked again. A job it lists that cannot be matched to its record (an array whose
    member map is gone) is left for a later call. Returns (filled, not found).

    Jobs are stamped only when the accounting knew at least one of those asked for: one
    that knows none may be the wrong one (`scheduler: auto` on a machine without Slurm
    picks the local backend, whose store never held the cluster's jobs), and stamping
    would hide them from the right one for good. They are then asked again next time."""
    since = min(record.created_at for record in missing) - JOURNAL_CLOCK_MARGIN
    until = max(record.updated_at for record in missing) + JOURNAL_CLOCK_MARGIN
    ids = sorted({record.job_id for record in missing if record.job_id is not None})
    listed = scheduler.accounting(ids, since, until)
    project, place = desired.project.project, deployment(desired)
    own = split_by_owner(listed, project, place, missing, read_maps(listed, project, place)).own
    by_key = {(r.job_id, r.kind, r.name): r for r in missing}
    found: dict[int, JobUsage] = {}
    for job in own.jobs:
        record = by_key.get((job.job_id, job.tag.kind, job.tag.name))
        usage = None if record is None else usage_of(job, allocation=record.kind == "alloc")
        if record is not None and usage is not None:
            found[record.id] = usage
    accounted = {_top(job.job_id) for job in listed.jobs} | {_top(j.job_id) for j in own.jobs}
    gone = [r.id for r in missing if r.id not in found and _top(r.job_id or "") not in accounted]
    if not found and not own.jobs:
        gone = []  # it knew none of them: maybe not the accounting they went to
    with Journal(journal_path(desired)) as journal:
        journal.record_usages(found, gone, now)
    return len(found), len(gone)


def _top(job_id: str) -> str:
    return job_id.partition(".")[0].partition("_")[0]
