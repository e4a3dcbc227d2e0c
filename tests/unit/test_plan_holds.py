"""Suspension and the GPU-hour budget (engine/plan/holds.py): what a plan shows but apply
does not carry out. Pure planner tests, plain tables."""

from __future__ import annotations

import dataclasses
import json
from datetime import timedelta
from typing import Any

import pytest

from reconciler.desired.desired import Desired
from reconciler.engine.plan import plan
from reconciler.engine.plan.actions import ActionKind, Plan
from reconciler.engine.plan.holds import explain_hold, refusal, refused_event
from reconciler.errors import OverBudgetError
from reconciler.report.plan import as_json, as_text
from reconciler.scheduler.base import ObservedJob
from reconciler.scheduler.states import Health
from reconciler.scheduler.states import SlurmState as S
from reconciler.scheduler.usage import JobUsage
from reconciler.state.records import SubmissionRecord
from tests.planning import NOW, desired, hash_of, job, observed, record, run

GPU = {"gpus": 2, "time": "2h", "partition": "gpu"}  # 4 GPU-hours at most


def planned(state: Desired, *jobs: ObservedJob, records: list[SubmissionRecord] | None = None,
            **options: Any) -> Plan:  # fmt: skip
    known = records if records is not None else []
    return plan(state, observed(*jobs), known, NOW, scheduler="slurm", **options)


def kinds(result: Plan) -> dict[str, tuple[ActionKind, bool]]:
    return {a.target: (a.kind, a.suspended) for a in result.actions}


# -- suspend -------------------------------------------------------------------------------


def test_a_suspended_project_plans_and_shows_but_changes_nothing() -> None:
    state = desired(run("a"), run("b", "a"), settings={"suspend": True})
    result = planned(state)
    assert kinds(result) == {
        "a": (ActionKind.SUBMIT, True),
        "b": (ActionKind.SUBMIT, True),
    }
    assert not result.has_changes and not result.held
    assert result.suspended == ("a", "b")
    text = as_text(result)
    assert "+ submit    b              (suspended) not yet run; after a" in text
    assert "No changes to the cluster; 2 actions suspended." in text
    assert "suspended: a, b (`suspend: true` in recon.yaml" in text


def test_a_suspended_project_prunes_nothing() -> None:
    state = desired(run("a"), settings={"suspend": True})
    gone = job("old", "f" * 16, S.RUNNING, "10")
    result = planned(state, gone, records=[record("old", "f" * 16, "10")])
    cancel = [a for a in result.actions if a.kind is ActionKind.CANCEL]
    assert len(cancel) == 1 and cancel[0].suspended
    assert result.prune_guard is None and not result.has_changes


def test_a_suspended_run_holds_its_downstream_and_nothing_else() -> None:
    state = desired(run("prep", suspend=True), run("train", "prep"), run("other"))
    result = planned(state)
    assert kinds(result) == {
        "prep": (ActionKind.SUBMIT, True),
        "train": (ActionKind.SUBMIT, True),
        "other": (ActionKind.SUBMIT, False),
    }
    assert result.has_changes and result.suspended == ("prep", "train")


def test_a_running_job_of_a_suspended_run_goes_on() -> None:
    """Suspending cancels nothing: a job of the run's spec runs on, shown in progress."""
    state = desired(run("a", suspend=True))
    result = planned(state, job("a", hash_of(state, "a"), S.RUNNING, "7"),
                     records=[record("a", hash_of(state, "a"), "7")])  # fmt: skip
    (action,) = result.actions
    assert action.kind is ActionKind.NOOP and not action.suspended


def test_suspend_is_in_no_spec_hash() -> None:
    plain, suspended = desired(run("a")), desired(run("a", suspend=True))
    assert hash_of(plain, "a") == hash_of(suspended, "a")


