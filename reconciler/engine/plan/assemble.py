"""The planner: desired state + observed state + journal records -> a Plan. Pure.

No subprocess, no clock, no environment, no filesystem: `now` and every observation are
arguments, so the whole decision table is tested with plain values.

This module assembles a plan; each concept it asks about has a module of its own, beside
it in engine/plan/:

    inputs.py       what a plan is made from, indexed by run once; a run's Decision
    runs.py         the per-run decision table
    history.py      what a run's jobs and journal records say (last success, failures)
    submit.py       whether a run to be submitted goes now, waits or is blocked
    changes.py      why a run is submitted anew: the fields of its spec that changed
    sync.py         how a run's outputs stand (the SYNC column)
    teardown.py     jobs that hold nodes for nothing (het components, coupled partners)
    prune.py        live jobs of runs that left the repo, and the guard that holds a
                    plan whose prunes would empty the project
    notes.py        what the plan saw and does not act on
    allocations/    allocations, and where runs inside them start (judging, state,
                    gpus, placement)
    requeue.py      when the plan next changes with no new observation (``next_look``)

Each run is decided in DAG order, upstreams first, and its *outcome* for this plan is
kept with its decision so its downstream can decide too:

    DONE      its current spec succeeded             downstream submits freely
    INFLIGHT  a job of its current spec is queued,   downstream submits now, chained with
              running, or is submitted by this plan  Slurm's afterok
    WAITING   an outdated job still runs (deferred)  downstream waits for a later pass
              or its state is unknown
    FAILED    failed with no retries left            downstream is blocked
    BLOCKED   an upstream failed                     downstream is blocked

Safety rules that hold whatever the inputs:
- a job whose spec hash matches the desired one is never cancelled or replaced;
- with an incomplete observation (sacct down) nothing is cancelled, replaced or pruned,
  and a run whose last job's fate is unknown is not submitted again;
- prunes that look like an accident (a commit that declares nothing, or more than one job
  and more than prune_limit allows) hold the whole plan (``Plan.prune_guard``) until a
  person confirms them.
"""

from __future__ import annotations

import hashlib
from collections.abc import Mapping, Sequence
from datetime import datetime, timedelta

from reconciler.desired import graph
from reconciler.desired.desired import Desired, DesiredAllocation
from reconciler.engine.plan.actions import Action, ActionKind, Move, Plan, SweepShape
from reconciler.engine.plan.allocations.gpus import gpu_share
from reconciler.engine.plan.allocations.placement import on_demand, renewals
from reconciler.engine.plan.allocations.state import idle_releases, plan_allocations
from reconciler.engine.plan.allocations.state import prunes as allocation_prunes
from reconciler.engine.plan.arrays import place
from reconciler.engine.plan.causes import Cause
from reconciler.engine.plan.fit import Fit
from reconciler.engine.plan.holds import budget_guard, suspend, suspended_notes
from reconciler.engine.plan.inputs import Decision, FileState, PlanInputs, PlanMemo
from reconciler.engine.plan.moves import actions as moved_actions
from reconciler.engine.plan.notes import (
    bare_notes,
    claimed_notes,
    coupled_waits,
    elsewhere_note,
    incomplete_notes,
    inheriting_notes,
)
from reconciler.engine.plan.prune import guard, prunes
from reconciler.engine.plan.requeue import next_look
from reconciler.engine.plan.runs import decide
from reconciler.engine.plan.teardown import teardowns
from reconciler.engine.plan.world import EVERY_RUN, Asked, Asking, World
from reconciler.scheduler.base import Observation, ObservedJob
from reconciler.state.records import SetupRecord, SubmissionRecord

__all__ = ["FileState", "fingerprint", "plan", "planned"]


