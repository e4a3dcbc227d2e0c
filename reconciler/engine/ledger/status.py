"""`recon status`: one row per run and one per allocation, from a plan and what it was
made against. Pure.

Sync status says how a run's outputs stand against the repo (current, outdated, missing,
never run; orphan for jobs whose run left it); health says how its latest job is doing
(pending, running, succeeded, failed, cancelled; blocked when an upstream failed).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from datetime import datetime, timedelta

from pydantic import BaseModel, ConfigDict, field_serializer

from reconciler.desired.desired import Desired, DesiredRun
from reconciler.desired.resources import Duration
from reconciler.engine.plan.actions import SUSPENDED_MARK, ActionKind, Plan, RetryBudget, SyncStatus
from reconciler.engine.plan.allocations.judging import held_back, idle_for, judged_health
from reconciler.engine.plan.budgets import REQUEUED
from reconciler.engine.plan.causes import Cause
from reconciler.engine.plan.history import (
    journal_over_cluster,
    settled_health,
    settled_healths,
)
from reconciler.engine.plan.raises import mib_text
from reconciler.scheduler.base import Observation, ObservedJob, job_order
from reconciler.scheduler.states import Health
from reconciler.state.records import SubmissionRecord
from reconciler.words import plural


class RunStatus(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")

    name: str
    sync: SyncStatus
    health: Health | None  # None: no job yet
    how: str | None = None  # beyond the health, in Slurm's terms: timed out, held (...)
    job_id: str | None
    finished_at: datetime | None
    last_success_commit: str | None
    outputs: dict[str, str]  # output -> path as declared
    reason: str  # what the next apply would do about it, and why
    note: str | None = None  # the last thing recon did to it on its own, e.g. a teardown
    waiting_for: str | None = None  # why Slurm holds a pending job: Resources, JobHeldAdmin
    # what the next apply would do, typed (``reason`` says it in words: "<next>: <why>")
    next: ActionKind
    cause: Cause | None = None
    # its last attempt failed: the retry budget that draws from, what is left (``reason``
    # says it in words)
    retry_budget: RetryBudget | None = None
    # a run with a checkpoint resumed since its last success: which attempt its latest
    # job is, and how many of them ended to be resumed (``how`` says it in words)
    attempt: int | None = None
    requeues: int | None = None
    # `next` is shown, not carried out: it, an upstream, its allocation or the project
    # is suspended
    suspended: bool = False

    @property
    def why(self) -> str:
        """The reason without the action's name in front (the action is ``next``)."""
        return self.reason.removeprefix(f"{self.next.value}: ")


def run_statuses(
    desired: Desired,
    plan: Plan,
    observation: Observation,
    records: Sequence[SubmissionRecord],
    notes: Mapping[str, str] | None = None,
) -> list[RunStatus]:
    """`notes`: run -> the newest event the journal holds for it (why it was torn down)."""
    notes = notes or {}
    histories = _by_name(records, "run")
    rows = []
    for action in plan.actions:
        if action.sync is None or action.kind is ActionKind.ADOPT:
            continue
        history = histories.get(action.target, [])
        job = _latest_job(observation, plan.project, action.target)
        health, job_id, finished = _health(job, history)
        how = _how(job, history, job_id)
        run = desired.runs.get(action.target)
        resumed = _resumed(run, history) if run is not None else None
        if resumed is not None and how is None:
            how = f"attempt {resumed[0]}, {plural(resumed[1], 'requeue')}"
        raised = _raised(history, job_id)
        if raised is not None:
            how = f"{how}; {raised}" if how else raised
        if action.kind is ActionKind.BLOCKED:
            health = Health.BLOCKED
        waiting = _waiting_for(job) if health is Health.PENDING and job is not None else None
        rows.append(
            RunStatus(
                name=action.target,
                sync=action.sync,
                health=health,
                how=how,
                job_id=job_id,
                finished_at=finished,
                last_success_commit=_last_success_commit(history),
                outputs={n: o.path for n, o in run.outputs.items()} if run else {},
                reason=f"{action.kind.value}: {SUSPENDED_MARK if action.suspended else ''}"
                f"{action.reason}",
                note=notes.get(action.target),
                waiting_for=waiting,
                next=action.kind,
                cause=action.cause,
                retry_budget=action.retry_budget,
                attempt=resumed[0] if resumed else None,
                requeues=resumed[1] if resumed else None,
                suspended=action.suspended,
            )
        )
    return rows


