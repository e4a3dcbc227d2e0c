"""The one pipeline: load, observe, settle, fit and plan; then, for apply, carry it out.

`recon plan`, `recon status`, `recon apply` and `recon watch` all go through ``look``, so
what plan shows is what apply then does: the same observation, cut to this deployment's
jobs, the same judgement of finished jobs (settle), the same fit and the same planner.
The only difference is who writes: ``look`` reads (a plan leaves no trace, not even a
journal), and ``reconcile_once`` records the judgement and carries the plan out.

Level-based, like controller-runtime's Reconcile: every pass starts from the commit and
what the cluster reports now, never from remembered events. The project lock is held
from observation to the last scheduler call, so two passes can never both decide to
submit the same run.

A pass reads recon.yaml (which scheduler, where the state is) and the journal first,
then asks the scheduler (squeue, sacct, sinfo) in a thread while the spec files load:
on a cluster the answers take about as long as loading 10,000 runs. The journal is read
before the observation starts, never after: a job submitted in between then shows as a
journalled job not seen yet, which the planner waits for, instead of an unknown job.
"""

from __future__ import annotations

import contextlib
import gc
import os
from collections.abc import Callable, Iterator, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime, timedelta
from pathlib import Path

from reconciler.desired.desired import Desired
from reconciler.desired.loader import load_desired, load_project, open_source
from reconciler.desired.source import SpecSource, committed_blobs
from reconciler.engine.apply import settle
from reconciler.engine.apply.applier import Applier, ApplyResult, Done
from reconciler.engine.apply.arrays import read_maps
from reconciler.engine.apply.faults import fault_point
from reconciler.engine.apply.planfile import check_fresh
from reconciler.engine.plan import moves as plan_moves
from reconciler.engine.plan import planned
from reconciler.engine.plan.actions import BudgetGuard, Move, Plan
from reconciler.engine.plan.assemble import check_targets
from reconciler.engine.plan.fit import Fit, FitChecker, MachineFit
from reconciler.engine.plan.holds import Hold
from reconciler.engine.plan.identity import split_by_owner
from reconciler.engine.plan.inputs import FileState, PlanMemo
from reconciler.errors import ObservationError
from reconciler.repository.checkout import code_dir, remote_url, snapshot_path
from reconciler.scheduler.base import Observation, ObservedJob, Scheduler, StepScheduler
from reconciler.scheduler.partitions import Partition
from reconciler.scheduler.select import Choice, select_scheduler
from reconciler.scheduler.states import Health
from reconciler.state.directory import prepare_state_dir
from reconciler.state.journal import Journal, JournalEvent
from reconciler.state.lock import project_lock
from reconciler.state.outputs import OutputsSeen, observe_inputs, observe_outputs
from reconciler.state.paths import deployment, journal_path, state_dir
from reconciler.state.records import (
    Rename,
    Renames,
    SetupRecord,
    SubmissionRecord,
    SubmissionStatus,
)

Clock = Callable[[], datetime]

# How far back sacct is asked (``observation_window``): from the oldest job the journal
# still needs to see end, less a margin for clocks that disagree (the journal's stamps
# are this machine's, sacct's times slurmctld's) and for jobs an apply elsewhere records
# while this pass reads; never more than _MAX_WINDOW back. With no journal (a new
# project, or a lost journal) _NO_JOURNAL_WINDOW back, so recent jobs are found and
# adopted.
_WINDOW_MARGIN = timedelta(hours=1)
_NO_JOURNAL_WINDOW = timedelta(days=2)
_MAX_WINDOW = timedelta(days=30)


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
    allow_prune_all: bool = False  # confirm prunes the guard holds (plan_prune.guard)
    allow_over_budget: bool = False  # confirm a plan recon.yaml's budget holds (plan/holds)


@dataclass(frozen=True)
class JournalState:
    """What the journal holds for the project, read once per pass."""

    records: Sequence[SubmissionRecord] = ()
    setups: Sequence[SetupRecord] = ()
    cancelled: frozenset[str] = frozenset()  # the jobs recon itself cancelled
    renames: Sequence[Rename] = ()  # runs renamed, in the order they were moved


