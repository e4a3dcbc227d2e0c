"""`recon apply --wait`: reconcile again and again until every targeted run's outcome is final.

Each pass is an ordinary `reconcile_once` (so outputs that change upstream cascade in
the following pass, and teardowns happen), then the loop sleeps. It ends when a pass
finds nothing to change and no targeted run still in flight: each run is then done
(current), failed (no retries left) or blocked.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime

from reconciler.desired.desired import Desired
from reconciler.engine.plan.actions import FINAL, Action, Plan, RunOutcome
from reconciler.engine.plan.prune import explain
from reconciler.engine.reconcile import PassOutcome, Request, reconcile_once
from reconciler.errors import PruneRefusedError
from reconciler.scheduler.base import Scheduler
from reconciler.state.records import SubmissionRecord


@dataclass(frozen=True)
class Progress:
    plan: Plan
    elapsed: float  # seconds since the wait began
    passes: int
    desired: Desired
    records: Sequence[SubmissionRecord]  # the journal's, as the last pass left it

    @property
    def runs(self) -> list[Action]:
        return [a for a in self.plan.actions if a.outcome is not None]

    @property
    def final(self) -> bool:
        """Nothing left to change, and every run done, failed or blocked."""
        return not self.plan.has_changes and all(a.outcome in FINAL for a in self.runs)

    @property
    def failed(self) -> list[Action]:
        return [a for a in self.runs if a.outcome in (RunOutcome.FAILED, RunOutcome.BLOCKED)]


def wait_until_final(
    request: Request,
    *,
    scheduler: Scheduler | None = None,
    on_pass: Callable[[Progress, PassOutcome], None] = lambda _progress, _outcome: None,
    poll: float = 2.0,
    lock_timeout: float = 60.0,
    timeout: float | None = None,
    clock: Callable[[], float] = time.monotonic,
    sleep: Callable[[float], None] = time.sleep,
    now: Callable[[], datetime] = lambda: datetime.now(UTC),
) -> Progress:
    """Reconcile until every run's outcome is final (or `timeout` seconds); returns the
    last progress."""
    started = clock()
    passes = 0
    while True:
        outcome = reconcile_once(request, scheduler=scheduler, lock_timeout=lock_timeout, clock=now)
        passes += 1
        progress = Progress(
            outcome.plan, clock() - started, passes, outcome.desired, outcome.look.records
        )
        on_pass(progress, outcome)
        if outcome.held is not None:  # a commit made while waiting empties the project
            raise PruneRefusedError(f"refused to apply: {explain(outcome.held)}")
        if progress.final and outcome.applied is None:
            return progress
        if timeout is not None and progress.elapsed >= timeout:
            return progress
        sleep(poll)