def _raised(history: Sequence[SubmissionRecord], job_id: str | None) -> str | None:
    """What the latest job asked for beyond its spec, a retry's raise, in words:
    "with memory 2GiB, raised"."""
    record = next((r for r in reversed(history) if r.job_id == job_id), None)
    if job_id is None or record is None or not record.raised:
        return None
    said = []
    if (memory := record.raised.get("memory_mb")) is not None:
        said.append(f"memory {mib_text(memory)}")
    if (time_s := record.raised.get("time_s")) is not None:
        said.append(f"time {Duration(time_s).text}")
    return f"with {' and '.join(said)}, raised" if said else None


def _resumed(run: DesiredRun, history: Sequence[SubmissionRecord]) -> tuple[int, int] | None:
    """(attempt, requeues) of a run with a checkpoint whose jobs of its current spec since
    its last success include one that ended to be resumed (``budgets.REQUEUED``); None
    otherwise. The run's model is built only for a run with such a job."""
    since: list[SubmissionRecord] = []
    for record in history:
        if record.job_id is None or record.spec_hash != run.spec_hash:
            continue
        if record.final_health is Health.SUCCEEDED:
            since = []
        else:
            since.append(record)
    requeues = sum(1 for record in since if record.ending in REQUEUED)
    if not requeues or run.spec.checkpoint is None:
        return None
    return len(since), requeues


def _by_name(records: Sequence[SubmissionRecord], kind: str) -> dict[str, list[SubmissionRecord]]:
    """The records of each run (or allocation), oldest first: grouped once, not scanned
    for each row."""
    grouped: dict[str, list[SubmissionRecord]] = {}
    for record in records:
        if record.kind == kind:
            grouped.setdefault(record.name, []).append(record)
    return grouped


def _waiting_for(job: ObservedJob) -> str | None:
    """Slurm's reasons a pending job waits (`Resources`, `Dependency`, `JobHeldAdmin`),
    each once (Slurm's `None`, when there is none, is read as None: slurm/parse.py)."""
    reasons = dict.fromkeys(row.reason for row in job.components if row.reason)
    return ", ".join(reasons) or None


def _latest_job(observation: Observation, project: str, name: str) -> ObservedJob | None:
    jobs = [job for job in observation.find(project, name) if job.tag.kind == "run"]
    return max(jobs, key=lambda job: job_order(job.job_id)) if jobs else None


def _health(
    job: ObservedJob | None, history: list[SubmissionRecord]
) -> tuple[Health | None, str | None, datetime | None]:
    """The latest job's health: as the cluster shows it unless the journal judged it
    (``settled_health``), or as the journal remembers it."""
    last = next((r for r in reversed(history) if r.job_id is not None), None)
    if job is not None and (last is None or job_order(job.job_id) >= job_order(last.job_id or "")):
        ends = [row.end for row in job.components if row.end is not None]
        health = settled_health(job, settled_healths([last] if last is not None else []))
        return health, job.job_id, max(ends) if ends and job.finished else None
    if last is not None:
        finished = last.updated_at if last.final_health is not None else None
        return last.final_health, last.job_id, finished
    return None, None, None


def _how(
    job: ObservedJob | None, history: list[SubmissionRecord], job_id: str | None
) -> str | None:
    """The latest job's state in words, from the cluster, or from how the journal
    recorded it ended ("timed out"); for a success, what recon recorded beyond it
    ("skipped: inputs unchanged")."""
    last = next((r for r in reversed(history) if r.job_id == job_id), None)
    if last is not None and last.final_health is Health.SUCCEEDED and last.reason:
        return last.reason
    if job is not None and job.job_id == job_id:
        return job.in_words
    if last is not None and last.ending is not None:
        return last.ending.in_words
    return None


def _last_success_commit(history: list[SubmissionRecord]) -> str | None:
    for record in reversed(history):
        if record.final_health is Health.SUCCEEDED:
            return record.commit
    return None


class RunningStep(BaseModel):
    """A step running in an allocation's job: a run's, or its setup (run None)."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    step_id: str
    run: str | None

    def __str__(self) -> str:
        return f"{self.step_id} ({self.run or 'setup'})"


class AllocationJob(BaseModel):
    """One job of an allocation the journal knows."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    job_id: str
    spec_hash: str
    status: str  # the journal's: submitted, refused, ...
    created_at: datetime
    runs: int  # how many runs' steps the journal started in it
    health: Health  # how it ended, or running while it holds its nodes

    def __str__(self) -> str:
        made = self.created_at.strftime("%Y-%m-%d %H:%M")
        return (
            f"job {self.job_id} (spec {self.spec_hash[:8]}) {self.status} {made}, "
            f"{plural(self.runs, 'run')}, {self.health.value}"
        )