@dataclass(frozen=True)
class Look:
    """One pass's view of the world and the plan made from it.

    ``records`` and ``setups`` are the journal's as they read once this pass's judgement
    (``endings``, ``setup_changes``) is recorded; apply records it, plan and status only
    plan against it."""

    desired: Desired
    observation: Observation  # this deployment's jobs only
    elsewhere: tuple[ObservedJob, ...]  # live jobs of the project other deployments own
    records: Sequence[SubmissionRecord]
    setups: Sequence[SetupRecord]
    endings: Sequence[settle.Ending]
    setup_changes: Sequence[SetupRecord]
    plan: Plan
    # What the plan was made from beside the journal and the specs: the scheduler's whole
    # answer (every deployment's jobs, the partitions) and the files on disk. A watch
    # compares the next pass's with them (engine/steady.py); None where a test made it.
    observed: Observed | None = None
    files: FileState | None = None
    # What the plan was made from and decided, for a re-plan of a few runs (the watch's
    # pass after a commit, engine/steady.py); None where a test made the look.
    memo: PlanMemo | None = None
    code_at: dict[str, dict[str, str | None]] | None = None
    # the renames the jobs were told apart by (the journal's and the plan's moves), for
    # a watch's next pass that tells them apart again (engine/incremental.changed_jobs)
    renames: Renames = field(default_factory=Renames, compare=False)


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


@dataclass(frozen=True)
class Observed:
    """What the scheduler reported in one pass: the jobs of the window (all projects',
    cut to this deployment's by ``look``), and the partitions runs must fit."""

    jobs: Observation
    fit: Fit | None
    partitions: tuple[Partition, ...] | None = None  # what fit was made from

    def same_as(self, other: Observed) -> bool:
        """The same jobs and partitions, whenever each was taken."""
        jobs = self.jobs.model_copy(update={"taken_at": other.jobs.taken_at})
        return jobs == other.jobs and self.partitions == other.partitions


def observe(scheduler: Scheduler, journal: JournalState, now: datetime) -> Observed:
    """One squeue and sacct (or the local store) over the journal's window, then one sinfo."""
    found = scheduler.observe(observation_window(journal.records, journal.setups, now))
    partitions = partitions_of(scheduler)
    return Observed(found, fit_for(scheduler, partitions), partitions)


@dataclass(frozen=True)
class Opened:
    """A pass's start: the commit to load and the project's settings, read from
    recon.yaml alone (``where`` holds no runs yet: it tells the state directory, the
    journal and the scheduler, which the observation needs before the specs load)."""

    source: SpecSource
    where: Desired


def open_project(request: Request) -> Opened:
    source = open_source(request.root, request.revision, request.worktree)
    project = load_project(source)
    return Opened(source, Desired(project, source.root, source.commit, {}, {}, {}))


def _load(opened: Opened) -> Desired:
    return load_desired(opened.source, project=opened.where.project)


def load_while_observing(
    opened: Opened,
    scheduler: Scheduler,
    journal: JournalState,
    now: datetime,
    named: Sequence[str] = (),
) -> tuple[Desired, Observed]:
    """The desired state, loaded while the scheduler is asked in a thread.

    The thread ends before this returns or raises: a spec error is told once the
    observation is over (no squeue or sacct is left running), and before any error of
    the observation's, as when the observation came after the load. So is a name in
    ``named`` (the runs the command line names) that is no run of the project: a typo is
    told as such even where the cluster cannot be seen. An error of the observation's
    is raised here as it was raised there.

    The two share nothing: Slurm's observation runs commands and parses their output;
    the local backend's reads its store and may run a dispatch pass, which writes only
    that store, under its own lock. The load writes only the parse cache. Only the
    observation's thread uses the scheduler until it is joined."""
    with ThreadPoolExecutor(max_workers=1, thread_name_prefix="recon-observe") as pool:
        observing = pool.submit(observe, scheduler, journal, now)
        desired = _load(opened)  # on an error, leaving `with` waits for the thread
        check_targets(desired, named)
        return desired, observing.result()


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
        _load(opened)
        raise


def scheduler_for(desired: Desired, choice: Choice | None = None) -> Scheduler:
    project = desired.project.project
    settings = desired.project
    return select_scheduler(
        choice or settings.scheduler, state_dir(desired), project, settings.local.gpus
    )


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


