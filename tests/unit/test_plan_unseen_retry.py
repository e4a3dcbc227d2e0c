"""A retry or a resubmission whose job Slurm does not show yet is waited for, never sent
twice. Found by generated fault histories (tests/local/test_fault_histories.py): two
passes in a row (cron and watch), the second within Slurm's accounting lag of the
first's retry, sent a second retry of the same run and spec beside the first."""

from __future__ import annotations

from datetime import timedelta

from reconciler.engine.plan import plan
from reconciler.engine.plan.actions import ActionKind
from reconciler.engine.plan.causes import Cause
from reconciler.engine.plan.inputs import FileState
from reconciler.scheduler.states import Health
from reconciler.scheduler.states import SlurmState as S
from tests.planning import NOW, desired, hash_of, job, observed, record, run
from tests.unit.test_plan import causes, kinds

EARLIER = NOW - timedelta(minutes=20)


def test_a_retry_slurm_does_not_show_yet_is_not_retried_again() -> None:
    state = desired(run("train", retries=2))
    digest = hash_of(state, "train")
    failed = job("train", digest, S.FAILED, "60", exit_code=1)
    records = [
        record("train", digest, "60", final=Health.FAILED, created_at=EARLIER),
        record("train", digest, "61", created_at=NOW - timedelta(seconds=5)),  # the retry
    ]
    result = plan(state, observed(failed), records, NOW, scheduler="slurm")
    (action,) = result.actions
    assert (action.kind, action.cause, action.unseen_job) == (
        ActionKind.NOOP, Cause.NOT_SEEN_YET, "61"
    )  # fmt: skip
    assert not result.has_changes


def test_a_retry_whose_end_a_partial_observation_cannot_tell_is_not_retried_again() -> None:
    state = desired(run("train", retries=2))
    digest = hash_of(state, "train")
    records = [
        record("train", digest, "60", final=Health.FAILED, created_at=EARLIER),
        record("train", digest, "61", created_at=NOW - timedelta(minutes=15)),
    ]
    # sacct is down: squeue shows live jobs only, and job 61 is no longer one of them.
    result = plan(state, observed(complete=False), records, NOW, scheduler="slurm")
    assert causes(result)["train"] == ("no-op", Cause.OBSERVATION_INCOMPLETE)
    assert not result.has_changes


def test_a_resubmission_after_a_lost_output_is_not_sent_again_while_unseen() -> None:
    state = desired(run("train"))
    digest = hash_of(state, "train")
    succeeded = job("train", digest, S.COMPLETED, "60", exit_code=0)
    records = [
        record("train", digest, "60", final=Health.SUCCEEDED, created_at=EARLIER),
        record("train", digest, "61", created_at=NOW - timedelta(seconds=5)),  # sent again
    ]
    gone = FileState(outputs={("train", "out"): None})  # why 61 was sent
    result = plan(state, observed(succeeded), records, NOW, scheduler="slurm", files=gone)
    assert causes(result)["train"] == ("no-op", Cause.NOT_SEEN_YET)


def test_a_retry_shown_and_failed_counts_as_an_attempt() -> None:
    state = desired(run("train", retries=2))
    digest = hash_of(state, "train")
    jobs = observed(
        job("train", digest, S.FAILED, "60", exit_code=1),
        job("train", digest, S.FAILED, "61", exit_code=1),
    )
    records = [
        record("train", digest, "60", final=Health.FAILED, created_at=EARLIER),
        record("train", digest, "61", created_at=NOW - timedelta(seconds=5)),
    ]
    result = plan(state, jobs, records, NOW, scheduler="slurm")
    assert kinds(result)["train"] == ("retry", "attempt 3 of 3: job 61 failed (exit 1)")
