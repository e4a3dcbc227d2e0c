"""Runs renamed (`renamed_from`): what a plan moves and what it leaves to do
(engine/plan/moves.py). Pure planner tests, plain tables: the desired state, the jobs
and the journal as values, glued as a pass glues them (engine/reconcile.look)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import pytest

from reconciler.desired.desired import Desired, former_identity
from reconciler.desired.models import Run
from reconciler.engine.plan import moves, plan
from reconciler.engine.plan.actions import ActionKind, Move, Plan
from reconciler.engine.plan.causes import Cause
from reconciler.engine.plan.identity import renamed
from reconciler.scheduler.base import ObservedJob
from reconciler.scheduler.states import Health
from reconciler.scheduler.states import SlurmState as S
from reconciler.state.records import Rename, SubmissionRecord
from tests.planning import NOW, PROJECT, desired, job, observed, record
from tests.planning import run as named_run
from tests.unit.test_allocations import alloc_record, allocation, held

DEPLOYMENT = "0123456789ab"  # the deployment tests.planning.job tags with


def run(name: str, *upstreams: str, **fields: Any) -> Run:
    """A run whose command does not name it: a rename changes nothing else."""
    return named_run(name, *upstreams, **{"command": "echo hi", **fields})


def before_and_after(*after: Run, before: Sequence[Run] = ()) -> tuple[Desired, Desired]:
    """The desired state of the commit before the rename and of the commit with it."""
    return desired(*before), desired(*after)


def planned(
    state: Desired,
    records: list[SubmissionRecord],
    jobs: Sequence[ObservedJob] = (),
    done: Sequence[Rename] = (),
) -> Plan:
    """A pass's plan: the moves pending, the journal and the jobs under today's names
    (the journal reads its records under the names of the moves it made)."""
    records = moves.renames_of(done, ()).records(records)
    pending = moves.pending(state, records, jobs)
    renames = moves.renames_of(done, pending)
    own = renamed(observed(*jobs), PROJECT, DEPLOYMENT, renames)
    return plan(state, own, renames.records(records), NOW, scheduler="slurm", moves=pending)


def succeeded(state: Desired, *names: str, first: int = 10) -> list[SubmissionRecord]:
    return [
        record(name, state.runs[name].spec_hash, str(first + i), Health.SUCCEEDED)
        for i, name in enumerate(names)
    ]


def kinds(result: Plan) -> dict[str, set[ActionKind]]:
    found: dict[str, set[ActionKind]] = {}
    for action in result.actions:
        found.setdefault(action.target, set()).add(action.kind)
    return found


def test_a_renamed_run_is_moved_with_no_job() -> None:
    old, new = before_and_after(run("prepare", renamed_from="prep"), before=[run("prep")])
    result = planned(new, succeeded(old, "prep"))
    assert kinds(result) == {"prepare": {ActionKind.MOVED, ActionKind.NOOP}}
    (move,) = result.moves
    assert move == Move(
        old="prep",
        old_hash=old.runs["prep"].spec_hash,
        new="prepare",
        new_hash=new.runs["prepare"].spec_hash,
        old_dir="runs/prep",
        new_dir="runs/prepare",
        old_run_dir="runs/prep",
        new_run_dir="runs/prepare",
    )
    moved = result.actions[0]
    assert (moved.kind, moved.cause, moved.target) == (ActionKind.MOVED, Cause.RENAMED, "prepare")
    assert moved.reason.startswith("prep -> prepare: ")
    assert result.has_changes and "1 to move" in result.summary
    assert not any(a.changes_cluster for a in result.actions)  # no job submitted or cancelled


def test_the_name_is_in_the_hash_so_the_old_one_is_judged_by_the_former_identity() -> None:
    old, new = before_and_after(run("prepare", renamed_from="prep"), before=[run("prep")])
    assert new.runs["prepare"].spec_hash != old.runs["prep"].spec_hash
    assert former_identity(new, "prepare") == ("prep", old.runs["prep"].spec_hash)


def test_a_spec_changed_beside_the_name_moves_nothing_and_runs_anew() -> None:
    old, new = before_and_after(
        run("prepare", renamed_from="prep", command="echo other"), before=[run("prep")]
    )
    result = planned(new, succeeded(old, "prep"))
    assert result.moves == ()
    assert kinds(result) == {"prepare": {ActionKind.SUBMIT}}


def test_a_live_job_of_the_old_name_is_adopted_not_cancelled() -> None:
    old, new = before_and_after(run("prepare", renamed_from="prep"), before=[run("prep")])
    running = job("prep", old.runs["prep"].spec_hash, S.RUNNING, "77")
    journalled = record("prep", old.runs["prep"].spec_hash, "77")
    result = planned(new, [journalled], [running])
    (move,) = result.moves
    assert move.live_jobs == ("77",)
    assert kinds(result) == {"prepare": {ActionKind.MOVED, ActionKind.NOOP}}
    (kept,) = [a for a in result.actions if a.kind is ActionKind.NOOP]
    assert kept.cause is Cause.IN_PROGRESS
    assert result.count(ActionKind.CANCEL) == 0 and result.prune_guard is None


def test_without_the_rename_the_old_job_is_pruned_and_the_new_run_submitted() -> None:
    """What `renamed_from` changes: the same commit without it."""
    old, new = before_and_after(run("prepare"), before=[run("prep")])
    running = job("prep", old.runs["prep"].spec_hash, S.RUNNING, "77")
    result = planned(new, [record("prep", old.runs["prep"].spec_hash, "77")], [running])
    assert kinds(result) == {"prepare": {ActionKind.SUBMIT}, "prep": {ActionKind.CANCEL}}


@pytest.mark.parametrize("kept", [True, False], ids=["renamed_from kept", "renamed_from gone"])
def test_once_moved_nothing_is_left_to_do(kept: bool) -> None:
    old, new = before_and_after(run("prepare", renamed_from="prep"), before=[run("prep")])
    made = moves.pending(new, succeeded(old, "prep"), ())
    done = [moves.rename_of(move) for move in made]
    later = new if kept else desired(run("prepare"))
    result = planned(later, succeeded(old, "prep"), done=done)
    assert result.moves == () and not result.has_changes
    assert kinds(result) == {"prepare": {ActionKind.NOOP}}


def test_a_run_reading_a_renamed_run_moves_to_its_new_hash_and_reruns_nothing() -> None:
    old, new = before_and_after(
        run("prepare", renamed_from="prep"),
        run("train", inputs={"data": "prepare.out"}),
        before=[run("prep"), run("train", inputs={"data": "prep.out"})],
    )
    records = succeeded(old, "prep", "train")
    result = planned(new, records)
    reader = [m for m in result.moves if m.new == "train"]
    assert reader == [
        Move(
            old="train",
            old_hash=old.runs["train"].spec_hash,
            new="train",
            new_hash=new.runs["train"].spec_hash,
        )
    ]
    assert kinds(result) == {
        "prepare": {ActionKind.MOVED, ActionKind.NOOP},
        "train": {ActionKind.NOOP},
    }


def test_a_run_with_its_own_workdir_keeps_its_folder() -> None:
    old, new = before_and_after(
        run("prepare", renamed_from="prep", workdir="data/prep"),
        before=[run("prep", workdir="data/prep")],
    )
    (move,) = planned(new, succeeded(old, "prep")).moves
    assert (move.old_dir, move.new_dir) == (None, None)


def test_a_former_name_that_never_ran_moves_nothing() -> None:
    _old, new = before_and_after(run("prepare", renamed_from="prep"))
    result = planned(new, [])
    assert result.moves == ()
    assert kinds(result) == {"prepare": {ActionKind.SUBMIT}}


def test_a_failed_run_renamed_keeps_its_failures() -> None:
    """Its retries were spent under the old name: the move carries them, no new attempt."""
    old, new = before_and_after(run("prepare", renamed_from="prep"), before=[run("prep")])
    failed = record("prep", old.runs["prep"].spec_hash, "5", Health.FAILED, exit_code=1)
    result = planned(new, [failed])
    assert kinds(result) == {"prepare": {ActionKind.MOVED, ActionKind.NOOP}}
    (kept,) = [a for a in result.actions if a.kind is ActionKind.NOOP]
    assert kept.cause is Cause.RETRIES_EXHAUSTED


def test_a_renamed_allocation_keeps_its_held_job() -> None:
    """Its job, tagged with the old name, is reused under the new name: not released as
    an allocation that left the specs, not allocated again."""
    pool, renamed = allocation("pool"), allocation("warm-pool", renamed_from="pool")
    state = desired(allocations=(renamed,))
    running = held("12", of=pool)
    result = planned(state, [alloc_record("12", of=pool)], [running])
    (move,) = result.moves
    assert (move.kind, move.old, move.new, move.live_jobs) == (
        "alloc",
        "pool",
        "warm-pool",
        ("12",),
    )
    assert (move.old_hash, move.new_hash) == (pool.spec_hash, renamed.spec_hash)
    assert [(a.kind, a.target, a.target_kind) for a in result.actions] == [
        (ActionKind.MOVED, "warm-pool", "alloc"),
        (ActionKind.REUSE, "warm-pool", "alloc"),
    ]
    assert result.actions[0].reason == (
        "pool -> warm-pool: records and setups carried over; its held job adopted, not released"
    )
    assert result.prune_guard is None


def test_an_allocation_renamed_and_changed_is_a_new_one() -> None:
    pool = allocation("pool")
    changed = allocation("warm-pool", renamed_from="pool", time_limit="2h")
    result = planned(
        desired(allocations=(changed,)), [alloc_record("12", of=pool)], [held("12", of=pool)]
    )
    assert result.moves == ()
    assert {(a.kind, a.target) for a in result.actions} >= {(ActionKind.CANCEL, "pool")}
