"""One apply carries a change down the whole DAG: a current run downstream of a run in
flight `may rerun`, queued behind it with afterok, its job skipping its command when its
inputs come out as its last success read them. On plain values."""

from __future__ import annotations

import json
from dataclasses import replace
from typing import Any

from reconciler.engine.plan import FileState, plan
from reconciler.engine.plan.actions import Action, ActionKind, Plan, RunOutcome, SkipCheck
from reconciler.engine.plan.causes import Cause
from reconciler.engine.plan.fit import FitChecker
from reconciler.report.plan import as_json, as_markdown, as_text
from reconciler.scheduler.partitions import Partition
from reconciler.scheduler.states import Health
from reconciler.scheduler.states import SlurmState as S
from reconciler.state.records import EndingKind, SubmissionRecord
from tests.planning import NOW, desired, hash_of, job, node, observed, record, run
from tests.unit.test_allocations import allocation

CONTENT = {"out": {"path": "out.txt", "hash": "content"}}


def ok(name: str, digest: str, job_id: str, inputs: dict[str, str | None] | None = None) -> Any:
    return replace(
        record(name, digest, job_id, final=Health.SUCCEEDED), input_versions=inputs or {}
    )


def by_target(result: Plan) -> dict[str, Action]:
    return {action.target: action for action in result.actions}


def chain(**fields: Any) -> tuple[Any, list[SubmissionRecord], FileState]:
    """prep -> train -> eval -> report, all current, every output `hash: content`;
    `fields`: prep's spec changes."""
    state = desired(
        run("prep", outputs=CONTENT, **fields),
        run("train", "prep", outputs=CONTENT),
        run("eval", "train", outputs=CONTENT),
        run("report", "eval"),
    )
    before = desired(run("prep", outputs=CONTENT))
    records = [
        ok("prep", hash_of(before, "prep"), "10"),
        ok("train", hash_of(state, "train"), "11", {"in_prep": "a" * 64}),
        ok("eval", hash_of(state, "eval"), "12", {"in_train": "b" * 64}),
        ok("report", hash_of(state, "report"), "13", {"in_eval": "c" * 64}),
    ]
    files = FileState(
        outputs={
            ("prep", "out"): "a" * 64,
            ("train", "out"): "b" * 64,
            ("eval", "out"): "c" * 64,
            ("report", "out"): "d" * 64,
        }
    )
    return state, records, files


def test_a_changed_upstream_queues_its_whole_downstream_at_once_with_afterok() -> None:
    state, records, files = chain(command="echo prep v2")
    result = plan(state, observed(), records, NOW, scheduler="slurm", files=files)
    actions = by_target(result)
    assert [(a.kind, a.target, a.after, a.outcome) for a in result.actions] == [
        (ActionKind.SUBMIT, "prep", (), RunOutcome.INFLIGHT),
        (ActionKind.MAY_RERUN, "train", ("prep",), RunOutcome.INFLIGHT),
        (ActionKind.MAY_RERUN, "eval", ("train",), RunOutcome.INFLIGHT),
        (ActionKind.MAY_RERUN, "report", ("eval",), RunOutcome.INFLIGHT),
    ]
    assert actions["train"].reason == "after prep (if its output changes)"
    # Each compares its input with what its last success read: content versions.
    assert actions["train"].skip_check == SkipCheck(job_id="11", inputs={"in_prep": "a" * 64})
    assert actions["eval"].skip_check == SkipCheck(job_id="12", inputs={"in_train": "b" * 64})
    # eval's output is content-hashed too; report's own output is not what is read.
    assert actions["report"].skip_check == SkipCheck(job_id="13", inputs={"in_eval": "c" * 64})
    assert result.summary == "Plan: 1 to submit, 0 to replace, 0 to cancel, 3 may rerun."
    assert result.has_changes  # --detailed-exitcode: 2


def test_nothing_in_flight_upstream_leaves_it_current() -> None:
    state, records, files = chain()
    result = plan(state, observed(), records, NOW, scheduler="slurm", files=files)
    assert {a.kind for a in result.actions} == {ActionKind.NOOP}
    assert not result.has_changes


