"""A run whose last submission was refused (by sbatch, or before it was sent) is blocked
with the refusal's reason until the commit or its spec changes, or `--replace` asks
again: trying it every pass would be refused every pass, and `apply --wait` never ended."""

from __future__ import annotations

from dataclasses import replace

from reconciler.engine.plan import plan
from reconciler.engine.plan.actions import ActionKind, RunOutcome
from reconciler.engine.plan.causes import Cause
from reconciler.state.records import SubmissionRecord, SubmissionStatus
from tests.planning import COMMIT, NOW, desired, hash_of, observed, record, run

WHY = "specs/a.yaml:1: outputs.out: runs/train/out.txt is a symbolic link"


def refused_record(digest: str, commit: str | None = COMMIT) -> SubmissionRecord:
    return record("train", digest, None, status=SubmissionStatus.REFUSED, reason=WHY,
                  commit=commit)  # fmt: skip


def test_a_refused_run_is_blocked_with_the_reason_and_its_downstream_too() -> None:
    state = desired(run("train"), run("eval", "train"))
    records = [refused_record(hash_of(state, "train"))]
    result = plan(state, observed(), records, NOW, scheduler="slurm")
    train, evaluate = result.actions
    assert (train.kind, train.cause, train.outcome) == (
        ActionKind.BLOCKED, Cause.REFUSED, RunOutcome.BLOCKED,
    )  # fmt: skip
    assert train.reason == (
        f"refused at submission: {WHY}. Fix it and commit, or "
        "`recon apply --replace train` to try again"
    )
    assert (evaluate.kind, evaluate.cause) == (ActionKind.BLOCKED, Cause.UPSTREAM_FAILED)
    assert not result.has_changes


def test_a_new_commit_a_new_spec_or_replace_tries_again() -> None:
    state = desired(run("train"))
    digest = hash_of(state, "train")
    for records in (
        [refused_record(digest, commit="0ld" * 13 + "0")],  # refused at an earlier commit
        [refused_record("an-older-spec")],
    ):
        made = plan(state, observed(), records, NOW, scheduler="slurm")
        assert made.actions[0].kind is ActionKind.SUBMIT, records
    # A later submission of it went through: its job is waited for.
    records = [refused_record(digest), record("train", digest, "12", commit=COMMIT)]
    made = plan(state, observed(), records, NOW, scheduler="slurm")
    assert made.actions[0].cause is Cause.NOT_SEEN_YET
    asked = plan(state, observed(), [refused_record(digest)], NOW, scheduler="slurm",
                 replace=["train"])  # fmt: skip
    assert (asked.actions[0].kind, asked.actions[0].cause) == (
        ActionKind.SUBMIT, Cause.REPLACE_REQUESTED,
    )  # fmt: skip


def test_from_the_work_tree_a_refusal_holds_until_the_spec_changes() -> None:
    state = replace(desired(run("train")), commit=None)
    records = [refused_record(hash_of(state, "train"), commit=None)]
    made = plan(state, observed(), records, NOW, scheduler="slurm")
    assert made.actions[0].cause is Cause.REFUSED
