"""The journal as a pass reads it: once, before the scheduler is asked (see
engine/observe/observation.py), without creating a journal where there is none."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from reconciler.desired.desired import Desired
from reconciler.state.journal import Journal, JournalEvent
from reconciler.state.paths import journal_path
from reconciler.state.records import Rename, SetupRecord, SubmissionRecord


@dataclass(frozen=True)
class JournalState:
    """What the journal holds for the project, read once per pass."""

    records: Sequence[SubmissionRecord] = ()
    setups: Sequence[SetupRecord] = ()
    cancelled: frozenset[str] = frozenset()  # the jobs recon itself cancelled
    renames: Sequence[Rename] = ()  # runs renamed, in the order they were moved


def read_journal(desired: Desired) -> JournalState:
    """The journal's records and setups, without creating a journal where there is none:
    `recon plan` leaves no trace."""
    path = journal_path(desired)
    if not path.exists():
        return JournalState()
    with Journal(path) as journal:
        project = desired.project.project
        return JournalState(
            journal.records(project),
            journal.setups(project),
            journal.cancelled_jobs(project),
            journal.renames(project).made(),
        )


def read_cancel_causes(desired: Desired) -> dict[str, str]:
    """job id -> why recon cancelled it (``Journal.cancel_causes``); none without a journal."""
    path = journal_path(desired)
    if not path.exists():
        return {}
    with Journal(path) as journal:
        return journal.cancel_causes(desired.project.project)


def read_events(desired: Desired, limit: int = 1000) -> list[JournalEvent]:
    """The journal's newest events (teardown reasons...), newest first; none without one."""
    path = journal_path(desired)
    if not path.exists():
        return []
    with Journal(path) as journal:
        return journal.events(desired.project.project, limit=limit)