def test_an_upstream_already_running_is_waited_for_by_its_job() -> None:
    state, records, files = chain()
    prep = hash_of(state, "prep")
    jobs = observed(job("prep", prep, S.RUNNING, "20"))
    records = [*records, record("prep", prep, "20")]
    actions = by_target(plan(state, jobs, records, NOW, scheduler="slurm", files=files))
    assert actions["prep"].kind is ActionKind.NOOP  # in progress
    assert actions["train"].kind is ActionKind.MAY_RERUN
    assert (actions["train"].after_jobs, actions["train"].after) == (("20",), ())
    assert actions["eval"].after == ("train",)


def test_a_fingerprinted_or_gathered_input_runs_in_full_and_says_why() -> None:
    state = desired(run("prep"), run("train", "prep"))
    records = [
        ok("prep", hash_of(state, "prep"), "10"),
        ok("train", hash_of(state, "train"), "11", {"in_prep": "a" * 64}),
    ]
    result = plan(state, observed(), records, NOW, scheduler="slurm", replace=["prep"])
    train = by_target(result)["train"]
    assert train.kind is ActionKind.MAY_RERUN and train.skip_check is None
    assert train.details == ("runs in full: input in_prep (prep.out) is hash: fingerprint",)


def test_a_run_stale_for_its_own_reasons_is_submitted_not_forecast() -> None:
    state, records, files = chain(command="echo prep v2")
    gone = FileState(outputs={**files.outputs, ("eval", "out"): None})
    actions = by_target(plan(state, observed(), records, NOW, scheduler="slurm", files=gone))
    assert (actions["eval"].kind, actions["eval"].cause) == (
        ActionKind.SUBMIT,
        Cause.OUTPUT_MISSING,
    )
    assert actions["eval"].skip_check is None and actions["eval"].after == ("train",)


def test_its_job_in_flight_is_never_submitted_twice() -> None:
    state, records, files = chain(command="echo prep v2")
    prep, train = hash_of(state, "prep"), hash_of(state, "train")
    jobs = observed(job("prep", prep, S.RUNNING, "20"), job("train", train, S.PENDING, "21"))
    records = [*records, record("prep", prep, "20"), record("train", train, "21")]
    actions = by_target(plan(state, jobs, records, NOW, scheduler="slurm", files=files))
    assert actions["train"].kind is ActionKind.NOOP
    assert actions["train"].cause is Cause.IN_PROGRESS
    assert actions["eval"].kind is ActionKind.MAY_RERUN and actions["eval"].after_jobs == ("21",)


def test_cancelled_by_afterok_is_no_attempt_and_a_failure_counts() -> None:
    state, records, files = chain(command="echo prep v2")
    prep, train = hash_of(state, "prep"), hash_of(state, "train")
    failed_prep = record("prep", prep, "20", final=Health.FAILED, exit_code=1)
    cancelled = record(
        "train",
        train,
        "21",
        final=Health.CANCELLED,
        reason="DependencyNeverSatisfied",
        ending=EndingKind.DEPENDENCY,
    )
    result = plan(
        state, observed(), [*records, failed_prep, cancelled], NOW, scheduler="slurm", files=files
    )
    actions = by_target(result)
    assert actions["prep"].outcome is RunOutcome.FAILED
    assert (actions["train"].kind, actions["train"].cause) == (
        ActionKind.BLOCKED,
        Cause.UPSTREAM_FAILED,
    )
    # Its own failure, once it ran: counted like any failure (retries: 0).
    ran = record("train", train, "21", final=Health.FAILED, exit_code=2)
    done_prep = ok("prep", prep, "20")
    result = plan(
        state, observed(), [*records, done_prep, ran], NOW, scheduler="slurm", files=files
    )
    actions = by_target(result)
    assert actions["train"].outcome is RunOutcome.FAILED
    assert actions["eval"].kind is ActionKind.BLOCKED


