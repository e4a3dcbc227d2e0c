"""Prunes: cancel the live jobs of runs that left the repo (or members that left their
sweep's matrix), and the guard that holds back a prune that would empty the project.
Pure.

The guard stops accidents, and only accidents. A commit whose `specs:` pattern went
wrong, a folder moved out of the pattern, a bad merge or the wrong branch makes most runs
"leave the repo" at once, and `recon watch` applies every commit. So a plan is held
(apply carries out none of it, not even the submissions beside the prunes: a commit that
trips the guard is suspect as a whole) when its prunes (of runs and of allocations) would
cancel a live job while the commit declares no run and no allocation at all
(``PruneCause.EMPTY``), or cancel more than one job and more than recon.yaml's
`prune_limit` allows (``PruneCause.OVER_LIMIT``), until a person confirms it with
`--allow-prune-all` or fixes the commit. A `specs:` pattern of recon.yaml that matches no
file is refused before any plan (desired/loader.py). What is carried out: a rename or a
replacement (one run out, one run in), even of the project's only live job, and an
orphaned allocation released after its journal was lost.
"""

from __future__ import annotations

from collections.abc import Sequence

from reconciler.desired.matrix import sweep_of
from reconciler.desired.models import prune_allowance
from reconciler.engine.plan.actions import Action, ActionKind, SyncStatus
from reconciler.engine.plan.causes import Cause
from reconciler.engine.plan.guards import PruneCause, PruneGuard
from reconciler.engine.plan.inputs import PlanInputs, is_live
from reconciler.scheduler.base import Observation
from reconciler.words import plural


def prunes(inputs: PlanInputs) -> list[Action]:
    """Live jobs of runs that left the repo. Only with a complete observation, and only
    when the project allows pruning. Outputs are never touched."""
    if not inputs.observation.complete or not inputs.desired.project.prune:
        return []
    return [
        Action(
            kind=ActionKind.CANCEL,
            target=job.tag.name,
            cause=Cause.PRUNE,
            reason=f"{_what_left(inputs, job.tag.name)}; its job {job.job_id} is "
            f"{job.health.value}",
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


def _what_left(inputs: PlanInputs, name: str) -> str:
    sweep = sweep_of(name)
    if sweep is None:
        return "run left the repo"
    if sweep not in inputs.desired.sweeps:
        return f"sweep {sweep} left the repo"
    return f"member left the matrix of {sweep}"


def guard(
    observation: Observation,
    project: str,
    limit: str | int,
    pruned: Sequence[Action],
    *,
    empty: bool,
    confirmed: bool,
) -> PruneGuard | None:
    """The guard over this plan's prunes (`pruned`: what the prunes of runs and
    allocations that left the specs decided; an allocation waiting for a step to end
    is not cancelled yet), or None when they look like no accident. `empty`: the commit
    declares no run and no allocation. The project's live jobs are counted before the
    plan: the jobs of its runs and allocations still queued or running."""
    cancelling = [
        action for action in pruned if action.kind is ActionKind.CANCEL and not action.suspended
    ]
    cancels = {job for action in cancelling for job in action.job_ids}
    if not cancels:
        return None
    live = cancels | {
        job.job_id for job in observation.jobs if job.tag.project == project and is_live(job)
    }
    allowed = prune_allowance(limit, len(live))
    if empty:
        cause = PruneCause.EMPTY
    elif len(cancels) > max(allowed, 1):
        cause = PruneCause.OVER_LIMIT
    else:
        return None
    return PruneGuard(
        cause=cause,
        cancels=len(cancels),
        live=len(live),
        limit=str(limit),
        allowed=allowed,
        runs=tuple(sorted({action.target for action in cancelling})),
        confirmed=confirmed,
    )


def explain(guard: PruneGuard) -> str:
    """Why the plan is held, and what to do: for plan, apply, watch and notifications."""
    names = _named(guard.runs)
    shown = ", ".join(names[:_NAMES_SHOWN])
    more = len(names) - _NAMES_SHOWN
    left = (f"{shown} and {more} more" if more > 0 else shown) + " left the specs"
    jobs = plural(guard.cancels, "job")
    if guard.cause is PruneCause.EMPTY:
        what = (
            f"the commit declares no run or allocation, and the plan's prunes would cancel "
            f"{jobs} of the project ({left})"
        )
    else:
        what = (
            f"the plan's prunes would cancel {guard.cancels} of the project's {guard.live} "
            f"live jobs ({left}), more than prune_limit {guard.limit} allows ({guard.allowed})"
        )
    if guard.confirmed:
        return f"{what}; confirmed with --allow-prune-all"
    return (
        f"{what}. Nothing of it is carried out, not even its submissions. If the specs are "
        "right, confirm with `recon apply --allow-prune-all`; if not, fix the commit (does "
        "each `specs:` pattern of recon.yaml match the spec files?)"
    )


_NAMES_SHOWN = 5


def _named(runs: Sequence[str]) -> list[str]:
    """The runs with a sweep's members said once: `seeds (6 members)`."""
    members: dict[str, int] = {}
    for name in runs:
        key = sweep_of(name) or name
        members[key] = members.get(key, 0) + (key != name)
    return [f"{name} ({plural(n, 'member')})" if n else name for name, n in members.items()]
