"""`recon watch`: call reconcile_once again and again, on new commits and on a timer.

Level-based like every pass: a wake-up (a ref changed, the interval elapsed, the plan's
next look came) is only a hint to look again. Each pass resolves the branch's tip itself,
so a missed or spurious file event costs at most one interval, never a wrong decision.

A pass that ends well returns when it next needs to look, as controller-runtime's
``Result{RequeueAfter}``: its plan's ``next_look`` (an allocation's renewal or idle
release, a grace ending, a job's time limit: engine/plan/requeue.py). The next timer pass
runs then or after the interval, whichever comes first, and never sooner than
``Schedule.look_floor`` (a look already due means soon, not a busy loop). A pass that
fails has no plan to ask: it backs off instead, as controller-runtime ignores the Result
of a Reconcile that returned an error.

Split in two:

- `Schedule` and `LoopState`: pure decisions (when is the next pass due, does this
  wake-up warrant one, how long to back off), tested with plain values;
- `WatchLoop`: the loop, whose every effect is injected (the clock, the wake-up source
  that also does the sleeping, the tip resolver, the pass, the pull, the log), so tests
  drive it with a frozen clock and never wait.

Errors, by how the loop handles them:

    SpecError       the commit is bad: logged, then no pass until the tip moves
    a held plan     its prunes look like an accident (engine/plan/prune.py) or it passes
                    the GPU-hour budget (engine/plan/holds.py): nothing is done; logged
                    (and notified) once per commit, and the passes go on, each held until
                    a commit fixes it or `recon apply --allow-prune-all` (or
                    `--allow-over-budget`) confirms it. A suspended pass carries out
                    nothing for what is suspended; logged once per commit
    other ReconError transient (scheduler down, sacct failing, the lock held by a cron
                    apply, a git hiccup): back off exponentially, capped, and try again
    anything else   a bug, or a fault nobody foresaw: logged with its traceback, counted,
                    backed off like a transient error, and the next pass runs. One bad
                    pass never ends the service; `crash_loop_after` of them in a row are
                    reported through `on_crash_loop` (watch's --notify), once per streak.
"""

from __future__ import annotations

import traceback
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from datetime import datetime, timedelta
from enum import StrEnum
from typing import Any, Protocol

from reconciler.engine.plan.actions import NextLook
from reconciler.engine.plan.holds import Hold, explain_hold, refused_event, suspended_notes
from reconciler.engine.reconcile import PassOutcome
from reconciler.errors import ReconError, SpecError

Clock = Callable[[], datetime]


class Wake(StrEnum):
    """Why the loop woke up."""

    REFS = "refs"  # a watched git ref changed (maybe a new commit)
    TIMER = "timer"  # the wait timed out: the next timer pass (or the plan's look) is due
    STOP = "stop"  # SIGINT/SIGTERM: finish up and leave


class Wakeups(Protocol):
    """The loop's only way to wait: return at the latest after `timeout` seconds."""

    def wait(self, timeout: float) -> Wake: ...


class Level(StrEnum):
    INFO = "info"
    WARNING = "warning"
    ERROR = "error"


class Log(Protocol):
    def __call__(self, level: Level, event: str, **fields: Any) -> None: ...


@dataclass(frozen=True)
class Schedule:
    """How often to pass, how soon a plan's next look may bring a pass forward, and how
    to back off after transient errors."""

    interval: timedelta
    backoff_first: timedelta = timedelta(seconds=1)
    backoff_cap: timedelta = timedelta(minutes=5)
    # The shortest wait a plan's next look sets: one already due (or due in a moment)
    # is looked at soon, never in a loop that asks the scheduler without pause.
    look_floor: timedelta = timedelta(seconds=5)

    def next_pass(self, now: datetime, look: NextLook | None) -> tuple[datetime, NextLook | None]:
        """When the timer pass after a good one at ``now`` runs: at the plan's next look or
        after the interval, whichever comes first; and the look, when it decided."""
        interval = now + self.interval
        if look is None:
            return interval, None
        at = max(look.at, now + self.look_floor)
        if at >= interval:
            return interval, None
        return at, look

    def backoff(self, failures: int) -> timedelta:
        """The wait after `failures` transient errors in a row: 1 s, 2 s, 4 s... capped.

        The cap is at least one interval, so that a failing cluster is never asked more
        often than a healthy one."""
        cap = max(self.backoff_cap, self.interval)
        exponent = min(max(failures - 1, 0), 30)  # 2**30 s is far past any cap
        return min(self.backoff_first * (1 << exponent), cap)


