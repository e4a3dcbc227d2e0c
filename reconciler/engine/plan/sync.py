"""How a run's outputs stand against its desired spec (the plan's and status's SYNC
column). Pure."""

from __future__ import annotations

from collections.abc import Sequence

from reconciler.engine.plan.actions import Cause, SyncStatus
from reconciler.engine.plan.history import Stale, Success
from reconciler.scheduler.base import ObservedJob
from reconciler.scheduler.states import Health
from reconciler.state.records import SubmissionRecord


def sync_status(
    success: Success | None,
    stale: Stale | None,
    history: Sequence[SubmissionRecord],
    jobs: Sequence[ObservedJob],
) -> SyncStatus:
    """`success`: the run's last success of its current spec; `stale`: why that is no
    longer current (``plan_history.staleness``); `history`, `jobs`: all of the run's
    records and observed jobs, of any spec."""
    if success is not None:
        if stale is None:
            return SyncStatus.CURRENT
        return SyncStatus.MISSING if stale.cause is Cause.OUTPUT_MISSING else SyncStatus.OUTDATED
    judged = {r.job_id for r in history if r.final_health is not None}
    succeeded_before = any(r.final_health is Health.SUCCEEDED for r in history) or any(
        job.health is Health.SUCCEEDED and job.job_id not in judged for job in jobs
    )  # the journal's judgement wins: COMPLETED without outputs never succeeded
    return SyncStatus.OUTDATED if succeeded_before else SyncStatus.NEVER_RUN
