"""A plan made again for a few runs: those a commit changed and their downstream. Pure.

`recon watch` keeps its last plan and what it was made from (``PlanMemo``). When a commit
changes a few runs' specs and nothing else changed (the same journal, the same answer
from the scheduler, before the plan's next look: engine/steady.py checks), a run's
decision can differ from the kept one only if the run changed or an upstream's decision
did, since each run is decided from its own spec, jobs, records and files and its
upstreams' decisions (engine/plan/runs.py). So the changed runs and everything
downstream of them are decided again, in the plan's order, and the rest of the plan is
kept as it was.

What ties a run to more than its upstreams is not re-planned in part: a run in an
allocation (its steps share the allocation's jobs and GPUs, and decide renewals and idle
releases), a coupled run (its partners tear down with it), a sweep's member (its job
arrays are placed across the sweep), a run with a teardown, a plan of some runs only,
and a kept next look that one of them set (the next one after it is not kept). Each
returns None: the caller makes a full plan instead. The project's settings, other files
and the graph's shape are the caller's to check (desired/loader.reload).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Collection, Mapping
from datetime import datetime

from reconciler.desired.desired import Desired
from reconciler.engine.plan.actions import SUBMITTING, Action, ActionKind, Plan
from reconciler.engine.plan.assemble import fingerprint
from reconciler.engine.plan.holds import budget_guard, suspend, suspended_notes
from reconciler.engine.plan.inputs import Decision, FileState, PlanInputs, PlanMemo
from reconciler.engine.plan.notes import bare_notes
from reconciler.engine.plan.requeue import next_look
from reconciler.engine.plan.runs import decide
from reconciler.engine.plan.teardown import teardowns
from reconciler.scheduler.base import Observation


@dataclasses.dataclass(frozen=True)
class Replanned:
    plan: Plan
    memo: PlanMemo
    visited: tuple[str, ...]  # the runs decided again


def replan(
    kept: Plan,
    memo: PlanMemo,
    desired: Desired,
    affected: list[str],
    now: datetime,
    files: FileState,
    code_at: Mapping[str, Mapping[str, str | None]],
    observation: Observation | None = None,
) -> Replanned | None:
    """``kept`` (made with ``memo``) with ``affected`` (``PlanMemo.affected``: changed
    runs and their downstream, in order) decided again against ``desired``, at ``now``.
    ``files`` and ``code_at``: as a full plan would read them now, for the affected runs
    at least. ``observation``: when some live jobs changed too (``replan_jobs``' rule:
    their runs are among ``affected``); then the next look and fingerprint are made
    again. None when the change is not local to them (see the module's docstring)."""
    before = memo.inputs.desired
    if memo.targeted or desired.upstreams is not before.upstreams:
        return None
    if observation is None and kept.next_look is not None and kept.next_look.target in affected:
        return None
    for name in affected:
        if name not in desired.runs or not _alone(desired, name) or not _alone(before, name):
            return None
        if name in memo.inputs.partners_by_run:
            return None
    inputs = dataclasses.replace(
        memo.inputs, desired=desired, now=now, files=files, code_at=code_at
    )
    if observation is not None:
        inputs = inputs.with_observation(observation, now)
        if inputs.jobs_by_allocation != memo.inputs.jobs_by_allocation:
            return None
    again = _decide_again(kept, memo, inputs, affected)
    if again is None:
        return None
    decided, actions = again
    actions = suspend(actions, desired, only=affected)
    if _budget_moves(kept, desired, actions, inputs):
        return None
    update: dict[str, object] = {
        "commit": desired.commit,
        "created_at": now,
        "actions": tuple(actions),
        "notes": (*memo.notes, *bare_notes(desired.runs, actions), *suspended_notes(actions)),
    }
    if observation is not None:
        used = {made.uses for made in decided.values() if made.uses is not None}
        update["fingerprint"] = fingerprint(observation, memo.inputs.project)
        update["next_look"] = next_look(inputs, decided, actions, used=used, idle_from=memo.inputs)
    else:
        mine = {name: decided[name] for name in affected}
        own_actions = [decided[name].action for name in affected]
        # The affected runs' own moments (graces, time limits), beside the kept plan's
        # first: that one was set by a run not affected, or by an allocation, and holds.
        alone = dataclasses.replace(inputs, allocation_states={}, setups=())
        due = [
            look
            for look in (kept.next_look, next_look(alone, mine, own_actions))
            if look is not None
        ]
        update["next_look"] = min(
            due, key=lambda look: (look.at, look.kind, look.target), default=None
        )
    plan = kept.model_copy(update=update)
    return Replanned(plan, memo.renewed(inputs, decided), tuple(affected))


def _budget_moves(
    kept: Plan, desired: Desired, actions: list[Action], inputs: PlanInputs
) -> bool:
    """The budget held the kept plan, or would hold this one: a full plan decides (its
    confirmation is the request's, which a re-plan does not know)."""
    if kept.budget_guard is not None:
        return True
    return budget_guard(desired, actions, inputs.records, inputs.now, confirmed=False) is not None


def _alone(desired: Desired, name: str) -> bool:
    """A run whose decision reads no other run's but its upstreams'."""
    run = desired.runs[name]
    return run.allocation is None and not run.coupled_with and run.member is None


def replan_jobs(
    kept: Plan, memo: PlanMemo, observation: Observation, changed: Collection[str], now: datetime
) -> Replanned | None:
    """``kept`` (made with ``memo``) with the runs whose jobs changed and their downstream
    decided again against ``observation``: the deployment's jobs, the same jobs as the
    kept plan's (same ids, in the same order), some in another state or with other rows
    (a job started, a running job's time left). Members of a sweep may be among them as
    long as none is submitted, before or now (their job arrays are placed across the
    sweep). The next look is made again over every run (on Slurm, the kept one is often
    a running job's time limit, counted from the kept observation). None when the
    change is not local to them, as for ``replan``."""
    affected = memo.affected(changed)
    before = memo.inputs
    if memo.targeted or affected is None:
        return None
    for name in affected:
        run = before.desired.runs[name]
        if run.allocation is not None or run.coupled_with or name in before.partners_by_run:
            return None
    inputs = before.with_observation(observation, now)
    if inputs.jobs_by_allocation != before.jobs_by_allocation:
        return None  # an allocation's job: its state planned again only by a full plan
    again = _decide_again(kept, memo, inputs, affected, members=True)
    if again is None:
        return None
    decided, actions = again
    actions = suspend(actions, before.desired, only=affected)
    if _budget_moves(kept, before.desired, actions, inputs):
        return None
    used = {made.uses for made in decided.values() if made.uses is not None}
    plan = kept.model_copy(
        update={
            "created_at": now,
            "actions": tuple(actions),
            "notes": (
                *memo.notes,
                *bare_notes(before.desired.runs, actions),
                *suspended_notes(actions),
            ),
            "fingerprint": fingerprint(observation, memo.inputs.project),
            "next_look": next_look(inputs, decided, actions, used=used, idle_from=before),
        }
    )
    return Replanned(plan, memo.renewed(inputs, decided), tuple(affected))


def _decide_again(
    kept: Plan, memo: PlanMemo, inputs: PlanInputs, affected: list[str], members: bool = False
) -> tuple[dict[str, Decision], list[Action]] | None:
    """Each affected run decided again, in order, its action put in its place; None when
    one cannot be decided apart from the rest (see the module's docstring). With
    ``members``, a sweep's member may be among them if it submits nothing, before or now."""
    if any(kept.actions[memo.positions[name]].target != name for name in affected):
        return None  # the plan is not the one the memo was made with
    if kept.observation_complete and teardowns(inputs, affected):
        return None
    if any(a.kind is ActionKind.TEARDOWN and a.target in affected for a in kept.actions):
        return None
    decided = dict(memo.decided)
    actions = list(kept.actions)
    for name in affected:
        run = inputs.desired.runs[name]
        position = memo.positions[name]
        made = decide(inputs, run, decided)
        if made.renewal is not None or made.demand is not None or made.uses is not None:
            return None
        if run.member is not None and (
            not members or made.action.kind in SUBMITTING or actions[position].kind in SUBMITTING
        ):
            return None
        decided[name] = made
        actions[position] = made.action
    return decided, actions
