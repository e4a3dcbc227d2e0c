"""`--replace RUN` (Terraform's -replace): a new job for a run whose spec did not change."""

from __future__ import annotations

import pytest

from reconciler.engine.plan import plan
from reconciler.engine.plan.actions import ActionKind, Plan
from reconciler.engine.plan.causes import Cause
from reconciler.errors import UnknownTarget
from reconciler.scheduler.states import SlurmState as S
from tests.cli import recon
from tests.gitrepo import GitRepo
from tests.planning import NOW, desired, hash_of, job, observed, record, run


def actions(result: Plan) -> dict[str, tuple[str, str, tuple[str, ...]]]:
    return {a.target: (a.kind.value, a.reason, a.job_ids) for a in result.actions}


def test_a_current_run_is_submitted_again_and_its_downstream_waits_for_it() -> None:
    state = desired(run("prep"), run("train", "prep"))
    jobs = observed(
        job("prep", hash_of(state, "prep"), S.COMPLETED, "10"),
        job("train", hash_of(state, "train"), S.COMPLETED, "11"),
    )
    records = [
        record("prep", hash_of(state, "prep"), "10"),
        record("train", hash_of(state, "train"), "11"),
    ]
    assert not plan(state, jobs, records, NOW, scheduler="slurm").has_changes
    result = plan(state, jobs, records, NOW, scheduler="slurm", replace=["prep"])
    assert actions(result)["prep"] == ("submit", "replaced as asked (--replace)", ())
    assert result.replace == ("prep",)
    # Queued behind it, and judged again once the new output is there.
    assert actions(result)["train"][0] == "may rerun"
    assert result.summary == "Plan: 1 to submit, 0 to replace, 0 to cancel, 1 may rerun."


def test_a_failed_run_with_no_retries_left_is_submitted_again() -> None:
    state = desired(run("train"), run("eval", "train"))
    digest = hash_of(state, "train")
    jobs = observed(job("train", digest, S.FAILED, "60", exit_code=1))
    records = [record("train", digest, "60")]
    assert actions(plan(state, jobs, records, NOW, scheduler="slurm"))["eval"][0] == "blocked"
    result = plan(state, jobs, records, NOW, scheduler="slurm", replace=["train"])
    assert actions(result)["train"][0] == "submit"
    assert actions(result)["eval"] == ("submit", "not yet run", ())
    assert result.actions[-1].after == ("train",)


def test_a_running_job_is_cancelled_and_replaced() -> None:
    state = desired(run("train"))
    jobs = observed(job("train", hash_of(state, "train"), S.RUNNING, "70"))
    result = plan(state, jobs, [record("train", hash_of(state, "train"), "70")], NOW,
                  scheduler="slurm", replace=["train"])  # fmt: skip
    assert actions(result)["train"] == ("replace", "replaced as asked (--replace)", ("70",))
    assert result.actions[0].cause is Cause.REPLACE_REQUESTED


def test_never_on_a_partial_picture() -> None:
    state = desired(run("train"))
    jobs = observed(job("train", hash_of(state, "train"), S.RUNNING, "70"), complete=False)
    result = plan(state, jobs, [record("train", hash_of(state, "train"), "70")], NOW,
                  scheduler="slurm", replace=["train"])  # fmt: skip
    (action,) = result.actions
    assert (action.kind, action.cause, action.job_ids) == (
        ActionKind.NOOP, Cause.OBSERVATION_INCOMPLETE, ()
    )  # fmt: skip
    assert not result.has_changes


def test_a_replaced_run_is_planned_with_other_targets_and_an_unknown_one_is_an_error() -> None:
    state = desired(run("prep"), run("other"))
    result = plan(
        state, observed(), [], NOW, scheduler="slurm", targets=["other"], replace=["prep"]
    )
    assert set(actions(result)) == {"prep", "other"}
    with pytest.raises(UnknownTarget, match="no run named nosuch"):
        plan(state, observed(), [], NOW, scheduler="slurm", replace=["nosuch"])


def test_plan_shows_it_and_a_saved_plan_carries_it(
    repo: GitRepo, capsys: pytest.CaptureFixture[str]
) -> None:
    repo.commit({
        "recon.yaml": "project: demo\nscheduler: local\n",
        "specs/a.yaml": "kind: Run\nname: hello\ncommand: echo hi > {outputs.out.path}\n"
        "outputs:\n  out: out.txt\n",
    })  # fmt: skip
    root = str(repo.root)
    assert recon(capsys, "apply", root, "--auto-approve", "--wait").code == 0
    shown = recon(capsys, "plan", root, "--replace", "hello", "--out", str(repo.root / "x.plan"))
    assert "  + submit    hello          replaced as asked (--replace)" in shown.out
    applied = recon(capsys, "apply", str(repo.root / "x.plan"), "--auto-approve")
    assert applied.code == 0, applied
    assert "submitted hello: job 2" in applied.out
