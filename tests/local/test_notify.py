"""Notifications: which events a pass yields, and a real notifier command receiving them
(a script that writes its stdin to a file), failing, or hanging."""

from __future__ import annotations

import json
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from reconciler import notify
from reconciler.engine.apply.applier import ApplyResult
from reconciler.engine.plan.actions import Action, ActionKind, Plan, RunOutcome
from reconciler.engine.plan.causes import Cause
from reconciler.notify import Notification, Notifier, notifications, send
from reconciler.scheduler.states import Health
from reconciler.state.journal import Journal
from reconciler.state.records import SubmissionRecord, SubmissionStatus
from tests.gitrepo import GitRepo
from tests.planning import guard, outcome_of

T0 = datetime(2025, 3, 1, 12, 0, tzinfo=UTC)
T1 = T0 + timedelta(minutes=1)
KEYS = {"event", "project", "commit", "run", "job_id", "message", "time", "counts"}


def make_plan(*actions: Action, root: str = "/nowhere", commit: str | None = "c0ffee") -> Plan:
    return Plan(
        project="demo", root=root, commit=commit, scheduler="slurm", created_at=T0,
        observation_complete=True, fingerprint="f", actions=actions,
    )  # fmt: skip


def failed(name: str, job_id: str, exit_code: int | None = 1) -> SubmissionRecord:
    return SubmissionRecord(
        id=1, project="demo", name=name, spec_hash="h1", commit="c0ffee", job_id=job_id,
        status=SubmissionStatus.SUBMITTED, final_health=Health.FAILED, exit_code=exit_code,
        reason="NonZeroExitCode", created_at=T0, updated_at=T1,
    )  # fmt: skip


SUBMIT = Action(
    kind=ActionKind.SUBMIT,
    cause=Cause.NEVER_RUN,
    target="train",
    reason="not yet run",
    spec_hash="h1",
)
CANCEL = Action(
    kind=ActionKind.CANCEL,
    cause=Cause.PRUNE,
    target="old",
    reason="run left the repo",
    job_ids=("7",),
)


# -- which events ------------------------------------------------------------------------


def test_nothing_to_tell_after_a_quiet_pass() -> None:
    assert notifications(outcome_of(make_plan(), None), [], T1) == []


def test_a_failed_run_is_told_even_when_nothing_was_applied() -> None:
    (note,) = notifications(outcome_of(make_plan(), None), [failed("train", "42")], T1)
    assert note == Notification(
        event="run-failed", project="demo", commit="c0ffee", run="train", job_id="42",
        message="job 42 of run train failed, exit code 1, NonZeroExitCode",
        time="2025-03-01T12:01:00+00:00",
    )  # fmt: skip


def test_a_failed_run_with_no_retries_left_is_told_with_the_fixes_that_work() -> None:
    spent = Action(
        kind=ActionKind.NOOP,
        cause=Cause.CURRENT,
        target="train",
        reason="failed: ...",
        outcome=RunOutcome.FAILED,
    )
    (note,) = notifications(outcome_of(make_plan(spent), None), [failed("train", "42")], T1)
    assert note.message == (
        "job 42 of run train failed, exit code 1, NonZeroExitCode; no retries left. Change its "
        "spec or code and commit, or `recon apply --replace train`"
    )


def test_an_apply_tells_its_counts_and_commit() -> None:
    applied = ApplyResult(submitted={"train": "43"}, cancelled=["7"])
    (note,) = notifications(outcome_of(make_plan(SUBMIT, CANCEL), applied), [], T1)
    assert (note.event, note.commit, note.run) == ("apply-finished", "c0ffee", None)
    assert note.counts is not None
    assert (
        note.counts["submitted"] == note.counts["cancelled"] == note.counts["planned_submit"] == 1
    )
    assert note.message == "applied c0ffee: 1 submitted, 1 cancelled, 0 adopted"


def test_any_action_kind_that_is_not_routine_is_told_by_its_kind() -> None:
    why = "step 7.1 failed (exit 3) while the job still holds its other components"
    teardown = Action(
        kind=ActionKind.TEARDOWN,
        cause=Cause.COMPONENT_FAILED,
        target="het",
        reason=why,
        job_ids=("7", "8"),
    )
    found = notifications(outcome_of(make_plan(SUBMIT, teardown), ApplyResult()), [], T1)
    assert [(n.event, n.run, n.job_id, n.message) for n in found] == [
        ("teardown", "het", "7", why),
        ("teardown", "het", "8", why),
        ("apply-finished", None, None, "applied c0ffee: 0 submitted, 0 cancelled, 0 adopted"),
    ]


def test_routine_kinds_cover_every_kind_but_the_notable_ones() -> None:
    notable = set(ActionKind) - notify.ROUTINE
    assert notable <= {"teardown"}  # a new kind is told unless added to ROUTINE on purpose


# -- a real notifier command -------------------------------------------------------------


def writer(tmp_path: Path) -> tuple[str, Path]:
    """A notifier that appends each payload (one line) and $RECON_EVENT to a file."""
    out = tmp_path / "received.jsonl"
    script = tmp_path / "notifier.sh"
    script.write_text(f'#!/bin/sh\ncat >> "{out}"\necho "$RECON_EVENT" >> "{out}.events"\n')
    script.chmod(0o755)
    return str(script), out


NOTE = Notification("run-failed", "demo", "c0ffee", "train", "42", "job 42 failed", "t")


