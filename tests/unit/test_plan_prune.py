"""The prune guard: a plan whose prunes look like an accident (a commit that declares
nothing, or more than one job over prune_limit) is held, and only such a plan
(engine/plan/prune.py). Pure planner tests, plain tables."""

from __future__ import annotations

import json

import pytest

from reconciler.engine.plan import plan
from reconciler.engine.plan.actions import ActionKind, Plan
from reconciler.engine.plan.guards import PruneCause
from reconciler.engine.plan.prune import explain
from reconciler.report.plan import as_json, as_markdown, as_text
from reconciler.scheduler.base import ObservedJob
from reconciler.scheduler.states import SlurmState as S
from tests.planning import NOW, desired, hash_of, job, observed, record, run

GONE = "a" * 16


def gone(count: int, state: S = S.RUNNING, first: int = 100) -> list[ObservedJob]:
    """Jobs of runs `old0`, `old1`... that are no longer in the specs."""
    return [job(f"old{i}", GONE, state, str(first + i)) for i in range(count)]


def planned(
    runs: list[str], jobs: list[ObservedJob], *, allow: bool = False, limit: str | int = "50%"
) -> Plan:
    state = desired(*(run(name) for name in runs), prune_limit=limit)
    kept = [job(name, hash_of(state, name), S.RUNNING, str(10 + i)) for i, name in enumerate(runs)]
    everything = [*kept, *jobs]
    records = [record(j.tag.name, j.tag.spec_hash, j.job_id) for j in everything]
    return plan(
        state, observed(*everything), records, NOW, scheduler="slurm", allow_prune_all=allow
    )


def test_a_commit_that_empties_the_project_is_held() -> None:
    result = planned([], gone(3))
    guard = result.prune_guard
    assert guard is not None and result.held
    assert (guard.cause, guard.cancels, guard.live) == (PruneCause.EMPTY, 3, 3)
    assert guard.runs == ("old0", "old1", "old2")
    # The plan still shows what the prunes would do: three cancels.
    assert result.count(ActionKind.CANCEL) == 3 and result.has_changes
    said = explain(guard)
    assert (
        "the commit declares no run or allocation, and the plan's prunes would cancel 3 jobs "
        "of the project (old0, old1, old2 left the specs)"
    ) in said
    assert "`recon apply --allow-prune-all`" in said and "`specs:` pattern" in said


def test_a_commit_that_declares_nothing_is_held_for_one_job() -> None:
    """One running job, a commit that declares nothing: held whatever the limit."""
    for limit in ("50%", "100%", 10):
        result = planned([], gone(1), limit=limit)
        assert result.prune_guard is not None and result.prune_guard.cause is PruneCause.EMPTY


def test_a_rename_of_the_only_live_job_is_carried_out() -> None:
    """One run out, one run in: the project's only live job is pruned, its new name
    submitted, in one plan that is not held (even with prune_limit 0)."""
    for limit in ("50%", "0%", 0):
        state = desired(run("renamed"), prune_limit=limit)
        jobs = gone(1)
        records = [record(j.tag.name, GONE, j.job_id) for j in jobs]
        result = plan(state, observed(*jobs), records, NOW, scheduler="slurm")
        assert [a.kind for a in result.actions] == [ActionKind.SUBMIT, ActionKind.CANCEL]
        assert result.prune_guard is None and not result.held


@pytest.mark.parametrize(
    ("kept", "pruned", "limit", "held"),
    [
        (2, 2, "50%", False),  # half: a sweep losing one of two values
        (1, 2, "50%", True),  # two of three
        (3, 1, "50%", False),
        (9, 11, "50%", True),
        (10, 10, "50%", False),
        (5, 5, "0%", True),
        (1, 1, "0%", False),  # one job: a replacement, never held by the limit
        (0, 1, "50%", True),  # ...unless the commit declares nothing
        (1, 2, "0%", True),
        (1, 3, "100%", False),  # 100%: only a commit that declares nothing is held
        (0, 3, "100%", True),
        (7, 3, 3, False),  # a count
        (7, 4, 3, True),
        (2, 2, 10, False),  # every live job of runs, within the count: a deliberate commit
        (0, 3, 10, True),  # under the count, yet the commit declares nothing
    ],
)
def test_the_limit(kept: int, pruned: int, limit: str | int, held: bool) -> None:
    result = planned([f"r{i}" for i in range(kept)], gone(pruned), limit=limit)
    assert result.held is held, result.prune_guard
    if held and kept:
        guard = result.prune_guard
        assert guard is not None and guard.cause is PruneCause.OVER_LIMIT
        assert (guard.cancels, guard.live) == (pruned, kept + pruned)