class AllocationStatus(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")

    name: str
    job_id: str | None  # the newest job that still holds nodes
    health: Health | None
    nodes: str | None
    time_left: timedelta | None
    idle: timedelta | None  # how long no step has run in that job; None while one runs
    steps_running: tuple[RunningStep, ...]
    history: tuple[AllocationJob, ...]  # every job of it the journal knows, newest first
    reason: str  # what the next apply would do about it, and why
    next: ActionKind | None = None  # the first thing the next apply would do about it

    @property
    def why(self) -> str:
        """The reason without the first action's name in front (that action is ``next``)."""
        return self.reason.removeprefix(f"{self.next.value}: ") if self.next else self.reason

    @field_serializer("time_left", "idle", when_used="json")
    def _seconds(self, span: timedelta | None) -> int | None:
        return None if span is None else int(span.total_seconds())


def allocation_statuses(
    desired: Desired,
    plan: Plan,
    observation: Observation,
    records: Sequence[SubmissionRecord],
) -> list[AllocationStatus]:
    """One row per allocation the repo declares or the cluster still holds for it."""
    names = list(desired.allocations)
    names += sorted({a.target for a in plan.actions if a.target_kind == "alloc"} - set(names))
    histories = _by_name(records, "alloc")
    served = _runs_served(records)
    reasons: dict[str, list[str]] = {}
    kinds: dict[str, ActionKind] = {}
    for action in plan.actions:
        if action.target_kind == "alloc" and action.kind not in (
            ActionKind.ADOPT,
            ActionKind.MOVED,
        ):
            reasons.setdefault(action.target, []).append(f"{action.kind.value}: {action.reason}")
            kinds.setdefault(action.target, action.kind)
    return [
        _allocation_status(
            name, plan, observation, histories.get(name, []), served, reasons.get(name, [])
        ).model_copy(update={"next": kinds.get(name)})
        for name in names
    ]


def _runs_served(records: Sequence[SubmissionRecord]) -> dict[str, int]:
    """How many runs each allocation job served: runs started as its steps (12.3)."""
    served: dict[str, int] = {}
    for record in records:
        if record.kind == "run" and record.job_id is not None and "." in record.job_id:
            top = record.job_id.split(".", 1)[0]
            served[top] = served.get(top, 0) + 1
    return served


def _allocation_status(
    name: str,
    plan: Plan,
    observation: Observation,
    history: Sequence[SubmissionRecord],
    served: dict[str, int],
    reasons: list[str],
) -> AllocationStatus:
    jobs = [j for j in observation.find(plan.project, name) if j.tag.kind == "alloc"]
    holding = [j for j in jobs if not j.finished]
    job = max(holding, key=lambda j: job_order(j.job_id)) if holding else None
    row = job.components[0] if job is not None else None
    steps = tuple(
        RunningStep(
            step_id=step.job_id,
            run=tag.name if (tag := step.step_tag) and tag.kind == "run" else None,
        )
        for held in holding
        for step in held.live_steps
    )
    return AllocationStatus(
        name=name,
        job_id=job.job_id if job is not None else None,
        health=judged_health(job) if job is not None else None,
        nodes=row.nodes if row is not None else None,
        time_left=row.time_left if row is not None else None,
        idle=_idle(job, observation) if job is not None else None,
        steps_running=steps,
        history=_allocation_history(history, served, jobs),
        reason="; ".join(reasons) or "-",
    )


def _idle(job: ObservedJob, observation: Observation) -> timedelta | None:
    """As the planner judges idle_release, with the steps srun holds back in it as busy."""
    busy = bool(held_back(job, observation.launches or ()))
    return idle_for(job, observation.taken_at, busy=busy)


def _allocation_history(
    history: Sequence[SubmissionRecord], served: dict[str, int], jobs: Sequence[ObservedJob]
) -> tuple[AllocationJob, ...]:
    """Each job of the allocation, newest first: when it was made, how many runs it
    served (its reuses), and how it ended (by the journal, or by the cluster before the
    journal has settled it)."""
    seen = {job.job_id: judged_health(job) for job in jobs}
    return tuple(
        AllocationJob(
            job_id=record.job_id,
            spec_hash=record.spec_hash,
            status=record.status.value,
            created_at=record.created_at,
            runs=served.get(record.job_id, 0),
            health=journal_over_cluster(
                record.final_health, seen.get(record.job_id, Health.RUNNING)
            ),
        )
        for record in reversed(history)
        if record.job_id is not None
    )
