"""How a run's outputs stand against its desired spec (the plan's and status's SYNC
column). Pure."""

from __future__ import annotations

from collections.abc import Sequence

from reconciler.engine.plan.actions import SyncStatus
from reconciler.engine.plan.causes import Cause
from reconciler.engine.plan.history import Stale, Success, settled_health, settled_healths
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
    longer current (``engine/plan/history.staleness``); `history`, `jobs`: all of the run's
    records and observed jobs, of any spec."""
    if success is not None:
        if stale is None:
            return SyncStatus.CURRENT
        return SyncStatus.MISSING if stale.cause is Cause.OUTPUT_MISSING else SyncStatus.OUTDATED
    judged = settled_healths(history)
    succeeded_before = any(r.final_health is Health.SUCCEEDED for r in history) or any(
        settled_health(job, judged) is Health.SUCCEEDED for job in jobs
    )  # COMPLETED without outputs never succeeded
    return SyncStatus.OUTDATED if succeeded_before else SyncStatus.NEVER_RUN
