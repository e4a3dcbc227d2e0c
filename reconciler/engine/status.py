"""`recon status`: one row per run, from a plan and what it was made against. Pure.

Sync status says how a run's outputs stand against the repo (current, outdated, missing,
never run; orphan for jobs whose run left it); health says how its latest job is doing
(pending, running, succeeded, failed, cancelled; blocked when an upstream failed).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from datetime import datetime

from pydantic import BaseModel, ConfigDict

from reconciler.engine.actions import ActionKind, Plan, SyncStatus
from reconciler.scheduler.base import Observation, ObservedJob, job_order
from reconciler.scheduler.states import Health
from reconciler.spec.desired import Desired
from reconciler.state.records import SubmissionRecord


class RunStatus(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")

    name: str
    sync: SyncStatus
    health: Health | None  # None: no job yet
    job_id: str | None
    finished_at: datetime | None
    last_success_commit: str | None
    outputs: dict[str, str]  # output -> path as declared
    reason: str  # what the next apply would do about it, and why
    note: str | None = None  # the last thing recon did to it on its own, e.g. a teardown


def run_statuses(
    desired: Desired,
    plan: Plan,
    observation: Observation,
    records: Sequence[SubmissionRecord],
    notes: Mapping[str, str] | None = None,
) -> list[RunStatus]:
    """`notes`: run -> the newest event the journal holds for it (why it was torn down)."""
    notes = notes or {}
    rows = []
    for action in plan.actions:
        if action.sync is None or action.kind is ActionKind.ADOPT:
            continue
        history = [r for r in records if r.kind == "run" and r.name == action.target]
        job = _latest_job(observation, plan.project, action.target)
        health, job_id, finished = _health(job, history)
        if action.kind is ActionKind.BLOCKED:
            health = Health.BLOCKED
        spec = desired.runs[action.target].spec if action.target in desired.runs else None
        rows.append(
            RunStatus(
                name=action.target,
                sync=action.sync,
                health=health,
                job_id=job_id,
                finished_at=finished,
                last_success_commit=_last_success_commit(history),
                outputs={n: o.path for n, o in spec.outputs.items()} if spec else {},
                reason=f"{action.kind.value}: {action.reason}",
                note=notes.get(action.target),
            )
        )
    return rows


def _latest_job(observation: Observation, project: str, name: str) -> ObservedJob | None:
    jobs = [job for job in observation.find(project, name) if job.tag.kind == "run"]
    return max(jobs, key=lambda job: job_order(job.job_id)) if jobs else None


def _health(
    job: ObservedJob | None, history: list[SubmissionRecord]
) -> tuple[Health | None, str | None, datetime | None]:
    """The latest job's health: as the cluster shows it, or as the journal remembers it."""
    last = next((r for r in reversed(history) if r.job_id is not None), None)
    if job is not None and (last is None or job_order(job.job_id) >= job_order(last.job_id or "")):
        ends = [row.end for row in job.components if row.end is not None]
        health = job.health
        if last is not None and last.job_id == job.job_id and last.final_health is not None:
            health = last.final_health  # recon's judgement: COMPLETED without outputs failed
        return health, job.job_id, max(ends) if ends and job.finished else None
    if last is not None:
        finished = last.updated_at if last.final_health is not None else None
        return last.final_health, last.job_id, finished
    return None, None, None


def _last_success_commit(history: list[SubmissionRecord]) -> str | None:
    for record in reversed(history):
        if record.final_health is Health.SUCCEEDED:
            return record.commit
    return None
