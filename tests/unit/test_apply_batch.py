"""Applying batch submissions against a recording scheduler and a real journal: every
intent is durable before the first sbatch, job ids are written in groups, and intents of
runs never sent are withdrawn."""

from __future__ import annotations

import threading
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from reconciler.desired.desired import Desired
from reconciler.engine.apply import applier as apply_module
from reconciler.engine.apply.applier import Applier
from reconciler.engine.plan.actions import Action, ActionKind, Plan
from reconciler.engine.plan.causes import Cause
from reconciler.errors import PermanentSchedulerError, TransientSchedulerError
from reconciler.scheduler.base import SubmitRequest
from reconciler.scheduler.testing import ScriptedScheduler
from reconciler.state.journal import Journal
from reconciler.state.records import SubmissionStatus
from tests.planning import NOW, PROJECT, desired, run


@dataclass
class Sbatch:
    """sbatch's answer: the next id, after a look at the journal each time (through a second
    connection: what a crash right then would leave). A run in ``refuse`` is refused; at
    ``fail_at`` slurmctld does not answer; the runs in ``together`` must all be in flight
    at the same time to be answered (several sbatch at once, as Slurm's adapter sends)."""

    journal_path: Path
    refuse: frozenset[str] = frozenset()
    fail_at: str | None = None
    together: tuple[str, ...] = ()
    seen: list[dict[str, tuple[str, str | None]]] = field(default_factory=list)
    _lock: threading.Lock = field(default_factory=threading.Lock)

    def __post_init__(self) -> None:
        self._barrier = threading.Barrier(max(1, len(self.together)))

    def __call__(self, request: SubmitRequest) -> str:
        if request.tag.name in self.together:
            self._barrier.wait(timeout=10)  # broken (and failing) unless all are in flight
        with self._lock, Journal(self.journal_path) as other:
            self.seen.append({r.name: (r.status.value, r.job_id) for r in other.records(PROJECT)})
            if request.tag.name == self.fail_at:
                raise TransientSchedulerError("slurmctld does not answer")
            if request.tag.name in self.refuse:
                raise PermanentSchedulerError("invalid partition")
            return str(100 + len(self.seen))


def scripted(
    tmp_path: Path,
    at_once: int = 1,
    *,
    refuse: frozenset[str] = frozenset(),
    fail_at: str | None = None,
    together: tuple[str, ...] = (),
) -> tuple[ScriptedScheduler, Sbatch]:
    """A scheduler whose sbatch answers as ``Sbatch`` does, ``at_once`` submissions at a
    time; nothing else may be called."""
    sbatch = Sbatch(tmp_path / "journal.sqlite", refuse, fail_at, together)
    return ScriptedScheduler(submit=sbatch, submissions_at_once=at_once), sbatch


def sweep(tmp_path: Path, runs: int) -> Desired:
    state = desired(run("prep"), *(run(f"r{i}", "prep") for i in range(runs)))
    return Desired(
        state.project, tmp_path, state.commit, state.runs, state.allocations, state.upstreams
    )


def carry_out(state: Desired, scheduler: ScriptedScheduler, journal: Journal) -> Applier:
    actions = [
        Action(
            kind=ActionKind.SUBMIT,
            cause=Cause.NEVER_RUN,
            target=name,
            reason="not yet run",
            spec_hash=state.runs[name].spec_hash,
            after=("prep",) if name != "prep" else (),
        )
        for name in state.runs
    ]
    plan = Plan(
        project=PROJECT,
        root=str(state.root),
        commit=state.commit,
        scheduler="slurm",
        created_at=NOW,
        observation_complete=True,
        fingerprint="0" * 16,
        actions=tuple(actions),
    )
    applier = Applier(plan, state, scheduler, journal, state.root / "code", lambda: NOW)
    applier.run()
    return applier