def test_the_notifier_gets_the_payload_on_stdin(tmp_path: Path) -> None:
    command, out = writer(tmp_path)
    assert send(command, NOTE) is None
    payload = json.loads(out.read_text())
    assert payload.keys() == KEYS
    assert (payload["event"], payload["run"], payload["job_id"]) == ("run-failed", "train", "42")
    assert Path(f"{out}.events").read_text() == "run-failed\n"


def test_a_failing_notifier_is_reported_with_its_message(tmp_path: Path) -> None:
    problem = send("echo 'smtp: connection refused' >&2; exit 3", NOTE)
    assert problem is not None
    assert "exited with 3" in problem and "smtp: connection refused" in problem
    assert "exited with 127" in (send(str(tmp_path / "missing"), NOTE) or "")


@pytest.mark.parametrize(
    "command",
    ["sleep 60", "sleep 60 & sleep 60"],  # the second leaves a grandchild holding the pipes
    ids=["hangs", "hangs-with-a-child"],
)
def test_a_hanging_notifier_is_killed_at_the_timeout(command: str) -> None:
    started = time.monotonic()
    problem = send(command, NOTE, timeout=0.5)
    assert problem is not None and "killed" in problem
    assert time.monotonic() - started < 5


# -- after a pass, with the project's journal --------------------------------------------


@pytest.fixture
def project(tmp_path: Path) -> tuple[GitRepo, str]:
    repo = GitRepo(tmp_path / "repo")
    commit = repo.commit({"recon.yaml": "project: demo\nstate_dir: state\n"})
    return repo, commit


def journal_with_failures(root: Path) -> Journal:
    journal = Journal(root / "state" / "journal.sqlite")
    for name, job_id, ended in (("old", "40", T0), ("train", "42", T1)):
        record = journal.record_intent("demo", "run", name, "h1", "c0ffee", {}, T0)
        journal.record_submitted(record, job_id, T0)
        journal.record_final(job_id, Health.FAILED, 2, "NonZeroExitCode", ended)
    return journal


def test_after_a_pass_only_failures_journalled_during_it_are_sent(
    project: tuple[GitRepo, str], tmp_path: Path
) -> None:
    repo, commit = project
    journal_with_failures(repo.root).close()
    command, out = writer(tmp_path)
    problems: list[tuple[str, str]] = []
    notifier = Notifier(command, lambda event, why: problems.append((event, why)), lambda: T1)
    plan = make_plan(SUBMIT, root=str(repo.root), commit=commit)
    notifier.after_pass(
        outcome_of(plan, ApplyResult(submitted={"train": "43"}), repo.root), started=T1
    )
    received = [json.loads(line) for line in out.read_text().splitlines()]
    assert [(p["event"], p["job_id"]) for p in received] == [
        ("run-failed", "42"),  # "old" failed before this pass began: told by an earlier one
        ("apply-finished", None),
    ]
    assert received[1]["counts"]["submitted"] == 1
    assert problems == []
    with Journal(repo.root / "state" / "journal.sqlite") as journal:
        said = [(e.kind, e.name, e.message) for e in journal.events("demo")]
    assert ("notify", "train", "run-failed sent") in said


def test_a_held_plan_is_told_once_per_refusal(tmp_path: Path) -> None:
    """A watch holds every pass while a commit would empty the project: it tells so once,
    and again once the refusal changes or comes back."""
    command, out = writer(tmp_path)
    notifier = Notifier(command, lambda event, why: pytest.fail(why), lambda: T1)
    held = guard("a", "b")
    for commit, refusal in [("c1", held), ("c1", held), ("c2", held), ("c2", None),
                            ("c2", held), ("c2", guard("a", "b", live=3))]:  # fmt: skip
        outcome = outcome_of(make_plan(CANCEL, commit=commit), None, held=refusal)
        notifier.after_pass(outcome, started=T1)
    received = [json.loads(line) for line in out.read_text().splitlines()]
    assert [(p["event"], p["commit"]) for p in received] == [
        ("prune-refused", "c1"), ("prune-refused", "c2"), ("prune-refused", "c2"),
        ("prune-refused", "c2"),
    ]  # fmt: skip
    assert received[0]["message"].startswith(
        "the commit declares no run or allocation, and the plan's prunes would cancel 2 jobs "
        "of the project (a, b left the specs). Nothing of it is carried out"
    )
    assert "more than prune_limit 50% allows (1)" in received[-1]["message"]


def test_a_failing_notifier_never_breaks_the_pass(project: tuple[GitRepo, str]) -> None:
    repo, commit = project
    journal_with_failures(repo.root).close()
    problems: list[tuple[str, str]] = []
    notifier = Notifier("exit 1", lambda event, why: problems.append((event, why)), lambda: T1)
    plan = make_plan(root=str(repo.root), commit=commit)
    notifier.after_pass(outcome_of(plan, None, repo.root), started=T1)  # must not raise
    assert [event for event, _ in problems] == ["run-failed"]
    with Journal(repo.root / "state" / "journal.sqlite") as journal:
        (event, *_) = journal.events("demo")
    assert event.message.startswith("run-failed not sent: 'exit 1' exited with 1")


def test_without_a_journal_yet_only_the_apply_is_told(
    project: tuple[GitRepo, str], tmp_path: Path
) -> None:
    repo, commit = project
    command, out = writer(tmp_path)
    notifier = Notifier(command, lambda event, why: pytest.fail(why), lambda: T1)
    plan = make_plan(root=str(repo.root), commit=commit)
    notifier.after_pass(outcome_of(plan, ApplyResult(), repo.root), started=T0)
    assert [json.loads(line)["event"] for line in out.read_text().splitlines()] == [
        "apply-finished"
    ]
