"""What `recon serve`'s API says of runs and sweeps: a sweep clicked shows its members,
the run table gathers a sweep's members under it, a run's reason is said once, the
history says how each job ended in words, and which Host headers a server answers."""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path

import pytest

from reconciler.engine.ledger.status import RunStatus
from reconciler.engine.plan.actions import ActionKind, SyncStatus
from reconciler.engine.plan.causes import Cause
from reconciler.scheduler.states import Health
from reconciler.state.records import EndingKind, SubmissionStatus
from reconciler.web.app import accepted_hosts, is_loopback
from reconciler.web.snapshot import details, ended_words, table, why_words
from tests.planning import record


def row(
    name: str,
    sync: SyncStatus = SyncStatus.CURRENT,
    health: Health | None = Health.SUCCEEDED,
    *,
    job_id: str | None = "1",
    next: ActionKind = ActionKind.NOOP,
    reason: str = "no-op: current (job 1 succeeded)",
    how: str | None = None,
) -> RunStatus:
    return RunStatus(
        name=name, sync=sync, health=health, how=how, job_id=job_id, finished_at=None,
        last_success_commit=None, outputs={}, reason=reason, next=next, cause=Cause.CURRENT,
    )  # fmt: skip


def test_a_sweep_is_one_row_of_the_table_with_its_members_under_it_by_value() -> None:
    runs = [
        row("prepare"),
        row("seeds[i=10]", job_id="7_2"),
        row("seeds[i=2]", SyncStatus.NEVER_RUN, Health.FAILED, job_id="7_1",
            next=ActionKind.RETRY, reason="retry: attempt 2 of 2: job 7_1 failed (exit 1)"),
        row("compare"),
        row("seeds[i=1]", job_id="7_0"),
    ]  # fmt: skip
    shown = table(runs)
    assert [(item["kind"], item["name"]) for item in shown] == [
        ("run", "prepare"),
        ("sweep", "seeds"),
        ("run", "compare"),
    ]
    sweep = shown[1]
    assert [member["name"] for member in sweep["members"]] == [
        "seeds[i=1]",
        "seeds[i=2]",
        "seeds[i=10]",
    ]
    assert sweep["sync"] == "2 current, 1 never run"
    assert sweep["health"] == "2 succeeded, 1 failed"
    assert sweep["job_id"] == "7" and sweep["next"] == "2 no-op, 1 retry"
    assert [member["failed"] for member in sweep["members"]] == [False, True, False]
    assert shown[0]["next"] == "current (job 1 succeeded)"  # as `recon status` says it


@pytest.mark.parametrize(
    ("status", "said"),
    [
        # Once, where the page said "current, succeeded. no-op: current (job 18 succeeded)".
        (row("a", reason="no-op: current (job 18 succeeded)"), "current (job 18 succeeded)"),
        (
            row("a", SyncStatus.NEVER_RUN, None, next=ActionKind.SUBMIT,
                reason="submit: not yet run"),
            "never run. submit: not yet run",
        ),
        (
            row("a", SyncStatus.NEVER_RUN, Health.FAILED, next=ActionKind.RETRY, how="timed out",
                reason="retry: attempt 2 of 2: job 7 timed out: TimeLimit"),
            "never run. retry: attempt 2 of 2: job 7 timed out: TimeLimit",
        ),
        (
            row("a", SyncStatus.OUTDATED, Health.RUNNING, next=ActionKind.NOOP,
                reason="no-op: in progress: job 9 running"),
            "outdated. in progress: job 9 running",
        ),
        (
            row("a", SyncStatus.NEVER_RUN, Health.PENDING, next=ActionKind.NOOP,
                reason="no-op: queued behind prepare"),
            "never run, pending. queued behind prepare",
        ),
    ],
)  # fmt: skip
def test_why_a_run_is_in_its_state_is_said_once(status: RunStatus, said: str) -> None:
    assert why_words(status) == said