def observation_window(
    records: Sequence[SubmissionRecord], setups: Sequence[SetupRecord], now: datetime
) -> datetime:
    """Where sacct's window starts: at the oldest job the journal still needs settled.

    sacct -S (and the local backend alike) lists every job that was queued or running at
    any time since the start, so a job submitted after the start is seen, however long
    ago it ended. The jobs recon still needs to see are those whose end the journal has
    not recorded: each was submitted after its record was written (the intent goes in
    before sbatch), so the window starts at the oldest such record. A job the journal
    settled is not read again: its outcome comes from the journal. Settled jobs of 10,000
    runs are then not read, parsed or combined on every pass.

    A record adopted with no intent before it (a lost journal) was written after its job
    was submitted, at an unknown time: while such a job is unsettled the window reaches
    back as far as it goes (30 days). With no records at all, two days back.
    """
    if not records and not setups:
        return now - _NO_JOURNAL_WINDOW
    oldest = [now]
    for record in records:
        if record.final_health is not None or record.status is SubmissionStatus.REFUSED:
            continue
        if record.status is SubmissionStatus.ADOPTED and not record.spec_fields:
            # Found by its tag with no intent of its own (Journal.record_adopted): its job
            # was submitted who knows when.
            oldest.append(now - _MAX_WINDOW)
        else:
            oldest.append(record.created_at)  # an intent (maybe sent), or a job not settled
    oldest += [setup.created_at for setup in setups if setup.final_health is None]
    return max(min(oldest) - _WINDOW_MARGIN, now - _MAX_WINDOW)


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
    """Observe the cluster (unless ``observed`` already) and the filesystem, judge
    finished jobs, and plan. Reads only, unless ``roll_back`` (apply's passes): then the
    publishing that ended jobs left half done is rolled back first."""
    observed = observed or observe(scheduler, journal, now)
    found = observed.jobs
    project, place = desired.project.project, deployment(desired)
    maps = read_maps(found, project, place, plan_moves.moved_folders(desired))
    done = plan_moves.renames_of(journal.renames, ())
    moves: tuple[Move, ...] = ()
    if desired.renamed:  # runs renamed: the moves not made yet, judged on what is known
        known = split_by_owner(found, project, place, journal.records, maps, done)
        moves = plan_moves.pending(desired, journal.records, known.own.jobs)
    renames = plan_moves.renames_of(journal.renames, moves)
    journalled = renames.records(journal.records) if moves else journal.records
    journal_setups = renames.setups(journal.setups) if moves else journal.setups
    share = split_by_owner(found, project, place, journalled, maps, renames)
    if roll_back:
        settle.roll_back_publishing(desired, share.own, journalled)
    outputs_seen: OutputsSeen = {}  # each output looked at once in this pass
    # A job of a run whose folder has not moved yet is judged once it has: its outputs
    # are still under the old name (a pass cut short after the rename finds them moved).
    moving = {
        move.new: move.old_run_dir
        for move in moves
        if move.old_run_dir is not None and os.path.lexists(desired.root / move.old_run_dir)
    }
    judged = _without_runs(share.own, moving) if moving else share.own
    endings = settle.judge(desired, judged, journalled, outputs_seen)
    records = settle.as_recorded(journalled, endings)
    setup_changes = settle.judge_setups(share.own, journal_setups)
    setups = settle.with_setups(journal_setups, setup_changes)
    files = file_state(desired, records, share.own, outputs_seen, moving)
    if moves:  # a run gathering a renamed sweep: the version it read, under the new names
        moves = plan_moves.with_gathered(desired, moves, files.outputs)
        records = plan_moves.carried_inputs(moves).records(records)
    versions = code_at(desired, records)
    plan, memo = planned(
        desired,
        share.own,
        records,
        now,
        scheduler=scheduler.name,
        targets=request.targets,
        downstream=request.downstream,
        files=files,
        fit=observed.fit,
        setups=setups,
        containers=containers_for(scheduler, desired),
        elsewhere=share.elsewhere,
        replace=request.replace,
        max_array_size=array_size_for(scheduler, desired),
        allow_prune_all=request.allow_prune_all,
        allow_over_budget=request.allow_over_budget,
        code_at=versions,
        cancelled=journal.cancelled,
        moves=moves,
    )
    return Look(
        desired,
        share.own,
        share.elsewhere,
        records,
        setups,
        endings,
        setup_changes,
        plan,
        observed,
        files,
        memo,
        versions,
        renames,
    )