def test_every_intent_is_durable_before_the_first_sbatch_and_job_ids_come_in_groups(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(apply_module, "CONFIRM_EVERY", 3)
    state = sweep(tmp_path, 6)
    scheduler, sbatch = scripted(tmp_path)
    with Journal(sbatch.journal_path) as journal:
        applier = carry_out(state, scheduler, journal)
        records = {r.name: (r.status.value, r.job_id) for r in journal.records(PROJECT)}
    first = sbatch.seen[0]
    assert set(first) == set(state.runs) and {v for v in first.values()} == {("intent", None)}
    # The ids of the first three jobs are written once the third is sent.
    assert sbatch.seen[3]["prep"] == ("submitted", "101")
    assert sbatch.seen[2]["prep"] == ("intent", None)
    assert records == {name: ("submitted", job) for name, job in applier.result.submitted.items()}
    assert len(records) == 7


def test_intents_of_runs_never_sent_are_withdrawn(tmp_path: Path) -> None:
    state = sweep(tmp_path, 3)
    scheduler, sbatch = scripted(tmp_path, refuse=frozenset({"prep"}))
    with Journal(sbatch.journal_path) as journal:
        applier = carry_out(state, scheduler, journal)
        records = journal.records(PROJECT)
    assert set(applier.result.skipped) == {"r0", "r1", "r2"}
    assert [(r.name, r.status) for r in records] == [("prep", SubmissionStatus.REFUSED)]


def test_an_apply_stopped_by_the_scheduler_keeps_the_intent_it_may_have_sent(
    tmp_path: Path,
) -> None:
    """sbatch timing out may still have made the job: its intent stays, for adoption;
    the intents of runs not tried yet go; the job ids already returned are written."""
    state = sweep(tmp_path, 3)
    scheduler, sbatch = scripted(tmp_path, fail_at="r1")
    with Journal(sbatch.journal_path) as journal:
        with pytest.raises(TransientSchedulerError):
            carry_out(state, scheduler, journal)
        records = {r.name: (r.status.value, r.job_id) for r in journal.records(PROJECT)}
    assert records == {
        "prep": ("submitted", "101"),
        "r0": ("submitted", "102"),
        "r1": ("intent", None),
    }


def sent(scheduler: ScriptedScheduler) -> list[tuple[str, tuple[str, ...]]]:
    """Each submission's run and the job ids it waits for, in the order they were sent."""
    return [(request.tag.name, request.dependencies) for request in scheduler.submitted]


def test_independent_submissions_are_in_flight_together_and_wait_for_their_upstream(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """r0, r1 and r2 are sent at once (each blocks until all three are in flight), only
    once prep's job id is known: each names it in its dependency. Every intent was on disk
    before the first sbatch, and the answers are reported in the plan's order."""
    monkeypatch.setattr(apply_module, "CONFIRM_EVERY", 2)
    state = sweep(tmp_path, 6)
    scheduler, sbatch = scripted(tmp_path, 3, together=("r0", "r1", "r2"))
    with Journal(sbatch.journal_path) as journal:
        applier = carry_out(state, scheduler, journal)
        records = {r.name: (r.status.value, r.job_id) for r in journal.records(PROJECT)}
    prep = applier.result.submitted["prep"]
    assert sent(scheduler)[0] == ("prep", ())
    assert sorted(sent(scheduler)[1:]) == [(f"r{i}", (prep,)) for i in range(6)]
    first = sbatch.seen[0]
    assert set(first) == set(state.runs) and set(first.values()) == {("intent", None)}
    assert list(applier.result.submitted) == ["prep", *(f"r{i}" for i in range(6))]
    assert records == {name: ("submitted", job) for name, job in applier.result.submitted.items()}


def test_a_transient_error_in_flight_keeps_the_ids_of_the_others_sent_with_it(
    tmp_path: Path,
) -> None:
    """r1's sbatch fails while r2 and r3 are in flight beside it (r3 went once r0's answer
    came): their job ids are still written, r1's intent stays (it may have been made), and
    nothing after is sent."""
    state = sweep(tmp_path, 5)
    scheduler, sbatch = scripted(tmp_path, 3, together=("r0", "r1", "r2"), fail_at="r1")
    with Journal(sbatch.journal_path) as journal:
        with pytest.raises(TransientSchedulerError):
            carry_out(state, scheduler, journal)
        records = {r.name: (r.status.value, r.job_id) for r in journal.records(PROJECT)}
    assert {name for name, _ in sent(scheduler)} == {"prep", "r0", "r1", "r2", "r3"}
    assert records["r1"] == ("intent", None)
    assert {records[name][0] for name in ("prep", "r0", "r2", "r3")} == {"submitted"}
    assert "r4" not in records  # never sent: withdrawn


def test_a_refusal_in_flight_skips_only_what_waits_for_it(tmp_path: Path) -> None:
    state = sweep(tmp_path, 3)
    scheduler, sbatch = scripted(tmp_path, 3, refuse=frozenset({"prep"}))
    with Journal(sbatch.journal_path) as journal:
        applier = carry_out(state, scheduler, journal)
        records = journal.records(PROJECT)
    assert set(applier.result.skipped) == {"r0", "r1", "r2"}
    assert [(r.name, r.status) for r in records] == [("prep", SubmissionStatus.REFUSED)]