def test_un_suspending_goes_on_where_it_was() -> None:
    """The run's job succeeded before it was suspended: taken out again, it is current."""
    state = desired(run("a"))
    success = record("a", hash_of(state, "a"), "7", final=Health.SUCCEEDED)
    done = job("a", hash_of(state, "a"), S.COMPLETED, "7")
    for spec in (run("a", suspend=True), run("a")):
        (action,) = planned(desired(spec), done, records=[success]).actions
        assert action.kind is not ActionKind.SUBMIT


# -- budget --------------------------------------------------------------------------------


def ran(
    name: str, state: Desired, hours: float, gpus: int = 2, ended_ago: float = 30
) -> SubmissionRecord:
    """A success of `name` that held `gpus` for `hours`, ended `ended_ago` days before NOW."""
    ended = NOW - timedelta(days=ended_ago)
    usage = JobUsage(ended=ended, elapsed_s=hours * 3600, gpus=gpus, gpu_s=gpus * hours * 3600)
    made = record(name, "0" * 16, str(100 + len(name)), final=Health.SUCCEEDED)
    return dataclasses.replace(made, usage_json=json.dumps(usage.to_json()))


@pytest.mark.parametrize(
    ("budget", "held"),
    [
        (5.9, True),  # 2 GPUs x 1 h (last success) + 2 GPUs x 2 h (never run: its limit)
        (6.0, False),
        (100, False),
    ],
)
def test_a_plan_over_its_gpu_budget_is_held(budget: float, held: bool) -> None:
    state = desired(run("a", resources=GPU), run("b", resources=GPU),
                    settings={"budget": {"gpu_hours": budget}})  # fmt: skip
    result = planned(state, records=[ran("a", state, hours=1)])
    assert result.held is held
    if held:
        guard = result.budget_guard
        assert guard is not None and (guard.forecast, guard.runs) == (6.0, ("a", "b"))
        said = explain_hold(guard)
        assert said.startswith(
            "the plan's 2 GPU runs (a, b) are forecast to take 6 GPU-hours: more than "
            "budget 5.9 GPU-hours per commit. Nothing of it is carried out; running jobs go on"
        )
        assert "`recon apply --allow-over-budget`" in said
        assert refused_event(guard) == "budget-refused"
        assert isinstance(refusal(guard), OverBudgetError)
        assert "Held: the plan's 2 GPU runs" in as_text(result)
        assert json.loads(as_json(result))["budget_guard"]["forecast"] == 6.0


def test_per_day_counts_what_ended_today() -> None:
    settings = {"budget": {"gpu_hours": 6, "per": "day"}}
    state = desired(run("a", resources=GPU), settings=settings)
    today = [ran("x", state, hours=1, ended_ago=0)]  # 2 GPU-hours today, + 4 forecast
    assert not planned(state, records=today).held
    more = [*today, ran("y", state, hours=0.5, ended_ago=0)]
    result = planned(state, records=more)
    assert result.budget_guard is not None and result.budget_guard.spent == 3.0
    assert "and the project's jobs held 3 today" in explain_hold(result.budget_guard)
    yesterday = [*today, ran("y", state, hours=5, ended_ago=1)]
    assert not planned(state, records=yesterday).held


def test_the_budget_never_holds_cpu_runs_suspended_runs_or_running_jobs() -> None:
    settings = {"budget": {"gpu_hours": 1}}
    assert not planned(desired(run("cpu"), settings=settings)).held
    assert not planned(desired(run("a", resources=GPU, suspend=True), settings=settings)).held
    state = desired(run("a", resources=GPU), settings=settings)
    running = job("a", hash_of(state, "a"), S.RUNNING, "7")
    result = planned(state, running, records=[record("a", hash_of(state, "a"), "7")])
    assert not result.held and result.count(ActionKind.CANCEL) == 0


def test_confirmed_the_budget_does_not_hold() -> None:
    state = desired(run("a", resources=GPU), settings={"budget": {"gpu_hours": 1}})
    result = planned(state, allow_over_budget=True)
    assert result.budget_guard is not None and result.budget_guard.confirmed
    assert not result.held
    assert as_text(result).rstrip().endswith("confirmed with --allow-over-budget.")
