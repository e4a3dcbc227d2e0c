"""Checkpoints on plain values: a run that declares one is requeued (a new job that
resumes it) when its job saved the checkpoint, timed out or was preempted, drawing from no
retry budget, at most `max_requeues` times since its last success; the spec's checks and
its hash."""

from __future__ import annotations

import json
from dataclasses import replace
from typing import Any

import pytest
from pydantic import ValidationError

from reconciler.desired.models import Run
from reconciler.desired.retries import RetryKind
from reconciler.engine.ledger.status import run_statuses
from reconciler.engine.plan import plan
from reconciler.engine.plan.actions import Action, ActionKind, RunOutcome
from reconciler.engine.plan.causes import Cause
from reconciler.report.plan import as_text
from reconciler.report.status import health_words
from reconciler.scheduler.states import Health
from reconciler.scheduler.states import SlurmState as S
from reconciler.scheduler.usage import JobUsage
from reconciler.state.records import SAVED_CHECKPOINT, EndingKind, SubmissionRecord
from tests.planning import NOW, desired, hash_of, job, observed, record, run

FIX = "Change its spec or code and commit, or `recon apply --replace train`"
CKPT = {"path": "ckpt/", "before_end": "30s", "max_requeues": 3}

# How settle records each ending: (health, ending kind, reason, exit code).
ENDINGS: dict[str, tuple[Health, EndingKind | None, str | None, int | None]] = {
    "checkpointed": (Health.FAILED, EndingKind.CHECKPOINTED, f"{SAVED_CHECKPOINT} (failed)", 3),
    "timeout": (Health.FAILED, EndingKind.TIMEOUT, "timed out", None),
    "preempted": (Health.FAILED, EndingKind.PREEMPTED, "preempted", None),
    "failed": (Health.FAILED, None, None, 1),
    "oom": (Health.FAILED, EndingKind.OUT_OF_MEMORY, "out of memory", None),
    "node_fail": (Health.FAILED, EndingKind.NODE_FAIL, "node failed", None),
    "succeeded": (Health.SUCCEEDED, None, None, 0),
}


def settled(digest: str, job_id: str, how: str) -> SubmissionRecord:
    health, kind, reason, exit_code = ENDINGS[how]
    usage = json.dumps(JobUsage(elapsed_s=60.0).to_json())
    made = record("train", digest, job_id, health, reason=reason, exit_code=exit_code, ending=kind)
    return replace(made, usage_json=usage)


def decided(endings: list[str], **fields: Any) -> Action:
    """The run's action after jobs 60, 61, ... ended so, as the journal has them."""
    state = desired(run("train", **fields))
    digest = hash_of(state, "train")
    records = [settled(digest, str(60 + i), how) for i, how in enumerate(endings)]
    (action,) = plan(state, observed(), records, NOW, scheduler="slurm").actions
    return action


# endings (oldest first), then the action, its cause and its reason in words.
TABLE: list[tuple[list[str], ActionKind, Cause, str]] = [
    (
        ["checkpointed"],
        ActionKind.REQUEUE,
        Cause.CHECKPOINT_REQUEUE,
        f"resumes from its checkpoint: job 60 {SAVED_CHECKPOINT} after 00:01:00 (requeue 1 of 3)",
    ),
    (
        ["timeout", "preempted"],
        ActionKind.REQUEUE,
        Cause.CHECKPOINT_REQUEUE,
        "resumes from its checkpoint: job 61 preempted (requeue 2 of 3)",
    ),
    (
        ["checkpointed", "timeout", "checkpointed"],
        ActionKind.REQUEUE,
        Cause.CHECKPOINT_REQUEUE,
        f"resumes from its checkpoint: job 62 {SAVED_CHECKPOINT} after 00:01:00 (requeue 3 of 3)",
    ),
    (
        ["checkpointed", "timeout", "checkpointed", "timeout"],
        ActionKind.NOOP,
        Cause.REQUEUES_EXHAUSTED,
        "failed: never finished in 3 requeues: job 63 timed out after 00:01:00; raise "
        f"checkpoint.max_requeues or resources.time. {FIX}",
    ),
    # A success starts the count again.
    (
        ["timeout", "timeout", "timeout", "succeeded", "timeout"],
        ActionKind.REQUEUE,
        Cause.CHECKPOINT_REQUEUE,
        "resumes from its checkpoint: job 64 timed out after 00:01:00 (requeue 1 of 3)",
    ),
    # A failure still draws from its budget, requeues before it counted as none.
    (
        ["timeout", "timeout", "failed"],
        ActionKind.NOOP,
        Cause.RETRIES_EXHAUSTED,
        f"failed: job 62 failed (exit 1); no retries left (retries: 0). {FIX}",
    ),
    (
        ["oom"],
        ActionKind.NOOP,
        Cause.RETRIES_EXHAUSTED,
        f"failed: job 60 out of memory; no retries left (retries: 0). {FIX}",
    ),
    (
        ["node_fail"],
        ActionKind.NOOP,
        Cause.RETRIES_EXHAUSTED,
        f"failed: job 60 node failed; no retries left (retries: 0). {FIX}",
    ),
]


@pytest.mark.parametrize(("endings", "kind", "cause", "reason"), TABLE)
def test_requeues_of_a_run_with_a_checkpoint(
    endings: list[str], kind: ActionKind, cause: Cause, reason: str
) -> None:
    action = decided(endings, checkpoint=CKPT)
    assert (action.kind, action.cause, action.reason) == (kind, cause, reason)


