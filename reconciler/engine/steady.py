"""`recon watch`'s timer passes that find nothing changed: the last pass kept, not redone.

A full pass loads every spec, reads every journal record and plans every run: about 9
CPU-seconds at 100,000 runs, every interval, although between two timer passes nothing
may have changed. ``SteadyPasses`` keeps what the last full pass was made from (the
desired state, the journal's records, the scheduler's answer, the plan) and, on the next
pass, checks only what could change the plan without a commit:

- the commit: the branch's tip is the one the kept pass loaded;
- the journal: nothing was written to it since just before the kept pass read it
  (``state.journal.WriteStamps``: SQLite's data_version; no record is read);
- the scheduler: it reports the same jobs over the same window, and the same
  partitions (one observation, as a full pass makes, compared with the kept one whenever
  each was taken);
- the clock: the kept plan's next look (engine/plan/requeue.py, the earliest moment the
  plan changes with no new observation) has not come;
- the kept pass carried nothing out and held nothing: its plan was a no-op.

When all hold, the pass returns the kept outcome: no spec is loaded, no record read, no
run planned; it costs the scheduler's calls and one comparison of their answers. When
only the commit differs, or only some live jobs in the scheduler's answer, the pass is
planned in part from the kept one (engine/incremental.py: the changed runs and their
downstream). When none of these holds, the pass is a full one (``reconcile_once``), and
so is every ``full_every``-th pass and the pass after any error.

What a kept pass does not look at: the files on disk (the outputs of runs that
succeeded, external inputs: a full pass stats every one) and what the scheduler says of
itself beyond jobs and partitions (MaxArraySize, container support). An output deleted
by hand is found by the next full pass, at most ``full_every`` passes later, or at once
by a commit's pass.

Each full pass that comes when the kept pass would have been reused (the same commit and
journal, the same answer from the scheduler, before the next look) checks that reusing it
was sound: its fresh plan must equal the kept one (``created_at`` aside). When the files
on disk changed meanwhile, a different plan is their news (``files-changed``); otherwise
it is a fault of this module's, logged as ``steady-mismatch``. Either way the fresh plan
is the one carried out, as it would be without this module.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field, replace
from datetime import datetime
from typing import Any

from reconciler.engine.incremental import PartPass, commit_pass, jobs_pass
from reconciler.engine.observe.journal import JournalState
from reconciler.engine.observe.observation import Observed, observe, scheduler_for
from reconciler.engine.plan.actions import Plan
from reconciler.engine.plan.inputs import FileState
from reconciler.engine.reconcile import (
    PassOutcome,
    Request,
    cycles_collected_after,
    open_project,
)
from reconciler.errors import ReconError
from reconciler.scheduler.base import Scheduler
from reconciler.state.journal import WriteStamps
from reconciler.state.paths import journal_path

Clock = Callable[[], datetime]
Stamp = tuple[str, int, int, int] | None

# A full pass at least this often, whatever a timer pass finds: the files on disk are
# looked at then, and the kept state checked against a fresh one.
FULL_EVERY = 10


@dataclass(frozen=True)
class Kept:
    """A full pass that carried nothing out, and what it was made from.

    ``outcome`` is None once the pass is only to be checked against a fresh one: the
    desired state and records it holds are then let go before the fresh pass loads its
    own (at 100,000 runs, holding both doubled a full pass's peak memory)."""

    commit: str
    stamp: Stamp  # the journal's, taken before the pass read it
    plan: Plan
    observed: Observed
    files: FileState | None
    outcome: PassOutcome | None
    # made by a pass planned in part (engine/incremental.py: after a commit, or when only
    # some live jobs changed)
    replanned: bool = False

    def reusable(self, commit: str, stamp: Stamp, now: datetime) -> bool:
        """Whether a pass at ``commit`` at ``now`` may reuse this one, if the scheduler
        answers as it did."""
        return commit == self.commit and self.followed_by(stamp, now)

    def followed_by(self, stamp: Stamp, now: datetime) -> bool:
        """Whether nothing but a commit may have changed since: the journal unwritten and
        the plan's next look not come."""
        look = self.plan.next_look
        return stamp == self.stamp and (look is None or now < look.at)


def steady(outcome: PassOutcome) -> bool:
    """A pass whose plan had nothing to carry out, held nothing, adopted nothing."""
    return outcome.applied is None and outcome.held is None and not outcome.plan.has_work


def same_plan(fresh: Plan, kept: Plan) -> bool:
    return fresh.model_copy(update={"created_at": kept.created_at}) == kept


Log = Callable[..., None]  # (level, event, **fields), as engine/watch.Log


@dataclass
class SteadyPasses:
    """One watch pass at a commit: the kept one when nothing changed, a full one otherwise.

    ``request(commit)`` is the pass's request; ``full(request)`` a full pass
    (``reconcile_once``); ``scheduler`` the one both use (None: recon.yaml's, picked per
    pass as a full pass picks it); ``log(level, event, **fields)`` hears of a kept pass
    found unsound."""

    request: Callable[[str], Request]
    full: Callable[[Request], PassOutcome]
    clock: Clock
    log: Log = lambda *_args, **_fields: None
    scheduler: Scheduler | None = None
    full_every: int = FULL_EVERY
    # for a commit's pass planned in part (engine/incremental.py), as ``full`` has them
    approve: Callable[[Plan], bool] = lambda _plan: True
    lock_timeout: float = 0.0
    kept: Kept | None = field(default=None, init=False)
    passes: int = field(default=0, init=False)  # since the last full pass
    # What the passes did, for tests and metrics: kept passes, commits' passes planned in
    # part (and how many runs the last one planned again), full ones, mismatches.
    reused: int = field(default=0, init=False)
    replanned: int = field(default=0, init=False)
    rejobbed: int = field(default=0, init=False)  # timer passes whose jobs changed, likewise
    visited: int = field(default=0, init=False)
    fulls: int = field(default=0, init=False)
    mismatches: int = field(default=0, init=False)
    _stamps: WriteStamps = field(default_factory=WriteStamps, init=False)

    def __call__(self, commit: str) -> PassOutcome:
        kept, self.kept = self.kept, None  # an error below: the next pass is a full one
        request = self.request(commit)
        if kept is not None and kept.outcome is not None and self.passes + 1 < self.full_every:
            now = self.clock()
            stamp = self._stamps.stamp(journal_path(kept.outcome.desired))
            if kept.reusable(commit, stamp, now):
                observed = self._observe(kept.outcome, request, now)
                if observed.same_as(kept.observed):
                    self.kept = kept
                    self.passes += 1
                    self.reused += 1
                    return kept.outcome
                outcome = self._jobs(kept, observed, now)
                if outcome is not None:
                    return outcome
            elif commit != kept.commit and kept.followed_by(stamp, now):
                outcome = self._commit(kept, request, commit)
                if outcome is not None:
                    return outcome
        checked = None if kept is None or kept.commit != commit else replace(kept, outcome=None)
        kept = None  # let the kept pass's loaded state go before the full pass loads anew
        return self._full(commit, request, checked)

    def _jobs(self, kept: Kept, observed: Observed, now: datetime) -> PassOutcome | None:
        """A timer pass whose only news is some live jobs' states or rows, planned in part
        from the kept one; None when it cannot be (engine/incremental.py)."""
        assert kept.outcome is not None
        outcome = kept.outcome
        return self._in_part(
            kept,
            kept.commit,
            lambda: jobs_pass(outcome, kept.stamp, kept.observed, observed, now),
        )

    def _commit(self, kept: Kept, request: Request, commit: str) -> PassOutcome | None:
        """The pass after a commit, planned in part from the kept one; None when it
        cannot be (engine/incremental.py): a full pass is made instead."""
        assert kept.outcome is not None
        outcome = kept.outcome
        return self._in_part(
            kept,
            commit,
            lambda: commit_pass(
                outcome,
                kept.stamp,
                kept.observed,
                request,
                commit,
                scheduler=self.scheduler,
                stamps=self._stamps,
                clock=self.clock,
                approve=self.approve,
                lock_timeout=self.lock_timeout,
            ),
        )

    def _in_part(
        self, kept: Kept, commit: str, make: Callable[[], PartPass | None]
    ) -> PassOutcome | None:
        """A pass at ``commit`` planned in part from the kept one, by ``make``
        (engine/incremental.py: after a commit, or when only some live jobs changed); None
        when it cannot be, or failed with a fault of its own: a full pass is made instead."""
        try:
            with cycles_collected_after():  # as a full pass: 100,000 runs' objects stay put
                made = make()
        except ReconError:
            raise  # what a full pass would say too (a busy lock, the scheduler down)
        except Exception as error:  # a fault of the part-planning's: a full pass instead
            self.log("warning", "replan-failed", commit=commit, message=f"{_FAILED}: {error!r}")
            return None
        if made is None:
            return None
        outcome = made.outcome
        kept_now = steady(outcome)
        if commit == kept.commit and not kept_now:
            return None  # a timer pass carries nothing out: a full one does, under the lock
        self.passes += 1
        if commit == kept.commit:
            self.rejobbed += 1
        else:
            self.replanned += 1
            self.visited = len(made.visited)
        if kept_now:
            files = outcome.look.files
            self.kept = Kept(commit, made.stamp, outcome.plan, made.observed, files, outcome, True)
        return outcome

    def _observe(self, kept: PassOutcome, request: Request, now: datetime) -> Observed:
        """The scheduler asked as a full pass asks it, over the kept journal's window."""
        look = kept.look
        scheduler = self.scheduler or scheduler_for(look.desired, request.scheduler)
        journal = JournalState(look.records, look.setups)
        return observe(scheduler, journal, now)

    def _full(self, commit: str, request: Request, kept: Kept | None) -> PassOutcome:
        where = open_project(request).where  # recon.yaml at this commit: where the journal is
        path = journal_path(where)
        stamp = self._stamps.stamp(path)  # before the pass reads the journal
        outcome = self.full(request)
        self.passes = 0
        self.fulls += 1
        observed = outcome.look.observed
        if observed is None:
            return outcome
        # at the moment the fresh plan was made for: past the kept one's next look, the
        # two may differ, as they should
        reusable = kept is not None and kept.reusable(commit, stamp, outcome.plan.created_at)
        if kept is not None and reusable and observed.same_as(kept.observed):
            self._check(kept, outcome)
        if steady(outcome) and journal_path(outcome.desired) == path:
            self.kept = Kept(commit, stamp, outcome.plan, observed, outcome.look.files, outcome)
        return outcome

    def _check(self, kept: Kept, fresh: PassOutcome) -> None:
        """The kept pass would have been reused: the fresh plan must be the same."""
        if same_plan(fresh.plan, kept.plan):
            return
        files = fresh.look.files != kept.files
        fields: dict[str, Any] = {
            "commit": kept.commit,
            "kept": kept.plan.summary,
            "fresh": fresh.plan.summary,
        }
        if files:
            self.log("info", "files-changed", **fields, message=_FILES_CHANGED)
            return
        self.mismatches += 1
        message = _REPLAN_MISMATCH if kept.replanned else _MISMATCH
        self.log("warning", "steady-mismatch", **fields, message=message)


_FILES_CHANGED = (
    "files on disk changed since the last full pass (an output or an input): the plan "
    "follows them now"
)
_FAILED = "planning the changed runs alone failed; a full pass instead"
_REPLAN_MISMATCH = (
    "a plan made for the changed runs alone (after a commit, or when some jobs changed) "
    "differs from a fresh one; the fresh one is carried out (this is a fault of recon's, "
    "please report it)"
)
_MISMATCH = (
    "a timer pass that found nothing changed kept a plan that differs from a fresh one; "
    "the fresh one is carried out (this is a fault of recon's, please report it)"
)