@pytest.mark.parametrize(
    ("final", "reason", "exit_code", "ending", "status", "said"),
    [
        (Health.FAILED, "NonZeroExitCode", 1, None, SubmissionStatus.SUBMITTED, "failed (exit 1)"),
        (Health.FAILED, "timed out: TimeLimit", 0, EndingKind.TIMEOUT, SubmissionStatus.SUBMITTED,
         "timed out"),
        (Health.FAILED, "out of memory: OutOfMemory", 137, EndingKind.OUT_OF_MEMORY,
         SubmissionStatus.SUBMITTED, "out of memory (exit 137)"),
        (Health.FAILED, "completed without its declared outputs: out", 0, EndingKind.NO_OUTPUTS,
         SubmissionStatus.SUBMITTED, "failed: completed without its declared outputs: out"),
        (Health.CANCELLED, "DependencyNeverSatisfied", None, EndingKind.DEPENDENCY,
         SubmissionStatus.SUBMITTED, "cancelled while it waited for its dependency: never ran"),
        (Health.SUCCEEDED, None, 0, None, SubmissionStatus.SUBMITTED, "succeeded"),
        (Health.SUCCEEDED, "skipped: inputs unchanged", 0, None, SubmissionStatus.SUBMITTED,
         "succeeded: skipped: inputs unchanged"),
        (Health.CANCELLED, None, None, None, SubmissionStatus.SUBMITTED, "cancelled"),
        (None, None, None, None, SubmissionStatus.SUBMITTED, None),
        (None, "invalid partition", None, None, SubmissionStatus.REFUSED,
         "refused by the scheduler: invalid partition"),
    ],
)  # fmt: skip
def test_the_history_says_how_each_job_ended_in_words_not_slurms_codes(
    final: Health | None,
    reason: str | None,
    exit_code: int | None,
    ending: EndingKind | None,
    status: SubmissionStatus,
    said: str | None,
) -> None:
    journalled = record(
        "a", "h", "7", final, status=status, reason=reason, exit_code=exit_code, ending=ending
    )
    assert ended_words(journalled) == said


def test_a_sweep_clicked_shows_its_members_and_an_unknown_name_nothing(tmp_path: Path) -> None:
    from reconciler.engine.reconcile import Request, look_once
    from reconciler.web.snapshot import snapshot_of
    from tests.local.serving import example_project

    look = look_once(Request(example_project(tmp_path), scheduler="local"))
    shown = snapshot_of(look, datetime(2026, 1, 1, tzinfo=UTC), graph_limit=200)
    sweep = details(shown, "seeds")
    assert sweep is not None and sweep["kind"] == "sweep"
    assert [member["name"] for member in sweep["members"]] == [
        f"seeds[lr={lr},seed={seed}]" for lr in (0.1, 0.5) for seed in range(3)
    ]
    assert sweep["members"][0]["values"] == "[lr=0.1,seed=0]"
    assert {member["sync"] for member in sweep["members"]} == {"never run"}
    assert sweep["sync"] == "never run" and sweep["health"] == "no job"
    assert sweep["location"].startswith("specs/") and "matrix:" in sweep["spec"]
    member = details(shown, "seeds[lr=0.5,seed=2]")
    assert member is not None and member["kind"] == "run"
    assert member["why"].startswith("never run. submit: ")
    assert details(shown, "seed") is None and details(shown, "seeds[") is None
    (grouped,) = [item for item in shown.summary()["runs"] if item["kind"] == "sweep"]
    assert grouped["name"] == "seeds" and len(grouped["members"]) == 6
    assert len(shown.summary()["runs"]) == 6  # 5 runs of their own and the sweep


@pytest.mark.parametrize(
    ("address", "loopback", "hosts"),
    [
        ("127.0.0.1", True, ["127.0.0.1", "localhost", "[::1]"]),
        # The whole loopback range needs no token, and answers the URL it prints.
        ("127.0.0.2", True, ["127.0.0.2", "127.0.0.1", "localhost", "[::1]"]),
        ("127.255.0.9", True, ["127.255.0.9", "127.0.0.1", "localhost", "[::1]"]),
        ("::1", True, ["[::1]", "127.0.0.1", "localhost"]),
        ("[::1]", True, ["[::1]", "127.0.0.1", "localhost"]),
        ("localhost", True, ["localhost", "127.0.0.1", "[::1]"]),
        ("0.0.0.0", False, ["*"]),
        ("10.1.2.3", False, ["*"]),
        ("::", False, ["*"]),
        ("cluster.example", False, ["*"]),  # a name may resolve to anything
        ("128.0.0.1", False, ["*"]),
    ],
)
def test_loopback_needs_no_token_and_answers_its_own_address_only(
    address: str, loopback: bool, hosts: list[str]
) -> None:
    assert is_loopback(address) is loopback
    assert accepted_hosts(address) == hosts


