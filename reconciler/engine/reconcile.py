"""The one pipeline: load, observe, settle, fit and plan; then, for apply, carry it out.

`recon plan`, `recon status`, `recon apply` and `recon watch` all go through ``look``, so
what plan shows is what apply then does: the world seen the same way (engine/observe:
the observation cut to this deployment's jobs, the same judgement of finished jobs, the
same files) and the same planner. The only difference is who writes: ``look`` reads (a
plan leaves no trace, not even a journal), and ``reconcile_once`` records the judgement
and carries the plan out.

Level-based, like controller-runtime's Reconcile: every pass starts from the commit and
what the cluster reports now, never from remembered events. The project lock is held
from observation to the last scheduler call, so two passes can never both decide to
submit the same run.
"""

from __future__ import annotations

import contextlib
import gc
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime
from pathlib import Path

from reconciler.desired.desired import Desired
from reconciler.desired.loader import load_desired, load_project, open_source
from reconciler.engine.apply import settle
from reconciler.engine.apply.applier import Applier
from reconciler.engine.apply.faults import fault_point
from reconciler.engine.apply.planfile import check_fresh
from reconciler.engine.apply.results import ApplyResult, Done
from reconciler.engine.observe.endings import Ending
from reconciler.engine.observe.journal import JournalState, read_journal
from reconciler.engine.observe.observation import (
    Observed,
    Opened,
    load_specs,
    load_while_observing,
    scheduler_for,
)
from reconciler.engine.observe.seen import Seen, see
from reconciler.engine.plan import planned
from reconciler.engine.plan.actions import Plan
from reconciler.engine.plan.guards import BudgetGuard
from reconciler.engine.plan.holds import Hold
from reconciler.engine.plan.inputs import FileState, PlanMemo
from reconciler.engine.plan.world import World
from reconciler.repository.checkout import code_dir, remote_url, snapshot_path
from reconciler.scheduler.base import Observation, ObservedJob, Scheduler
from reconciler.scheduler.select import Choice
from reconciler.state.directory import prepare_state_dir
from reconciler.state.journal import Journal
from reconciler.state.lock import project_lock
from reconciler.state.paths import journal_path, state_dir
from reconciler.state.records import Renames, SetupRecord, SubmissionRecord

Clock = Callable[[], datetime]


@dataclass(frozen=True)
class Request:
    """What the user asked for: which project, at which commit, which runs."""

    root: Path
    revision: str | None = None
    worktree: bool = False
    targets: Sequence[str] = ()
    downstream: bool = False
    scheduler: Choice | None = None  # --scheduler or RECON_SCHEDULER: over recon.yaml's
    replace: Sequence[str] = ()  # runs to submit anew though nothing changed (--replace)
    allow_prune_all: bool = False  # confirm prunes the guard holds (engine/plan/prune.guard)
    allow_over_budget: bool = False  # confirm a plan recon.yaml's budget holds (plan/holds)


@dataclass(frozen=True)
class Look:
    """One pass's world (engine/plan/world.World) and the plan made from it.

    The world's ``records`` and ``setups`` are the journal's as they read once this
    pass's judgement (``endings``, ``setup_changes``) is recorded; apply records it, plan
    and status only plan against it."""

    world: World
    plan: Plan
    endings: Sequence[Ending] = ()
    setup_changes: Sequence[SetupRecord] = ()
    # The scheduler's whole answer (every deployment's jobs, the partitions): a watch
    # compares the next pass's with it (engine/steady.py); None where a test made it.
    observed: Observed | None = None
    # What the plan was made from and decided, for a re-plan of a few runs (the watch's
    # pass after a commit, engine/steady.py); None where a test made the look.
    memo: PlanMemo | None = None
    # the renames the jobs were told apart by (the journal's and the plan's moves), for
    # a watch's next pass that tells them apart again (engine/incremental.changed_jobs)
    renames: Renames = field(default_factory=Renames, compare=False)

    @property
    def desired(self) -> Desired:
        return self.world.desired

    @property
    def observation(self) -> Observation:
        """This deployment's jobs only."""
        return self.world.observation

    @property
    def elsewhere(self) -> Sequence[ObservedJob]:
        """Live jobs of the project other deployments own."""
        return self.world.elsewhere

    @property
    def records(self) -> Sequence[SubmissionRecord]:
        return self.world.records

    @property
    def setups(self) -> Sequence[SetupRecord]:
        return self.world.setups

    @property
    def files(self) -> FileState:
        return self.world.files

    @property
    def code_at(self) -> Mapping[str, Mapping[str, str | None]] | None:
        return self.world.code_at