def test_a_requeue_draws_from_no_budget() -> None:
    # Two requeues, then a failure: the failure budget holds one, and it is the first.
    action = decided(["timeout", "preempted", "failed"], checkpoint=CKPT, retries={"failure": 1})
    assert action.kind is ActionKind.RETRY
    assert action.retry_budget is not None
    assert (action.retry_budget.kind, action.retry_budget.failed) == (RetryKind.FAILURE, 1)
    assert action.requeues == 2
    # Requeues spent: failed, and said so.
    spent = decided(["timeout"] * 4, checkpoint=CKPT)
    assert spent.outcome is RunOutcome.FAILED
    assert spent.requeues == 4


def test_without_a_checkpoint_a_timeout_draws_from_its_budget() -> None:
    action = decided(["timeout"], retries={"timeout": 0})
    assert (action.kind, action.cause) == (ActionKind.NOOP, Cause.RETRIES_EXHAUSTED)
    assert action.reason.startswith("failed: job 60 timed out after 00:01:00; no timeout")
    assert action.requeues is None


def test_a_job_not_settled_yet_that_timed_out_is_a_requeue() -> None:
    state = desired(run("train", checkpoint=CKPT))
    digest = hash_of(state, "train")
    records = [record("train", digest, "60")]
    ended = job("train", digest, S.TIMEOUT, "60")
    (action,) = plan(state, observed(ended), records, NOW, scheduler="slurm").actions
    assert (action.kind, action.cause) == (ActionKind.REQUEUE, Cause.CHECKPOINT_REQUEUE)


def test_no_second_job_while_one_runs() -> None:
    state = desired(run("train", checkpoint=CKPT))
    digest = hash_of(state, "train")
    records = [settled(digest, "60", "timeout"), record("train", digest, "61")]
    running = job("train", digest, S.RUNNING, "61")
    (action,) = plan(state, observed(running), records, NOW, scheduler="slurm").actions
    assert (action.kind, action.cause) == (ActionKind.NOOP, Cause.IN_PROGRESS)


def test_a_requeue_is_shown_and_counted_like_a_retry() -> None:
    state = desired(run("train", checkpoint=CKPT))
    digest = hash_of(state, "train")
    made = plan(state, observed(), [settled(digest, "60", "timeout")], NOW, scheduler="slurm")
    assert made.summary == "Plan: 1 to submit, 0 to replace, 0 to cancel."
    assert (
        " +> requeue   train          resumes from its checkpoint: job 60 timed out after "
        "00:01:00 (requeue 1 of 3)\n"
    ) in as_text(made)


def test_max_requeues_is_not_in_the_spec_hash_and_the_rest_is() -> None:
    def digest(**fields: Any) -> str:
        return hash_of(desired(run("train", **fields)), "train")

    plain = digest()
    assert digest(checkpoint={**CKPT, "max_requeues": 50}) == digest(checkpoint=CKPT)
    assert digest(checkpoint=CKPT) != plain
    assert digest(checkpoint={**CKPT, "before_end": "1m"}) != digest(checkpoint=CKPT)
    assert digest(checkpoint={**CKPT, "signal": "USR2"}) != digest(checkpoint=CKPT)


@pytest.mark.parametrize(
    ("fields", "message"),
    [
        ({"checkpoint": {"path": "out.txt"}}, "overlaps output 'out'"),
        ({"checkpoint": {"path": "."}}, "not a folder inside the run's directory"),
        ({"checkpoint": {"path": "../elsewhere"}}, "not a folder inside the run's directory"),
        ({"checkpoint": {"path": "/abs"}}, "not a folder inside the run's directory"),
        ({"checkpoint": {"path": ".recon-run/x"}}, "inside recon's own bookkeeping"),
        ({"checkpoint": {"path": "c", "max_requeues": 1001}}, "less than or equal to 1000"),
        ({"checkpoint": {"path": "c", "before_end": "19h"}}, "more than Slurm's --signal"),
        ({"checkpoint": {"path": "c", "signal": "KILL"}}, "'USR1'"),
        ({"checkpoint": {"path": "c"}, "allocation": "pool"}, "inside allocation 'pool'"),
        ({"checkpoint": {"path": "c"}, "outputs": {"o": "c/model.pt"}}, "overlaps output 'o'"),
    ],
)
def test_a_checkpoint_that_cannot_be_is_refused(fields: dict[str, Any], message: str) -> None:
    with pytest.raises(ValidationError) as raised:
        run("train", **fields)
    assert message in str(raised.value)


def test_defaults() -> None:
    spec = Run.model_validate(
        {"kind": "Run", "name": "t", "command": "x", "checkpoint": {"path": "ckpt/"}}
    )
    assert spec.checkpoint is not None
    assert (spec.checkpoint.signal, spec.checkpoint.before_end.seconds) == ("USR1", 120)
    assert spec.checkpoint.max_requeues == 20


def test_status_says_which_attempt_a_resumed_run_is_at() -> None:
    state = desired(run("train", checkpoint=CKPT))
    digest = hash_of(state, "train")
    records = [
        settled(digest, "60", "checkpointed"),
        settled(digest, "61", "timeout"),
        record("train", digest, "62"),
    ]
    seen = observed(job("train", digest, S.RUNNING, "62"))
    made = plan(state, seen, records, NOW, scheduler="slurm")
    (row,) = run_statuses(state, made, seen, records)
    assert (row.attempt, row.requeues) == (3, 2)
    assert health_words(row) == "running (attempt 3, 2 requeues)"
    # A run without a checkpoint: nothing of the kind, its timeouts were failures.
    plain = desired(run("train"))
    other = hash_of(plain, "train")
    records = [settled(other, "60", "timeout"), record("train", other, "61")]
    seen = observed(job("train", other, S.RUNNING, "61"))
    (row,) = run_statuses(plain, plan(plain, seen, records, NOW, scheduler="slurm"), seen, records)
    assert (row.attempt, row.requeues, health_words(row)) == (None, None, "running")