def test_a_run_in_an_allocation_waits_instead() -> None:
    held = allocation("pool")
    state = desired(
        run("prep", outputs=CONTENT),
        run("train", "prep", outputs=CONTENT, allocation="pool"),
        allocations=(held,),
    )
    records = [
        ok("prep", hash_of(state, "prep"), "10"),
        ok("train", hash_of(state, "train"), "11", {"in_prep": "a" * 64}),
    ]
    result = plan(state, observed(), records, NOW, scheduler="slurm", replace=["prep"])
    train = by_target(result)["train"]
    assert (train.kind, train.outcome) == (ActionKind.NOOP, RunOutcome.WAITING)


def test_every_format_shows_it() -> None:
    state, records, files = chain(command="echo prep v2")
    result = plan(state, observed(), records, NOW, scheduler="slurm", files=files)
    text = as_text(result)
    assert "  ~ may rerun  train          after prep (if its output changes)\n" in text
    assert "  + submit     prep " in text  # the kind column widened for it, in this plan only
    assert text.endswith("Plan: 1 to submit, 0 to replace, 0 to cancel, 3 may rerun.\n")
    markdown = as_markdown(result)
    assert "| `~` | may rerun | `train` | after prep (if its output changes) |" in markdown
    assert "**Plan: 1 to submit, 0 to replace, 0 to cancel, 3 may rerun.**" in markdown
    document = json.loads(as_json(result))
    assert document["summary"]["may rerun"] == 3 and document["summary"]["has_changes"]
    train = next(a for a in document["actions"] if a["target"] == "train")
    assert train["kind"] == "may rerun"
    assert train["skip_check"] == {"job_id": "11", "inputs": {"in_prep": "a" * 64}}
    del document["summary"]
    assert Plan.model_validate_json(json.dumps(document)) == result


def test_its_job_submitted_but_not_shown_yet_is_waited_for() -> None:
    """Slurm lists prepare's new job but not train's yet (its two views lag): train is
    not submitted a second time."""
    state, records, files = chain(command="echo prep v2")
    prep, train = hash_of(state, "prep"), hash_of(state, "train")
    jobs = observed(job("prep", prep, S.RUNNING, "20"))
    records = [*records, record("prep", prep, "20"), record("train", train, "21")]
    actions = by_target(plan(state, jobs, records, NOW, scheduler="slurm", files=files))
    assert actions["train"].kind is ActionKind.NOOP
    assert actions["train"].unseen_job == "21"
    assert actions["train"].outcome is RunOutcome.WAITING
    assert actions["eval"].kind is not ActionKind.MAY_RERUN  # it waits for train


def test_a_current_run_that_fits_nowhere_stays_current_until_its_input_changes() -> None:

    state = desired(
        run("prep", outputs=CONTENT),
        run("train", "prep", outputs=CONTENT, resources={"gpus": "a100:1"}),
    )
    records = [
        ok("prep", hash_of(state, "prep"), "10"),
        ok("train", hash_of(state, "train"), "11", {"in_prep": "a" * 64}),
    ]
    cpus = FitChecker((Partition(name="cpu", default=True, nodes=(node("cpu1"),)),))
    result = plan(state, observed(), records, NOW, scheduler="slurm", replace=["prep"], fit=cpus)
    train = by_target(result)["train"]
    assert (train.kind, train.cause, train.outcome) == (
        ActionKind.NOOP,
        Cause.CURRENT,
        RunOutcome.DONE,
    )
    assert train.reason.startswith("current (job 11 succeeded); cannot rerun here: does not fit")


def test_an_upstream_job_older_than_the_last_success_is_not_waited_for() -> None:
    """squeue can show prepare's job running for a while after sacct ended it; train's
    success came after that job (chained to it): train stays current."""
    state, records, files = chain()
    prep = hash_of(state, "prep")
    jobs = observed(job("prep", prep, S.RUNNING, "9"))
    records = [*records, record("prep", prep, "9")]
    actions = by_target(plan(state, jobs, records, NOW, scheduler="slurm", files=files))
    assert (
        actions["prep"].kind is ActionKind.NOOP and actions["prep"].outcome is RunOutcome.INFLIGHT
    )
    assert actions["train"].kind is ActionKind.NOOP and actions["train"].outcome is RunOutcome.DONE