def test_over_the_limit_says_the_numbers() -> None:
    result = planned(["keep"], gone(2))
    assert result.prune_guard is not None
    assert (
        "the plan's prunes would cancel 2 of the project's 3 live jobs (old0, old1 left the "
        "specs), more than prune_limit 50% allows (1)"
    ) in explain(result.prune_guard)


def test_finished_jobs_neither_count_nor_are_cancelled() -> None:
    """Live jobs only: a project whose other jobs all ended is emptied by one prune."""
    finished = [job(f"done{i}", GONE, S.COMPLETED, str(200 + i)) for i in range(5)]
    result = planned([], [*gone(1), *finished])
    assert result.prune_guard is not None and result.prune_guard.live == 1


def test_confirmed_the_plan_is_not_held_and_says_so() -> None:
    result = planned([], gone(3), allow=True)
    assert result.prune_guard is not None and result.prune_guard.confirmed
    assert not result.held
    assert explain(result.prune_guard).endswith("; confirmed with --allow-prune-all")


def test_no_prune_no_guard() -> None:
    assert planned(["a", "b"], []).prune_guard is None
    state = desired(run("keep"), prune=False)
    jobs = gone(3)
    records = [record(j.tag.name, GONE, j.job_id) for j in jobs]
    assert plan(state, observed(*jobs), records, NOW, scheduler="slurm").prune_guard is None


def test_targets_prune_nothing_so_nothing_is_held() -> None:
    state = desired(run("keep"))
    jobs = gone(2)
    records = [record(j.tag.name, GONE, j.job_id) for j in jobs]
    result = plan(state, observed(*jobs), records, NOW, scheduler="slurm", targets=["keep"])
    assert result.prune_guard is None and result.count(ActionKind.CANCEL) == 0


def test_submissions_beside_a_held_prune_are_in_the_plan_but_held_with_it() -> None:
    """Two runs renamed at once, over the limit: the new names are submitted, the old
    jobs pruned. The plan shows both and is held whole."""
    state = desired(run("new0"), run("new1"))
    jobs = gone(2)
    records = [record(j.tag.name, GONE, j.job_id) for j in jobs]
    result = plan(state, observed(*jobs), records, NOW, scheduler="slurm")
    kinds = [a.kind for a in result.actions]
    assert kinds == [ActionKind.SUBMIT, ActionKind.SUBMIT, ActionKind.CANCEL, ActionKind.CANCEL]
    assert result.held


def test_the_guard_survives_a_saved_plan() -> None:
    result = planned([], gone(2))
    again = Plan.model_validate_json(result.model_dump_json())
    assert again == result and again.held


def test_a_sweep_that_left_is_named_once() -> None:
    jobs = [job(f"seeds[lr={i}]", GONE, S.RUNNING, f"30{i}") for i in range(4)]
    result = planned(["keep"], jobs)
    assert result.prune_guard is not None
    assert "(seeds (4 members) left the specs)" in explain(result.prune_guard)
    reasons = {a.reason for a in result.actions if a.kind is ActionKind.CANCEL}
    assert reasons == {f"sweep seeds left the repo; its job 30{i} is running" for i in range(4)}


def test_every_format_shows_the_hold() -> None:
    result = planned([], gone(2))
    text = as_text(result).splitlines()
    assert text[-2] == "Plan: 0 to submit, 0 to replace, 2 to cancel."
    assert text[-1].startswith("Held: the commit declares no run or allocation")
    assert "\n**Held: the commit declares no run or allocation" in as_markdown(result)
    document = json.loads(as_json(result))
    assert document["summary"]["held"] is True
    assert document["prune_guard"]["cause"] == "empty"
    confirmed = as_text(planned([], gone(2), allow=True)).splitlines()[-1]
    assert confirmed.startswith("The commit declares no run or allocation")
    assert confirmed.endswith("; confirmed with --allow-prune-all.")
    assert "Held" not in as_text(planned(["a", "b", "c"], gone(1)))