@dataclass(frozen=True)
class PassOutcome:
    """What a pass saw and did."""

    look: Look
    applied: ApplyResult | None  # None when nothing was carried out (declined, or no-op)
    held: Hold | None = None  # the guard that held the plan: nothing was carried out

    @property
    def plan(self) -> Plan:
        return self.look.plan

    @property
    def desired(self) -> Desired:
        return self.look.desired


def load(request: Request) -> Desired:
    return load_desired(open_source(request.root, request.revision, request.worktree))


def open_project(request: Request) -> Opened:
    source = open_source(request.root, request.revision, request.worktree)
    project = load_project(source)
    return Opened(source, Desired(project, source.root, source.commit, {}, {}, {}))


def _scheduler_and_journal(
    opened: Opened, request: Request, scheduler: Scheduler | None
) -> tuple[Scheduler, JournalState]:
    """What the observation needs, for plan and status; should either fail, a problem of
    the specs is told first, as when they were loaded before anything else."""
    with _specs_told_first(opened):
        scheduler = scheduler or scheduler_for(opened.where, request.scheduler)
        return scheduler, read_journal(opened.where)


@contextlib.contextmanager
def _specs_told_first(opened: Opened) -> Iterator[None]:
    """On an error before the specs load, load them: a problem of the specs is then
    raised instead, as when they were loaded before anything else."""
    try:
        yield
    except Exception:
        load_specs(opened)
        raise


def look(
    request: Request,
    desired: Desired,
    scheduler: Scheduler,
    journal: JournalState,
    now: datetime,
    observed: Observed | None = None,
    *,
    roll_back: bool = False,
) -> Look:
    """See the world (engine/observe/seen.see: observe the cluster unless ``observed``
    already, the filesystem, judge finished jobs), and plan it. Reads only, unless
    ``roll_back`` (apply's passes): then the publishing that ended jobs left half done is
    rolled back first."""
    seen = see(
        desired,
        scheduler,
        journal,
        now,
        observed,
        roll_back=settle.roll_back_publishing if roll_back else None,
    )
    return planned_look(seen, request)


def planned_look(seen: Seen, request: Request) -> Look:
    """The look of ``seen``: its world planned for ``request``."""
    plan, memo = planned(seen.world, request)
    return Look(
        seen.world, plan, seen.endings, seen.setup_changes, seen.observed, memo, seen.renames
    )


def look_once(
    request: Request,
    *,
    scheduler: Scheduler | None = None,
    clock: Clock = lambda: datetime.now(UTC),
) -> Look:
    """`recon plan` and `recon status`: read the journal, observe while loading, then
    ``look``, writing nothing. `clock`: the time the look judges by, as for a pass."""
    opened = open_project(request)
    with cycles_collected_after():
        scheduler, journal = _scheduler_and_journal(opened, request, scheduler)
        now = clock()
        named = (*request.targets, *request.replace)
        desired, observed = load_while_observing(opened, scheduler, journal, now, named)
        seen = look(request, desired, scheduler, journal, now, observed)
        # what the plan was decided from is for a watch's next pass alone: let it go
        # before the plan is shown (at 100,000 runs, 25-35 MiB of a status's peak)
        return replace(seen, memo=None)


