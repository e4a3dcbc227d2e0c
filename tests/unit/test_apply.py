"""Applying batch runs against a scripted scheduler and a real journal: each action is told
as it completes, and a job id handed out twice in one apply is warned of at once."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import pytest

from reconciler.engine.apply.applier import Applier, Done
from reconciler.engine.plan.actions import Action, ActionKind, Plan
from reconciler.engine.plan.causes import Cause
from reconciler.errors import TransientSchedulerError
from reconciler.scheduler.testing import ScriptedScheduler
from reconciler.state.journal import Journal
from tests.planning import NOW, PROJECT, desired, hash_of, run


def applier(tmp_path: Path, scheduler: ScriptedScheduler, told: list[Done], *names: str) -> Applier:
    state = dataclasses.replace(desired(*(run(name) for name in names)), root=tmp_path)
    actions = tuple(
        Action(kind=ActionKind.SUBMIT, cause=Cause.NEVER_RUN, target=name, reason="not yet run",
               spec_hash=hash_of(state, name))
        for name in names
    )  # fmt: skip
    plan = Plan(
        project=PROJECT, root=str(tmp_path), commit=state.commit, scheduler="slurm",
        created_at=NOW, observation_complete=True, fingerprint="0" * 16, actions=actions,
    )  # fmt: skip
    journal = Journal(tmp_path / "journal.sqlite")
    code = tmp_path / "code"
    return Applier(plan, state, scheduler, journal, code, lambda: NOW, report=told.append)


def test_each_submission_is_told_as_it_completes_before_an_error_stops_the_apply(
    tmp_path: Path,
) -> None:
    told: list[Done] = []
    down = TransientSchedulerError("sbatch: error: Unable to contact slurm controller")
    scheduler = ScriptedScheduler(submit=["11", "12", down])
    with pytest.raises(TransientSchedulerError):
        applier(tmp_path, scheduler, told, "a", "b", "c").run()
    assert told == [Done("submitted a: job 11"), Done("submitted b: job 12")]


def test_one_job_id_given_to_two_runs_in_one_apply_is_warned_of_at_once(tmp_path: Path) -> None:
    told: list[Done] = []
    done = applier(
        tmp_path, ScriptedScheduler(submit=["3127", "3127", "3128"]), told, "a", "b", "c"
    )
    result = done.run()
    warning = (
        "job 3127 was given to a, b in this apply: the scheduler lost the earlier job "
        "(restarted?); the next pass submits the lost runs again"
    )
    assert told == [
        Done("submitted a: job 3127"),
        Done("submitted b: job 3127"),
        Done(f"warning: {warning}", problem=True),
        Done("submitted c: job 3128"),
    ]
    assert result.warnings == [warning]
    assert result.lines()[-1] == Done(f"warning: {warning}", problem=True)
    (event,) = [e for e in done.journal.events(PROJECT) if e.kind == "warning"]
    assert event.message == warning


def test_a_retry_cancels_the_runs_held_original_first_intent_journalled(tmp_path: Path) -> None:
    told: list[Done] = []
    journalled_first: list[list[str]] = []

    def cancel(job_id: str) -> None:
        journalled_first.append([c.job_id for c in done.journal.pending_cancels(PROJECT)])

    done = applier(tmp_path, ScriptedScheduler(submit=["12"], cancel=cancel), told, "a")
    retry = done.plan.actions[0].model_copy(update={"kind": ActionKind.RETRY, "job_ids": ("10",)})
    done.plan = done.plan.model_copy(update={"actions": (retry,)})
    done.run()
    assert told == [Done("cancelled job 10"), Done("submitted a: job 12")]
    assert journalled_first == [["10"]]  # the intent was there when scancel ran
    assert done.journal.pending_cancels(PROJECT) == []
