"""One reconcile pass: load, observe, plan, apply. The entry point apply, watch and cron use.

Level-based, like controller-runtime's Reconcile: every pass starts from the commit and
what the cluster reports now, never from remembered events. The project lock is held
from observation to the last scheduler call, so two passes can never both decide to
submit the same run.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path

from reconciler.engine.actions import Plan
from reconciler.engine.allocate import settle_setups
from reconciler.engine.apply import Applier, ApplyResult, Done
from reconciler.engine.checkout import code_dir, remote_url, snapshot_path
from reconciler.engine.faults import fault_point
from reconciler.engine.fit import FitChecker, MachineFit
from reconciler.engine.identity import claim_by_id
from reconciler.engine.plan import FileState, Fit
from reconciler.engine.plan import plan as make_plan
from reconciler.engine.planfile import check_fresh
from reconciler.engine.settle import settle
from reconciler.errors import ObservationError
from reconciler.scheduler.base import Observation, Scheduler, StepScheduler
from reconciler.scheduler.select import select_scheduler
from reconciler.scheduler.states import Health
from reconciler.spec.desired import Desired
from reconciler.spec.loader import load_desired, open_source
from reconciler.state.journal import Journal, JournalEvent
from reconciler.state.lock import project_lock
from reconciler.state.outputs import observe_inputs, observe_outputs
from reconciler.state.records import SetupRecord, SubmissionRecord

Clock = Callable[[], datetime]

JOURNAL_FILE = "journal.sqlite"

# sacct is asked about this far back at least; older outcomes come from the journal.
_MIN_WINDOW = timedelta(days=2)
_MAX_WINDOW = timedelta(days=30)


@dataclass(frozen=True)
class Request:
    """What the user asked for: which project, at which commit, which runs."""

    root: Path
    revision: str | None = None
    worktree: bool = False
    targets: Sequence[str] = ()
    downstream: bool = False


@dataclass(frozen=True)
class Outcome:
    plan: Plan
    applied: ApplyResult | None  # None when nothing was carried out (declined, or no-op)


def load(request: Request) -> Desired:
    return load_desired(open_source(request.root, request.revision, request.worktree))


def state_dir(desired: Desired) -> Path:
    return desired.root / desired.project.state_dir


def journal_for(desired: Desired) -> Journal:
    directory = state_dir(desired)
    directory.mkdir(parents=True, exist_ok=True)
    return Journal(directory / JOURNAL_FILE)


def read_events(desired: Desired, limit: int = 1000) -> list[JournalEvent]:
    """The journal's newest events (teardown reasons...), newest first; none without one."""
    path = state_dir(desired) / JOURNAL_FILE
    if not path.exists():
        return []
    with Journal(path) as journal:
        return journal.events(desired.project.project, limit=limit)


def read_records(desired: Desired) -> list[SubmissionRecord]:
    """The journal's records, without creating a journal where there is none: `recon
    plan` leaves no trace."""
    path = state_dir(desired) / JOURNAL_FILE
    if not path.exists():
        return []
    with Journal(path) as journal:
        return journal.records(desired.project.project)


def read_setups(desired: Desired) -> list[SetupRecord]:
    """The journal's allocation setups; none without a journal (and none made)."""
    path = state_dir(desired) / JOURNAL_FILE
    if not path.exists():
        return []
    with Journal(path) as journal:
        return journal.setups(desired.project.project)


def observation_window(records: Sequence[SubmissionRecord], now: datetime) -> datetime:
    """From the oldest job whose end the journal has not seen (within 30 days), and at
    least two days back."""
    unsettled = [r.created_at for r in records if r.job_id is not None and r.final_health is None]
    since = min([now - _MIN_WINDOW, *unsettled])
    return max(since, now - _MAX_WINDOW)


def observe(
    scheduler: Scheduler, records: Sequence[SubmissionRecord], project: str, now: datetime
) -> Observation:
    """One look at the cluster, with the journal's jobs found by their ids too."""
    observation = scheduler.observe(observation_window(records, now))
    return claim_by_id(observation, records, project)