@contextlib.contextmanager
def cycles_collected_after() -> Iterator[None]:
    """Python's cycle collector paused while a pass loads and plans, and back after it.

    A pass makes a few objects per run and keeps nearly all of them to its end; the
    collector, set off by every 700 new objects, walked them again and again: a tenth of
    `recon plan`'s CPU at 100,000 runs, near a third of a watch's full pass of settled
    runs. Objects are still freed as they are dropped; the few reference cycles a pass
    leaves behind are collected by the first collection after it."""
    paused = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if paused:
            gc.enable()


def reconcile_once(
    request: Request,
    *,
    scheduler: Scheduler | None = None,
    approve: Callable[[Plan], bool] = lambda _plan: True,
    saved: Plan | None = None,
    lock_timeout: float = 0.0,
    clock: Clock = lambda: datetime.now(UTC),
    on_done: Callable[[Done], None] = lambda _done: None,
) -> PassOutcome:
    """Look (as plan does), record what the look judged, check a saved plan is still
    true, and carry the plan out, unless a guard holds it (``PassOutcome.held``:
    nothing is carried out, see engine/plan/prune.py and engine/plan/holds.py).

    `approve` sees the plan before anything is done and may decline it.
    `on_done` is told of each action as soon as it is carried out.
    """
    fault_point("pass-start")
    opened = open_project(request)
    with contextlib.ExitStack() as held:
        held.enter_context(cycles_collected_after())
        # Lock, journal, then the observation, which runs while the specs load: under
        # the lock, so the lock is held for the load too (a few tenths of a second at
        # 10,000 runs, less than the observation beside it).
        with _specs_told_first(opened):
            scheduler = scheduler or scheduler_for(opened.where, request.scheduler)
            directory = state_dir(opened.where)
            prepare_state_dir(directory)
            held.enter_context(project_lock(directory, lock_timeout))
            recorded = read_journal(opened.where)
        now = clock()
        named = (*request.targets, *request.replace)
        desired, observed = load_while_observing(opened, scheduler, recorded, now, named)
        journal = held.enter_context(open_journal(desired))  # made once the specs are good
        seen = look(request, desired, scheduler, recorded, now, observed, roll_back=True)
        settle.record(
            journal,
            desired,
            seen.endings,
            now,
            lambda commit: snapshot_path(desired.root, commit, directory),
            remote_url(desired.root),
        )
        settle.record_setups(journal, seen.setup_changes, now)
        if saved is not None:
            check_fresh(saved, seen.plan)
            seen = replace(seen, plan=saved)
        return carry_out(request, seen, scheduler, journal, clock, approve, on_done)


def carry_out(
    request: Request,
    seen: Look,
    scheduler: Scheduler,
    journal: Journal,
    clock: Clock,
    approve: Callable[[Plan], bool] = lambda _plan: True,
    on_done: Callable[[Done], None] = lambda _done: None,
) -> PassOutcome:
    """A pass's end, under the project's lock: the look's plan carried out, unless a
    guard holds it (prunes, budget) and the request does not confirm it, it has nothing
    to carry out, or `approve` declines it. Its suspended actions are never carried out."""
    current, desired = seen.plan, seen.desired
    hold = next((guard for guard in current.holds if not _confirmed(request, guard)), None)
    if hold is not None:
        return PassOutcome(seen, None, held=hold)
    if not current.has_work:
        return PassOutcome(seen, None)
    if not approve(current):
        return PassOutcome(seen, None)
    code = code_dir(desired.root, desired.commit, state_dir(desired))
    if current.suspended:  # shown and approved, never carried out
        kept = tuple(action for action in current.actions if not action.suspended)
        current = current.model_copy(update={"actions": kept})
    applier = Applier(current, desired, scheduler, journal, code, clock, report=on_done)
    return PassOutcome(seen, applier.run())


def _confirmed(request: Request, hold: Hold) -> bool:
    """A guard confirmed by the request (a saved plan made without the flag, applied with)."""
    if isinstance(hold, BudgetGuard):
        return request.allow_over_budget
    return request.allow_prune_all


def open_journal(desired: Desired) -> Journal:
    path = journal_path(desired)
    path.parent.mkdir(parents=True, exist_ok=True)
    return Journal(path)
