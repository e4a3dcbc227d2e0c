"""`recon apply --wait`: reconcile again and again until every targeted run's outcome is final.

Each pass is an ordinary `reconcile_once` (so outputs that change upstream cascade in
the following pass, and teardowns happen), then the loop sleeps. It ends when a pass
finds nothing to change and no targeted run still in flight: each run is then done
(current), failed (no retries left) or blocked.

The passes follow the commit of the plan that was shown and approved, never a later
one: a commit made meanwhile is reported and left to `recon apply` or `recon watch`,
which show it first. From then on the passes carry out nothing (at the older commit they
would take the newer commit's jobs for outdated ones), and the wait ends once nothing
the approved plan started is still in flight.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from datetime import UTC, datetime

from reconciler.desired.desired import Desired
from reconciler.desired.source import commit_of
from reconciler.engine.plan.actions import CHANGING, FINAL, Action, Plan, RunOutcome
from reconciler.engine.plan.holds import refusal, suspended_notes
from reconciler.engine.reconcile import PassOutcome, Request, reconcile_once
from reconciler.errors import SuspendedError
from reconciler.scheduler.base import Scheduler
from reconciler.state.records import SubmissionRecord


@dataclass(frozen=True)
class Progress:
    plan: Plan
    elapsed: float  # seconds since the wait began
    passes: int
    desired: Desired
    records: Sequence[SubmissionRecord]  # the journal's, as the last pass left it
    moved_to: str | None = None  # the commit HEAD moved to while waiting: not applied

    @property
    def runs(self) -> list[Action]:
        return [a for a in self.plan.actions if a.outcome is not None]

    @property
    def final(self) -> bool:
        """Nothing left to change, and every run done, failed or blocked."""
        return not self.plan.has_changes and all(a.outcome in FINAL for a in self.runs)

    @property
    def nothing_in_flight(self) -> bool:
        """Every run final, or waiting for an action this wait will not carry out."""
        return all(a.outcome in FINAL or a.kind in CHANGING for a in self.runs)

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
    approved: str | None = None,
    on_moved: Callable[[str], None] = lambda _commit: None,
) -> Progress:
    """Reconcile until every run's outcome is final (or `timeout` seconds); returns the
    last progress. ``approved``: the commit of the plan shown and approved (None for the
    work tree), which the passes follow; ``on_moved`` is told once of a later commit
    that the request's revision (HEAD) names instead."""
    started = clock()
    passes = 0
    pinned = request if approved is None else replace(request, revision=approved)
    moved_to: str | None = None
    while True:
        if approved is not None and moved_to is None:
            head = commit_of(request.root, request.revision or "HEAD")
            if head is not None and head != approved:
                moved_to = head
                on_moved(head)
        outcome = reconcile_once(
            pinned,
            scheduler=scheduler,
            approve=_carry_out if moved_to is None else _carry_out_nothing,
            lock_timeout=lock_timeout,
            clock=now,
        )
        passes += 1
        progress = Progress(
            outcome.plan,
            clock() - started,
            passes,
            outcome.desired,
            outcome.look.records,
            moved_to,
        )
        on_pass(progress, outcome)
        if outcome.held is not None:  # the approved plan held (prunes, budget)
            raise refusal(outcome.held)
        if outcome.plan.suspended and progress.nothing_in_flight:
            raise SuspendedError(f"not waiting: {suspended_notes(outcome.plan.actions)[0]}")
        if progress.final and outcome.applied is None:
            return progress
        if moved_to is not None and progress.nothing_in_flight:
            return progress
        if timeout is not None and progress.elapsed >= timeout:
            return progress
        sleep(poll)


def _carry_out(_plan: Plan) -> bool:
    return True


def _carry_out_nothing(_plan: Plan) -> bool:
    return False