def _without_runs(observation: Observation, runs: Mapping[str, object]) -> Observation:
    jobs = tuple(job for job in observation.jobs if job.tag.name not in runs)
    return observation.model_copy(update={"jobs": jobs})


def code_at(
    desired: Desired, records: Sequence[SubmissionRecord]
) -> dict[str, dict[str, str | None]]:
    """The committed files' blob ids at each commit the planner needs them for: that of
    a job of a run's current spec whose record does not carry the versions of every code
    file the run has now (a record an older recon wrote), so the files are compared with
    what that job ran. One `git ls-tree` per such commit, each commit once per process."""
    needed: set[str] = set()
    for record in records:
        if (
            record.kind != "run"
            or record.commit is None
            or record.commit == desired.commit
            or record.commit in needed
            or record.job_id is None
            or record.name not in desired.runs
        ):
            continue
        run = desired.runs[record.name]
        if record.spec_hash == run.spec_hash and any(
            path not in record.code_versions for path in run.code
        ):
            needed.add(record.commit)
    listed = {commit: committed_blobs(desired.root, commit) for commit in sorted(needed)}
    return {commit: files for commit, files in listed.items() if files is not None}


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


def array_size_for(scheduler: Scheduler, desired: Desired) -> int | None:
    """The scheduler's MaxArraySize when the project has sweeps (read once per pass, and
    again by apply from the same scheduler object, which keeps it); None when it has
    none, or when it cannot be read (the plan then does not say how arrays split)."""
    if not desired.sweeps:
        return None
    try:
        return scheduler.max_array_size()
    except ObservationError:
        return None


def partitions_of(scheduler: Scheduler) -> tuple[Partition, ...] | None:
    """The cluster's partitions, read once per pass (one sinfo); None when the shapes
    cannot be read."""
    try:
        return tuple(scheduler.partitions())
    except ObservationError:
        return None


def fit_for(scheduler: Scheduler, partitions: tuple[Partition, ...] | None) -> Fit | None:
    """What runs must fit: the local backend ignores partition names, so only the
    machine's CPUs are checked there. None when the partitions are unknown: a partial
    answer would refuse runs that fit."""
    if partitions is None:
        return None
    return MachineFit.of(partitions) if scheduler.name == "local" else FitChecker(partitions)


def containers_for(scheduler: Scheduler, desired: Desired) -> frozenset[str] | None:
    """What the cluster offers containers in steps (pyxis: the image, and which options),
    asked once per pass and only when an allocation wants a container; None when not
    asked."""
    wanted = any(desired.allocations[name].spec.container for name in desired.allocations)
    if not wanted or not isinstance(scheduler, StepScheduler):
        return None
    return scheduler.containers()


def file_state(
    desired: Desired,
    records: Sequence[SubmissionRecord],
    observation: Observation,
    outputs_seen: OutputsSeen | None = None,
    moving: Mapping[str, str] | None = None,
) -> FileState:
    """The versions on disk of what currency depends on: the outputs of runs that have
    succeeded (a run never run has nothing to look at), and external inputs. `moving`:
    a renamed run whose folder is still under its old name -> that folder."""
    succeeded = {
        r.name for r in records if r.kind == "run" and r.final_health is Health.SUCCEEDED
    } | {
        job.tag.name
        for job in observation.jobs
        if job.tag.project == desired.project.project
        and job.tag.kind == "run"
        and job.health is Health.SUCCEEDED
    }
    succeeded &= set(desired.runs)
    outputs = observe_outputs(desired, sorted(succeeded), outputs_seen, moving)
    inputs = observe_inputs(desired, sorted(succeeded))
    return FileState(
        outputs={key: v.digest if v else None for key, v in outputs.items()},
        inputs={key: v.digest if v else None for key, v in inputs.items()},
    )


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
    if not current.moves and not any(
        a.changes_cluster or a.kind.value == "adopt" for a in current.actions
    ):
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