def test_an_orphan_clicked_shows_why_and_its_jobs_not_a_dead_end(tmp_path: Path) -> None:
    from dataclasses import replace

    from reconciler.engine.reconcile import Request, look_once
    from reconciler.web.snapshot import snapshot_of
    from tests.local.serving import example_project

    look = look_once(Request(example_project(tmp_path), scheduler="local"))
    shown = snapshot_of(look, datetime(2026, 1, 1, tzinfo=UTC), graph_limit=200)
    left = "cancel: its run left the repo (prune: true)"
    gone = row("gone", SyncStatus.ORPHAN, Health.RUNNING, job_id="41", next=ActionKind.CANCEL,
               reason=left)  # fmt: skip
    with_orphan = replace(shown, runs=[*shown.runs, gone])
    orphan = details(with_orphan, "gone")
    assert orphan is not None and orphan["kind"] == "run"
    assert orphan["why"] == "orphan, running. cancel: its run left the repo (prune: true)"
    assert orphan["location"] is None and orphan["spec"] is None and orphan["outputs"] == []
    assert orphan["log"] == {"job_id": "41", "stdout": None, "stderr": None}
    assert details(shown, "gone") is None  # a name no row has


def test_the_cost_panel_and_a_runs_cost_come_from_the_looks_journal(tmp_path: Path) -> None:
    import json
    from dataclasses import replace
    from datetime import timedelta

    from reconciler.engine.reconcile import Request, look_once
    from reconciler.scheduler.base import Held, JobRecord, ObservedJob
    from reconciler.scheduler.states import SlurmState
    from reconciler.scheduler.usage import JobUsage
    from reconciler.state.paths import tag_for
    from reconciler.web.snapshot import snapshot_of
    from tests.local.serving import example_project

    look = look_once(Request(example_project(tmp_path), scheduler="local"))
    spec = look.desired.runs["train"].spec_hash
    held = JobUsage(elapsed_s=1800, gpus=2, cpus=4, gpu_s=3600, cpu_s=7200, wait_s=360)
    ran = replace(
        record("train", spec, "11", Health.SUCCEEDED), usage_json=json.dumps(held.to_json())
    )
    shown = snapshot_of(
        replace(look, world=replace(look.world, records=[ran])),
        datetime(2026, 1, 1, tzinfo=UTC),
        200,
    )
    cost = shown.summary()["cost"]
    assert cost["total"]["gpu_hours"] == 1 and cost["total"]["gpu_hours_by"]["current"] == 1
    assert cost["total"]["queue_wait_hours"] == 0.1 and cost["jobs_running"] == 0
    train = details(shown, "train")
    assert train is not None and train["cost"]["cpu_hours"] == 2 and train["cost"]["jobs"] == 1
    prepare = details(shown, "prepare")
    assert prepare is not None and prepare["cost"] is None  # no job yet
    # a job still running, in the look's observation: counted as held so far
    evaluate = look.desired.runs["evaluate"].spec_hash
    running = record("evaluate", evaluate, "12", None)
    tag = tag_for(look.desired, "run", "evaluate", evaluate)
    row = JobRecord(
        job_id="12", top_id="12", state=SlurmState.RUNNING, tag=tag, start=datetime(2026, 1, 1,
        tzinfo=UTC), elapsed=timedelta(seconds=900), held=Held(cpus=4), source="sacct",
    )  # fmt: skip
    observation = look.observation.model_copy(
        update={"jobs": (ObservedJob(job_id="12", tag=tag, rows=(row,)),)}
    )
    seen = replace(look, world=replace(look.world, records=[ran, running], observation=observation))
    cost = snapshot_of(seen, datetime(2026, 1, 1, tzinfo=UTC), 200).summary()["cost"]
    assert cost["jobs_running_counted"] == 1 and cost["jobs_running"] == 0
    assert cost["total"]["cpu_hours_by"]["running"] == 1.0