@dataclass(frozen=True)
class LoopState:
    due: datetime  # when the next timer pass runs
    failures: int = 0  # transient errors in a row
    last_tip: str | None = None  # the commit the last pass (or attempt) was for
    bad_commit: str | None = None  # its specs failed to load: wait for another commit
    crashes: int = 0  # passes in a row that raised something unforeseen
    looking: NextLook | None = None  # the plan's next look, when it set `due`

    def wants_pass(self, wake: Wake, tip: str) -> bool:
        """Whether this wake-up, with the branch at `tip`, calls for a pass."""
        if tip == self.bad_commit:
            return False  # the same bad specs would fail the same way
        if wake is Wake.REFS:
            # git touches refs without moving the tip (gc packing refs, a checkout and
            # back); the timer pass covers those. A new tip is worth a pass at once, even
            # during a back-off: it may be the fix.
            return tip != self.last_tip
        return True

    def succeeded(
        self, tip: str, now: datetime, schedule: Schedule, look: NextLook | None = None
    ) -> LoopState:
        """A good pass, whose plan next needs a look at ``look`` (None: nothing is due)."""
        due, looking = schedule.next_pass(now, look)
        return LoopState(due=due, last_tip=tip, looking=looking)

    def failed(self, tip: str | None, now: datetime, schedule: Schedule) -> LoopState:
        """A transient error; `tip` is None when it came before the tip was known."""
        failures = self.failures + 1
        return replace(
            self,
            due=now + schedule.backoff(failures),
            failures=failures,
            last_tip=self.last_tip if tip is None else tip,
            looking=None,
        )

    def crashed(self, tip: str | None, now: datetime, schedule: Schedule) -> LoopState:
        """An unforeseen error: backed off like a transient one, and counted apart."""
        return replace(self.failed(tip, now, schedule), crashes=self.crashes + 1)

    def rejected(self, tip: str, now: datetime, schedule: Schedule) -> LoopState:
        return LoopState(due=now + schedule.interval, last_tip=tip, bad_commit=tip)

    def skipped(self, now: datetime, schedule: Schedule) -> LoopState:
        return replace(self, due=now + schedule.interval, looking=None)

    def wait_seconds(self, now: datetime) -> float:
        return max(0.0, (self.due - now).total_seconds())


class PassResult(StrEnum):
    """How a pass ended, for metrics: as the loop handles it (see the module's doc)."""

    OK = "ok"
    SPEC_ERROR = "spec_error"
    RETRY = "retry"  # a transient error: backed off
    CRASHED = "crashed"  # an unforeseen error


@dataclass(frozen=True)
class PassReport:
    """One pass, as `on_pass` hears of it: how it ended, how long it took, and what it
    saw and did (an outcome when it ended well, the error otherwise)."""

    result: PassResult
    seconds: float
    outcome: PassOutcome | None = None
    error: Exception | None = None


def counts(outcome: PassOutcome) -> dict[str, int]:
    """What a pass planned and did, as numbers for a log line or a notification."""
    planned: dict[str, int] = {}
    for action in outcome.plan.actions:
        kind = action.kind.value.replace(" ", "_")  # one word in a log line: may_rerun
        planned[kind] = planned.get(kind, 0) + 1
    result = outcome.applied
    done = {
        "submitted": len(result.submitted) if result else 0,
        "cancelled": len(result.cancelled) if result else 0,
        "adopted": len(result.adopted) if result else 0,
        "not_done": len(result.refused) + len(result.skipped) if result else 0,
    }
    return {**{f"planned_{kind}": n for kind, n in sorted(planned.items())}, **done}