def planned(world: World, request: Asked = EVERY_RUN) -> tuple[Plan, PlanMemo]:
    """The plan of ``world`` for ``request``, and what it was made from and decided
    (``PlanMemo``), which ``replan`` starts from. ``request.replace``: runs to submit
    anew although nothing changed (Terraform's -replace); ``allow_prune_all``: a person
    confirmed prunes that look like an accident (prune.guard)."""
    desired, observation, records, now = world.desired, world.observation, world.records, world.now
    scheduler, max_array_size, moves = world.scheduler, world.max_array_size, world.moves
    targets, replace, downstream = request.targets, request.replace, request.downstream
    project = desired.project.project
    asked = tuple(targets)
    targets, replace = members_of(desired, targets), members_of(desired, replace)
    if targets or replace:
        dag = graph.build(desired.upstreams)
        if replace:
            graph.select(dag, replace)  # an unknown name is an error, as for targets
    if targets:
        chosen = graph.select(dag, [*targets, *replace], downstream)
    else:
        chosen = graph.in_order(desired.upstreams)
    inputs = PlanInputs.of(
        desired,
        observation,
        records,
        now,
        files=world.files,
        fit=world.fit,
        replace=frozenset(replace),
        scheduler=scheduler,
        setups=world.setups,
        containers=world.containers,
        code_at=world.code_at,
        cancelled=world.cancelled,
    )
    held, allocation_states = plan_allocations(
        inputs, _allocations_of(desired, chosen, bool(targets))
    )
    inputs = inputs.with_allocations(allocation_states)
    actions: list[Action] = [*moved_actions(moves), *_adoptions(inputs), *held]
    if observation.complete:  # a teardown is a cancel: never on half a picture
        actions.extend(teardowns(inputs, chosen))
    decided: dict[str, Decision] = {}
    positions: dict[str, int] = {}  # run -> where its action is in the plan's actions
    # What GPU steps hold in each ready allocation job, the ones this plan starts added
    # as it goes: a GPU run starts only where its share is still free.
    in_use = {name: state.in_use for name, state in allocation_states.items()}
    for name in chosen:
        made = decide(inputs, desired.runs[name], decided, in_use)
        decided[name] = made
        positions[name] = len(actions)
        actions.append(made.action)
        where = desired.runs[name].allocation
        if made.action.allocation_job is not None and where is not None:
            share = gpu_share(desired.runs[name].resources)
            in_use[where] = in_use[where].plus(name, share)
    actions.extend(renewals(allocation_states, _renewals(decided), desired.allocations))
    actions.extend(on_demand(allocation_states, _demands(decided), desired.allocations))
    used = {made.uses for made in decided.values() if made.uses is not None}
    released = idle_releases(allocation_states, used, desired.allocations)
    actions = [  # an idle job released takes the place of its reuse
        released.get(action.target, action)
        if action.target_kind == "alloc" and action.kind is ActionKind.REUSE
        else action
        for action in actions
    ]
    actions = suspend(actions, desired)
    prune_guard = None
    if not targets:
        pruned = suspend(
            [*prunes(inputs), *allocation_prunes(inputs, set(desired.allocations))], desired
        )
        actions.extend(pruned)
        if desired.project.prune:  # else only orphans the journal lost are released
            limit = desired.project.prune_limit
            empty = not desired.runs and not desired.allocations
            prune_guard = guard(
                observation, project, limit, pruned, empty=empty, confirmed=request.allow_prune_all
            )
    budget = budget_guard(desired, actions, records, now, confirmed=request.allow_over_budget)
    notes = (
        *incomplete_notes(observation),
        *claimed_notes(observation),
        *coupled_waits(inputs, chosen),
        *elsewhere_note(project, world.elsewhere),
        *inheriting_notes(desired.runs, chosen),
    )
    made_plan = Plan(
        project=project,
        root=str(desired.root),
        commit=desired.commit,
        scheduler=scheduler,
        created_at=now,
        targets=asked,
        downstream=downstream,
        observation_complete=observation.complete,
        notes=(*notes, *bare_notes(desired.runs, actions), *suspended_notes(actions)),
        fingerprint=fingerprint(observation, project),
        actions=tuple(place(actions, max_array_size)),
        replace=tuple(replace),
        sweeps={
            name: SweepShape(
                members=len(sweep.members),
                max_parallel=sweep.max_parallel,
                max_array_size=max_array_size,
            )
            for name, sweep in desired.sweeps.items()
        },
        prune_guard=prune_guard,
        budget_guard=budget,
        next_look=next_look(inputs, decided, actions, used=used),
        moves=tuple(moves),
    )
    targeted = bool(targets or replace)
    return made_plan, PlanMemo(inputs, decided, positions, notes, targeted)


