"""The prune guard: a plan whose prunes would empty the project, or pass prune_limit, is
held (engine/plan_prune.py). Pure planner tests, plain tables."""

from __future__ import annotations

import json

import pytest

from reconciler.engine.plan import plan
from reconciler.engine.plan.actions import ActionKind, Plan, PruneCause
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
    assert (guard.cause, guard.cancels, guard.live) == (PruneCause.EVERY, 3, 3)
    assert guard.runs == ("old0", "old1", "old2")
    # The plan still shows what the prunes would do: three cancels.
    assert result.count(ActionKind.CANCEL) == 3 and result.has_changes
    said = explain(guard)
    assert "every live job of the project (3 jobs; old0, old1, old2 left the specs)" in said
    assert "`recon apply --allow-prune-all`" in said and "`specs:` pattern" in said


def test_the_only_live_job_is_every_live_job() -> None:
    """The issue's own case: one running job, a commit that matches no spec."""
    result = planned([], gone(1))
    assert result.prune_guard is not None and result.prune_guard.cause is PruneCause.EVERY


@pytest.mark.parametrize(
    ("kept", "pruned", "limit", "held"),
    [
        (2, 2, "50%", False),  # half: a sweep losing one of two values
        (1, 2, "50%", True),  # two of three
        (3, 1, "50%", False),
        (9, 11, "50%", True),
        (10, 10, "50%", False),
        (5, 5, "0%", True),
        (1, 1, "0%", True),
        (1, 3, "100%", False),  # 100%: only emptying the project is held
        (0, 3, "100%", True),
        (7, 3, 3, False),  # a count
        (7, 4, 3, True),
        (0, 3, 10, True),  # under the count, yet every live job
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
    """A renamed run: its new name is submitted, its old job pruned. The plan shows both
    and is held whole: the new job would run beside the old one."""
    state = desired(run("renamed"))
    jobs = gone(1)
    records = [record(j.tag.name, GONE, j.job_id) for j in jobs]
    result = plan(state, observed(*jobs), records, NOW, scheduler="slurm")
    assert [a.kind for a in result.actions] == [ActionKind.SUBMIT, ActionKind.CANCEL]
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
    assert text[-1].startswith("Held: the plan's prunes would cancel every live job")
    assert "\n**Held: the plan's prunes would cancel every live job" in as_markdown(result)
    document = json.loads(as_json(result))
    assert document["summary"]["held"] is True
    assert document["prune_guard"]["cause"] == "every"
    confirmed = as_text(planned([], gone(2), allow=True)).splitlines()[-1]
    assert confirmed.startswith("The plan's prunes would cancel every live job")
    assert confirmed.endswith("; confirmed with --allow-prune-all.")
    assert "Held" not in as_text(planned(["a", "b", "c"], gone(1)))
