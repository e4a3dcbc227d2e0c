"""Prunes: cancel the live jobs of runs that left the repo (or members that left their
sweep's matrix). Pure."""

from __future__ import annotations

from reconciler.desired.matrix import sweep_of
from reconciler.engine.actions import Action, ActionKind, SyncStatus
from reconciler.engine.plan_inputs import PlanInputs, is_live


def prunes(inputs: PlanInputs) -> list[Action]:
    """Live jobs of runs that left the repo. Only with a complete observation, and only
    when the project allows pruning. Outputs are never touched."""
    if not inputs.observation.complete or not inputs.desired.project.prune:
        return []
    return [
        Action(
            kind=ActionKind.CANCEL,
            target=job.tag.name,
            reason=f"{_what_left(job.tag.name)}; its job {job.job_id} is {job.health.value}",
            spec_hash=job.tag.spec_hash,
            job_ids=(job.job_id,),
            sync=SyncStatus.ORPHAN,
        )
        for job in inputs.observation.jobs
        if job.tag.project == inputs.project
        and job.tag.kind == "run"
        and job.tag.name not in inputs.desired.runs
        and job.tag.name not in inputs.desired.sweeps  # an array not split: unread
        and is_live(job)
    ]


def _what_left(name: str) -> str:
    sweep = sweep_of(name)
    return "run left the repo" if sweep is None else f"member left the matrix of {sweep}"