@dataclass
class WatchLoop:
    """Reconcile the branch's tip on every new commit and every interval until stopped.

    `tip()` names the commit to reconcile now; `reconcile(commit)` is one pass at it (it
    takes and releases the project lock itself); `pull()`, if given, fetches and
    fast-forwards before each timer pass; `after_pass(outcome, started)` sends
    notifications and must not raise.
    """

    schedule: Schedule
    tip: Callable[[], str]
    reconcile: Callable[[str], PassOutcome]
    wakeups: Wakeups
    log: Log
    clock: Clock
    pull: Callable[[], None] | None = None
    after_pass: Callable[[PassOutcome, datetime], None] = lambda _outcome, _started: None
    on_crash_loop: Callable[[str | None, int, str], None] = lambda _commit, _n, _message: None
    on_pass: Callable[[PassReport], None] = lambda _report: None  # metrics; must not raise
    crash_loop_after: int = 3
    # The held plan last logged (commit, guard): a refusal is logged once, not every pass.
    told_held: tuple[str | None, Hold] | None = field(default=None, init=False)
    # The suspended targets last logged (commit, names): logged once, not every pass.
    told_suspended: tuple[str | None, tuple[str, ...]] | None = field(default=None, init=False)
    # The next look last logged: logged when it sets the wait, once, not every pass.
    told_look: NextLook | None = field(default=None, init=False)

    def run(self) -> None:
        state = LoopState(due=self.clock())  # the first pass runs at once
        wake = Wake.TIMER
        while wake is not Wake.STOP:
            try:
                if wake is Wake.TIMER or self.clock() >= state.due:
                    state = self._timer_pass(state)
                else:
                    state = self._commit_pass(state)
            except Exception as error:  # one bad pass never ends the service
                state = self._crashed(state, state.last_tip, error)
            wake = self.wakeups.wait(state.wait_seconds(self.clock()))
        self.log(Level.INFO, "stopped")

    def _timer_pass(self, state: LoopState) -> LoopState:
        if self.pull is not None:
            self.pull()
        return self._maybe_pass(state, Wake.TIMER)

    def _commit_pass(self, state: LoopState) -> LoopState:
        return self._maybe_pass(state, Wake.REFS)

    def _maybe_pass(self, state: LoopState, wake: Wake) -> LoopState:
        try:
            tip = self.tip()
        except ReconError as error:
            return self._transient(state, state.last_tip, error)
        if not state.wants_pass(wake, tip):
            return state if wake is Wake.REFS else state.skipped(self.clock(), self.schedule)
        return self._pass(state, wake, tip)

    def _pass(self, state: LoopState, wake: Wake, tip: str) -> LoopState:
        started = self.clock()

        def report(result: PassResult, **seen: Any) -> None:
            seconds = (self.clock() - started).total_seconds()
            self.on_pass(PassReport(result, seconds, **seen))

        try:
            outcome = self.reconcile(tip)
        except SpecError as error:
            report(PassResult.SPEC_ERROR, error=error)
            self.log(Level.ERROR, "spec-error", commit=tip, message=str(error))
            return state.rejected(tip, self.clock(), self.schedule)
        except ReconError as error:
            report(PassResult.RETRY, error=error)
            return self._transient(state, tip, error)
        except Exception as error:  # a bug: see run()
            report(PassResult.CRASHED, error=error)
            return self._crashed(state, tip, error)
        report(PassResult.OK, outcome=outcome)
        if state.crashes:
            self.log(Level.INFO, "recovered", commit=tip, failures=state.crashes)
        trigger = "look" if wake is Wake.TIMER and state.looking is not None else wake.value
        self._log_outcome(outcome, trigger, started)
        self.after_pass(outcome, started)
        now = self.clock()
        after = state.succeeded(tip, now, self.schedule, outcome.plan.next_look)
        self._log_look(after, tip, now)
        return after

    def _log_look(self, state: LoopState, tip: str, now: datetime) -> None:
        """Say when the plan's next look brings the next pass forward, and why."""
        look = state.looking
        if look is not None and look != self.told_look:
            self.log(
                Level.INFO,
                "next-look",
                commit=tip,
                kind=look.kind.value,
                target=look.target,
                at=look.at.isoformat(timespec="milliseconds"),
                delay=round(state.wait_seconds(now), 3),
                message=look.reason,
            )
        self.told_look = look

    def _transient(self, state: LoopState, tip: str | None, error: ReconError) -> LoopState:
        after = state.failed(tip, self.clock(), self.schedule)
        self.log(
            Level.WARNING,
            "retry",
            commit=tip,
            error=type(error).__name__,
            message=str(error),
            failures=after.failures,
            delay=self.schedule.backoff(after.failures).total_seconds(),
        )
        return after

    def _crashed(self, state: LoopState, tip: str | None, error: Exception) -> LoopState:
        after = state.crashed(tip, self.clock(), self.schedule)
        message = f"{type(error).__name__}: {error}"
        self.log(
            Level.ERROR,
            "pass-crashed",
            commit=tip,
            error=type(error).__name__,
            message=str(error),
            failures=after.crashes,
            delay=self.schedule.backoff(after.failures).total_seconds(),
            traceback="".join(traceback.format_exception(error)),
        )
        if after.crashes == self.crash_loop_after:
            self.on_crash_loop(tip, after.crashes, message)
        return after

    def _log_outcome(self, outcome: PassOutcome, trigger: str, started: datetime) -> None:
        commit = outcome.plan.commit
        result = outcome.applied
        held = None if outcome.held is None else (commit, outcome.held)
        if held is not None and held != self.told_held:
            assert outcome.held is not None
            event = refused_event(outcome.held)
            self.log(Level.WARNING, event, commit=commit, message=explain_hold(outcome.held))
        self.told_held = held
        suspended = (commit, outcome.plan.suspended) if outcome.plan.suspended else None
        if suspended is not None and suspended != self.told_suspended:
            (said,) = suspended_notes(outcome.plan.actions)
            self.log(Level.INFO, "suspended", commit=commit, message=said)
        self.told_suspended = suspended
        if result is not None:
            for name, job_id in result.submitted.items():
                self.log(Level.INFO, "submitted", commit=commit, run=name, job_id=job_id)
            for job_id in result.cancelled:
                self.log(Level.INFO, "cancelled", commit=commit, job_id=job_id)
            for job_id in result.adopted:
                self.log(Level.INFO, "adopted", commit=commit, job_id=job_id)
            for new, old in result.moved.items():
                self.log(Level.INFO, "moved", commit=commit, run=new, message=f"{old} -> {new}")
            for name, why in {**result.refused, **result.skipped}.items():
                self.log(Level.WARNING, "not-done", commit=commit, run=name, message=why)
            for why in result.warnings:
                self.log(Level.WARNING, "warning", commit=commit, message=why)
        seconds = (self.clock() - started).total_seconds()
        self.log(
            Level.INFO,
            "pass",
            commit=commit,
            trigger=trigger,
            counts=counts(outcome),
            seconds=round(seconds, 3),
        )