def plan(
    desired: Desired,
    observation: Observation,
    records: Sequence[SubmissionRecord],
    now: datetime,
    *,
    scheduler: str,
    targets: Sequence[str] = (),
    downstream: bool = False,
    files: FileState | None = None,
    fit: Fit | None = None,
    setups: Sequence[SetupRecord] = (),
    containers: frozenset[str] | None = None,
    elsewhere: Sequence[ObservedJob] = (),
    replace: Sequence[str] = (),
    max_array_size: int | None = None,
    allow_prune_all: bool = False,
    allow_over_budget: bool = False,
    code_at: Mapping[str, Mapping[str, str | None]] | None = None,
    cancelled: frozenset[str] = frozenset(),
    moves: Sequence[Move] = (),
) -> Plan:
    """The plan ``planned`` makes of a world given fact by fact (``World``'s fields, and
    the request's), without what it was made from: the decision table's tests and the
    benchmarks write worlds this way."""
    world = World(
        desired=desired,
        observation=observation,
        records=records,
        now=now,
        scheduler=scheduler,
        elsewhere=elsewhere,
        setups=setups,
        files=files or FileState(),
        fit=fit,
        containers=containers,
        max_array_size=max_array_size,
        code_at=code_at,
        cancelled=cancelled,
        moves=moves,
    )
    request = Asking(targets, downstream, replace, allow_prune_all, allow_over_budget)
    return planned(world, request)[0]


def check_targets(desired: Desired, names: Sequence[str]) -> None:
    """UnknownTarget when a name given (a target or a run to replace) is no run or sweep
    of the project: the check ``plan`` makes, without building the graph."""
    graph.check_known(members_of(desired, names), desired.upstreams)


def members_of(desired: Desired, names: Sequence[str]) -> list[str]:
    """The names with each sweep's name replaced by its members' names."""
    return [
        member
        for name in names
        for member in (desired.sweeps[name].members if name in desired.sweeps else (name,))
    ]


def _renewals(decided: dict[str, Decision]) -> dict[str, list[tuple[str, timedelta]]]:
    """allocation -> (run, time limit) of the runs waiting for a job with more time left."""
    needs: dict[str, list[tuple[str, timedelta]]] = {}
    for name, made in decided.items():
        if made.renewal is not None:
            allocation, limit = made.renewal
            needs.setdefault(allocation, []).append((name, limit))
    return needs


def _demands(decided: dict[str, Decision]) -> dict[str, list[str]]:
    """allocation -> the runs waiting for a job of it made on demand (idle_release)."""
    needs: dict[str, list[str]] = {}
    for name, made in decided.items():
        if made.demand is not None:
            needs.setdefault(made.demand, []).append(name)
    return needs


def _allocations_of(
    desired: Desired, chosen: Sequence[str], targeted: bool
) -> list[DesiredAllocation]:
    """Every allocation, or with targets only those the chosen runs run in."""
    if not targeted:
        return [desired.allocations[name] for name in desired.allocations]
    used = {desired.runs[name].allocation for name in chosen}
    return [desired.allocations[name] for name in desired.allocations if name in used]


def fingerprint(observation: Observation, project: str) -> str:
    """A digest of the project's observed jobs: a saved plan is stale once it changes."""
    rows = sorted(
        f"{job.job_id}:{job.tag.kind}:{job.tag.name}:{job.tag.spec_hash}:{job.health.value}"
        for job in observation.jobs
        if job.tag.project == project
    )
    material = "\n".join([f"complete={observation.complete}", *rows])
    return hashlib.sha256(material.encode()).hexdigest()[:16]


def _adoptions(inputs: PlanInputs) -> list[Action]:
    """Tagged jobs of this project that the journal does not know: a crash between sbatch
    and the journal write, or a lost journal. Adopting them is what prevents a second
    submission."""
    # known: the id under the run the job's tag names (an id Slurm handed on to another
    # run's job, after the journal's job was lost, is that run's job to adopt)
    known = {(r.job_id, r.kind, r.name) for r in inputs.records if r.job_id is not None}
    return [
        Action(
            kind=ActionKind.ADOPT,
            target=job.tag.name,
            target_kind=job.tag.kind,
            cause=Cause.ADOPT,
            reason=f"tagged job {job.job_id} ({job.health.value}) is not in the journal",
            spec_hash=job.tag.spec_hash,
            job_ids=(job.job_id,),
        )
        for job in inputs.observation.jobs
        if job.tag.project == inputs.project
        and (job.job_id, job.tag.kind, job.tag.name) not in known
        and job.tag.name not in inputs.desired.sweeps  # an array not split: unread
    ]