def plan_once(
    request: Request,
    desired: Desired,
    scheduler: Scheduler,
    records: Sequence[SubmissionRecord],
    now: datetime,
) -> tuple[Plan, Observation]:
    """Observe the cluster and the filesystem, and plan. Reads only."""
    observation = observe(scheduler, records, desired.project.project, now)
    fit = fit_for(scheduler)
    plan = plan_with(
        request, desired, scheduler.name, observation, records, now, fit,
        setups=read_setups(desired), containers=containers_for(scheduler, desired),
    )  # fmt: skip
    return plan, observation


def fit_for(scheduler: Scheduler) -> Fit | None:
    """The cluster's partitions, read once per pass (one sinfo). The local backend ignores
    partition names, so only the machine's CPUs are checked there. None when the shapes
    cannot be read: a partial answer would refuse runs that fit."""
    try:
        partitions = scheduler.partitions()
    except ObservationError:
        return None
    return MachineFit.of(partitions) if scheduler.name == "local" else FitChecker(partitions)


def containers_for(scheduler: Scheduler, desired: Desired) -> bool | None:
    """Whether the cluster runs container images in steps (pyxis), asked once per pass
    and only when an allocation wants a container; None when not asked."""
    wanted = any(desired.allocations[name].spec.container for name in desired.allocations)
    if not wanted or not isinstance(scheduler, StepScheduler):
        return None
    return scheduler.containers()


def plan_with(
    request: Request,
    desired: Desired,
    scheduler_name: str,
    observation: Observation,
    records: Sequence[SubmissionRecord],
    now: datetime,
    fit: Fit | None = None,
    *,
    setups: Sequence[SetupRecord] = (),
    containers: bool | None = None,
) -> Plan:
    return make_plan(
        desired,
        observation,
        records,
        now,
        scheduler=scheduler_name,
        targets=request.targets,
        downstream=request.downstream,
        files=file_state(desired, records, observation),
        fit=fit,
        setups=setups,
        containers=containers,
    )


def file_state(
    desired: Desired, records: Sequence[SubmissionRecord], observation: Observation
) -> FileState:
    """The versions on disk of what currency depends on: the outputs of runs that have
    succeeded (a run never run has nothing to look at), and external inputs."""
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
    outputs = observe_outputs(desired, sorted(succeeded))
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
) -> Outcome:
    """Observe, plan (or check a saved plan is still true), and carry the plan out.

    `approve` sees the plan before anything is done and may decline it; `on_done` is told
    of each action as soon as it is carried out.
    """
    fault_point("pass-start")
    desired = load(request)
    scheduler = scheduler or select_scheduler(desired.project.scheduler, state_dir(desired))
    with project_lock(state_dir(desired), lock_timeout), journal_for(desired) as journal:
        now = clock()
        project = desired.project.project
        observation = observe(scheduler, journal.records(project), project, now)
        snapshots = state_dir(desired)
        settle(
            journal,
            desired,
            observation,
            journal.records(project),
            now,
            lambda commit: snapshot_path(desired.root, commit, snapshots),
            remote_url(desired.root),
        )
        settle_setups(journal, observation, journal.setups(project), now)
        records = journal.records(project)
        fit = fit_for(scheduler)
        current = plan_with(
            request, desired, scheduler.name, observation, records, now, fit,
            setups=journal.setups(project), containers=containers_for(scheduler, desired),
        )  # fmt: skip
        if saved is not None:
            check_fresh(saved, current)
            current = saved
        if not any(a.changes_cluster or a.kind.value == "adopt" for a in current.actions):
            return Outcome(current, None)
        if not approve(current):
            return Outcome(current, None)
        code = code_dir(desired.root, desired.commit, state_dir(desired))
        applier = Applier(current, desired, scheduler, journal, code, clock, report=on_done)
        return Outcome(current, applier.run())
