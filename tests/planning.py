"""Plain builders for planner tests: desired runs, observed jobs, journal records."""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from reconciler.desired.desired import (
    Desired,
    DesiredAllocation,
    DesiredRun,
    Location,
    effective_run,
    spec_hash,
)
from reconciler.desired.desired import flat_fields as _flat_fields
from reconciler.desired.loader import load_desired, open_source
from reconciler.desired.models import Project, Run
from reconciler.engine.apply.applier import ApplyResult
from reconciler.engine.plan.actions import Plan
from reconciler.engine.plan.guards import PruneCause, PruneGuard
from reconciler.engine.plan.world import World
from reconciler.engine.reconcile import Look, PassOutcome
from reconciler.scheduler.base import JobRecord, Observation, ObservedJob
from reconciler.scheduler.partitions import Gres, Node, Partition
from reconciler.scheduler.states import Health, SlurmState
from reconciler.scheduler.tag import Tag
from reconciler.state.records import EndingKind, SubmissionRecord, SubmissionStatus

NOW = datetime(2026, 11, 29, 12, 0, tzinfo=UTC)
PROJECT = "p"


def run(name: str, *upstreams: str, **fields: Any) -> Run:
    data: dict[str, Any] = {
        "kind": "Run",
        "name": name,
        "command": fields.pop("command", f"echo {name}"),
        "inputs": {f"in_{up}": f"{up}.out" for up in upstreams},
        "outputs": {"out": "out.txt"},
    }
    data.update(fields)
    return Run.model_validate(data)


# The commit `desired` is at.
COMMIT = "c0ffee" * 6 + "abcd"


def desired(
    *runs: Run,
    prune: bool = True,
    allocations: tuple[DesiredAllocation, ...] = (),
    prune_limit: str | int = "50%",
    code: dict[str, dict[str, str]] | None = None,
    settings: dict[str, Any] | None = None,
) -> Desired:
    """`code`: run -> its code files -> blob id (``DesiredRun.code``); `settings`: more
    of recon.yaml (`suspend`, `budget`)."""
    project = Project.model_validate(
        {"project": PROJECT, "prune": prune, "prune_limit": prune_limit, **(settings or {})}
    )
    entries = {}
    for index, spec in enumerate(runs):
        effective = effective_run(spec, project)
        entries[spec.name] = DesiredRun(
            effective,
            location=Location("specs/a.yaml", index + 1),
            spec_hash=spec_hash(effective),
            code=(code or {}).get(spec.name),
        )
    upstreams = {
        spec.name: tuple(i.upstream[0] for i in spec.inputs.values() if i.upstream) for spec in runs
    }
    held = {allocation.name: allocation for allocation in allocations}
    renamed = {
        spec.name: spec.renamed_from
        for spec in (*runs, *(allocation.spec for allocation in allocations))
        if spec.renamed_from is not None
    }
    return Desired(project, Path("/repo"), COMMIT, entries, held, upstreams, renamed=renamed)


def hash_of(state: Desired, name: str) -> str:
    return state.runs[name].spec_hash


def job(
    name: str,
    spec_hash: str,
    state: SlurmState,
    job_id: str,
    reason: str | None = None,
    exit_code: int | None = None,
    project: str = PROJECT,
    submit: datetime | None = None,
    end: datetime | None = None,
) -> ObservedJob:
    tag = Tag(
        project=project, deployment="0123456789ab", kind="run", name=name, spec_hash=spec_hash
    )
    row = JobRecord(
        job_id=job_id,
        top_id=job_id,
        tag=tag,
        state=state,
        reason=reason,
        exit_code=exit_code,
        submit=submit,
        end=end,
        source="squeue" if state in (SlurmState.PENDING, SlurmState.RUNNING) else "sacct",
    )
    return ObservedJob(job_id=job_id, tag=tag, rows=(row,))


def observed(*jobs: ObservedJob, complete: bool = True) -> Observation:
    problems = () if complete else ("sacct failed: slurmdbd is down",)
    return Observation(taken_at=NOW, jobs=jobs, complete=complete, problems=problems)


def record(
    name: str,
    spec_hash: str,
    job_id: str | None,
    final: Health | None = None,
    status: SubmissionStatus = SubmissionStatus.SUBMITTED,
    spec: Run | None = None,
    reason: str | None = None,
    exit_code: int | None = None,
    created_at: datetime = NOW,
    ending: EndingKind | None = None,
    commit: str | None = None,
    code_versions: dict[str, str] | None = None,
    input_versions: dict[str, str | None] | None = None,
) -> SubmissionRecord:
    project = Project.model_validate({"project": PROJECT})
    fields = _flat_fields(effective_run(spec, project)) if spec is not None else {}
    return SubmissionRecord(
        id=int(job_id or 0),
        project=PROJECT,
        name=name,
        spec_hash=spec_hash,
        commit=commit,
        job_id=job_id,
        status=status,
        final_health=final,
        exit_code=exit_code,
        reason=reason,
        ending=ending,
        spec_fields=fields,
        input_versions=input_versions or {},
        code_versions=code_versions or {},
        created_at=created_at,
        updated_at=created_at,
    )


def outcome_of(
    plan: Plan,
    applied: ApplyResult | None = None,
    root: Path | None = None,
    held: PruneGuard | None = None,
) -> PassOutcome:
    """A pass's outcome around ``plan``, for tests of what follows a pass (notify, watch):
    the project at ``root`` (its recon.yaml read from the work tree), or a bare one;
    ``held``: the guard that held the plan (nothing carried out)."""
    state = load_desired(open_source(root, None, worktree=True)) if root else desired()
    world = World(
        desired=state,
        observation=observed(),
        records=(),
        now=plan.created_at,
        scheduler=plan.scheduler,
    )
    seen = Look(world, plan)
    return PassOutcome(seen, applied, held)


def guard(*runs: str, live: int | None = None) -> PruneGuard:
    """The guard of a plan whose prunes would cancel one job of each run, of `live`: of a
    commit that declares nothing when they are every live job."""
    live = len(runs) if live is None else live
    cause = PruneCause.EMPTY if live == len(runs) else PruneCause.OVER_LIMIT
    return PruneGuard(
        cause=cause, cancels=len(runs), live=live, limit="50%", allowed=live // 2, runs=runs
    )


def node(
    name: str,
    cpus: int = 8,
    memory_mb: int = 16000,
    gpus: str | None = None,
    features: tuple[str, ...] = (),
    state: str = "idle",
) -> Node:
    """``gpus`` as sinfo prints gres, minus sockets: ``a100:4``, ``4``, ``a100:2,v100:2``."""
    gres = []
    for item in (gpus or "").split(",") if gpus else []:
        kind, _, count = item.rpartition(":")
        gres.append(Gres(name="gpu", type=kind or None, count=int(count)))
    return Node(
        name=name,
        cpus=cpus,
        memory_mb=memory_mb,
        gres=tuple(gres),
        features=features,
        state=state,
    )


# The dev cluster, as SlurmScheduler.partitions() reads it.
DEV = (
    Partition(name="cpu", default=True, nodes=(node("cpu1"), node("cpu2"))),
    Partition(name="gpu", nodes=(node("gpu1", gpus="a100:4"),)),
)
