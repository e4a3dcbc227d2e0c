"""`--notify CMD`: tell a command about what a pass did, as JSON on its stdin.

Events (the payload's "event"):

    run-failed       a job of a run ended failed since the last pass (journalled just now)
    apply-finished   a pass carried out a plan: "counts" says what it did
    <action kind>    any other action a pass carried out that is not routine submitting,
                     cancelling or adopting, named by its kind: "teardown", and whatever
                     later kinds come (an allocation renewed...)
    prune-refused    a pass carried out nothing: its prunes look like an accident (the commit
                     declares nothing, or more than one job and prune_limit); "message" says which
                     runs and what to do. A watch tells it once, not every pass, until it
                     changes (another commit, other jobs) or ends
    budget-refused   a pass carried out nothing: the runs it would submit are forecast to
                     take more GPU-hours than recon.yaml's budget; told as prune-refused is
    watch-failing    `recon watch` had several passes in a row raise something unforeseen
                     (a bug): it keeps trying, backing off; "message" is the last error

Payload: {"event", "project", "commit", "run", "job_id", "message", "time", "counts"}.

The notifier runs through `/bin/sh -c` (so `--notify 'mail -s recon ops@example.org'`
works), with RECON_EVENT set, in a session of its own so that a timeout kills everything
it started. A notifier that fails or hangs is reported and recorded in the journal, and
never fails the pass: the cluster matters more than the message.

Who notifies a failure: whichever process recorded the job's end, since the journal
stamps that record when its outcome changes. A watch and a cron apply beside it each
notify what they saw end, never the same failure twice.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
from collections.abc import Callable, Iterable, Sequence
from dataclasses import asdict, dataclass, field, replace
from datetime import datetime

from reconciler.engine.plan.actions import FAILED_FIXES, ActionKind, RunOutcome
from reconciler.engine.plan.holds import Hold, explain_hold, refused_event
from reconciler.engine.reconcile import PassOutcome
from reconciler.engine.watch import counts
from reconciler.errors import ReconError
from reconciler.scheduler.states import Health
from reconciler.state.journal import Journal
from reconciler.state.paths import journal_path
from reconciler.state.records import SubmissionRecord

TIMEOUT_SECONDS = 30.0
# Action kinds every pass may carry out; the apply-finished counts cover them.
ROUTINE = frozenset(
    {
        ActionKind.SUBMIT, ActionKind.RETRY, ActionKind.REQUEUE, ActionKind.REPLACE,
        ActionKind.MAY_RERUN,
        ActionKind.CANCEL,
        ActionKind.ADOPT, ActionKind.REUSE, ActionKind.SETUP, ActionKind.BLOCKED,
        ActionKind.NOOP, ActionKind.MOVED,
    }
)  # fmt: skip
SHELL = "/bin/sh"


@dataclass(frozen=True)
class Notification:
    event: str
    project: str
    commit: str | None
    run: str | None
    job_id: str | None
    message: str
    time: str
    counts: dict[str, int] | None = None

    def payload(self) -> str:
        return json.dumps(asdict(self), sort_keys=True)


def notifications(
    outcome: PassOutcome, failures: Sequence[SubmissionRecord], now: datetime
) -> list[Notification]:
    """What to tell about one pass. Pure: the failures are read by the caller."""
    plan = outcome.plan
    stamp = now.isoformat()

    def note(event: str, run: str | None, job: str | None, message: str) -> Notification:
        return Notification(event, plan.project, plan.commit, run, job, message, stamp)

    # A run the pass found failed with no retries left: its failure says what fixes it.
    spent = {
        action.target: action.reason
        for action in plan.actions
        if action.target_kind == "run" and action.outcome is RunOutcome.FAILED
    }
    found = [
        note("run-failed", r.name, r.job_id, _failure_message(r, r.name in spent)) for r in failures
    ]
    if outcome.held is not None:
        found.append(note(refused_event(outcome.held), None, None, explain_hold(outcome.held)))
    if outcome.applied is None:
        return found
    for action in plan.actions:
        if action.kind not in ROUTINE:
            for job in action.job_ids or (None,):
                found.append(note(action.kind.value, action.target, job, action.reason))
    tally = counts(outcome)
    summary = ", ".join(f"{tally[k]} {k}" for k in ("submitted", "cancelled", "adopted"))
    where = plan.commit or "the work tree"
    finished = note("apply-finished", None, None, f"applied {where}: {summary}")
    found.append(replace(finished, counts=tally))
    return found


def _failure_message(record: SubmissionRecord, no_retries_left: bool = False) -> str:
    parts = [f"job {record.job_id} of {record.kind} {record.name} failed"]
    if record.exit_code is not None:
        parts.append(f"exit code {record.exit_code}")
    if record.reason:
        parts.append(record.reason)
    told = ", ".join(parts)
    if no_retries_left:
        told += f"; no retries left. {FAILED_FIXES.format(name=record.name)}"
    return told


def failures_since(journal: Journal, project: str, since: datetime) -> list[SubmissionRecord]:
    """Jobs whose failure the journal recorded at or after `since`."""
    return [
        record
        for record in journal.records(project)
        if record.final_health is Health.FAILED and record.updated_at >= since
    ]


def send(command: str, notification: Notification, timeout: float = TIMEOUT_SECONDS) -> str | None:
    """Run the notifier with the payload on stdin; None if it succeeded, else why not."""
    try:
        process = subprocess.Popen(
            [SHELL, "-c", command],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            env={**os.environ, "RECON_EVENT": notification.event},
            start_new_session=True,
        )
    except OSError as error:
        return f"could not start {command!r}: {error}"
    try:
        _, stderr = process.communicate(notification.payload() + "\n", timeout=timeout)
    except subprocess.TimeoutExpired:
        _kill_group(process)
        return f"{command!r} did not finish within {timeout:g} s and was killed"
    if process.returncode != 0:
        tail = stderr.strip().splitlines()[-1:] or ["no message"]
        return f"{command!r} exited with {process.returncode}: {tail[0]}"
    return None


def _kill_group(process: subprocess.Popen[str]) -> None:
    """Kill the notifier and whatever it started (they share its session)."""
    with contextlib.suppress(ProcessLookupError):
        os.killpg(process.pid, signal.SIGKILL)
    # A grandchild that left the session may still hold the pipes: do not wait for it.
    with contextlib.suppress(subprocess.TimeoutExpired):
        process.communicate(timeout=5)


@dataclass
class Notifier:
    """Sends a pass's notifications; reports (never raises) what went wrong through
    `on_failure(event, problem)`, and records each attempt in the journal."""

    command: str
    on_failure: Callable[[str, str], None]
    clock: Callable[[], datetime]
    timeout: float = TIMEOUT_SECONDS
    # The held plan last told (commit, guard): told once, not every pass of a watch.
    told_held: tuple[str | None, Hold] | None = field(default=None, init=False)

    def after_pass(self, outcome: PassOutcome, started: datetime) -> None:
        plan = outcome.plan
        held = None if outcome.held is None else (plan.commit, outcome.held)
        if held is not None and held == self.told_held:
            outcome = replace(outcome, held=None)
        self.told_held = held
        try:
            path = journal_path(outcome.desired)
            journal = Journal(path) if path.exists() else None
        except ReconError as error:
            self.on_failure("run-failed", f"the journal could not be read: {error}")
            journal = None
        if journal is None:
            self._send_all(notifications(outcome, [], self.clock()), None)
            return
        with journal:
            failed = failures_since(journal, plan.project, started)
            self._send_all(notifications(outcome, failed, self.clock()), journal)

    def watch_failing(self, project: str, commit: str | None, crashes: int, error: str) -> None:
        """Tell that watch's passes keep failing. The journal is not touched: it may be
        what fails."""
        message = f"{crashes} passes in a row failed, still retrying; last: {error}"
        stamp = self.clock().isoformat()
        notification = Notification("watch-failing", project, commit, None, None, message, stamp)
        self._send_all([notification], None)

    def _send_all(self, found: Iterable[Notification], journal: Journal | None) -> None:
        for notification in found:
            problem = send(self.command, notification, self.timeout)
            if problem is not None:
                self.on_failure(notification.event, problem)
            if journal is not None:
                said = "sent" if problem is None else f"not sent: {problem}"
                journal.log_event(
                    notification.project,
                    notification.run,
                    "notify",
                    f"{notification.event} {said}",
                    self.clock(),
                )
