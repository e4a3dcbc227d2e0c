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
from reconciler.errors import PermanentSchedulerError, TransientSchedulerError
from reconciler.scheduler.base import AllocateRequest, Observation, SubmitRequest
from reconciler.scheduler.partitions import Partition
from reconciler.state.journal import Journal
from reconciler.state.records import SubmissionStatus
from tests.planning import NOW, PROJECT, desired, run


@dataclass
class Sbatch:
    """A scheduler that answers sbatch with the next id, and looks at the journal each time
    (through a second connection: what a crash right then would leave)."""

    journal_path: Path
    refuse: set[str] = field(default_factory=set)
    fail_at: str | None = None
    name: str = "slurm"
    seen: list[dict[str, tuple[str, str | None]]] = field(default_factory=list)

    def observe(self, since: object) -> Observation:
        raise AssertionError("apply does not observe")

    def submit(self, request: SubmitRequest) -> str:
        with Journal(self.journal_path) as other:
            self.seen.append({r.name: (r.status.value, r.job_id) for r in other.records(PROJECT)})
        if request.tag.name == self.fail_at:
            raise TransientSchedulerError("slurmctld does not answer")
        if request.tag.name in self.refuse:
            raise PermanentSchedulerError("invalid partition")
        return str(100 + len(self.seen))

    def cancel(self, job_id: str) -> None:
        raise AssertionError("nothing to cancel")

    def allocate(self, request: AllocateRequest) -> str:
        raise AssertionError("no allocation")

    def release(self, job_id: str) -> None:
        raise AssertionError("no allocation")

    def partitions(self) -> tuple[Partition, ...]:
        return ()


def sweep(tmp_path: Path, runs: int) -> Desired:
    state = desired(run("prep"), *(run(f"r{i}", "prep") for i in range(runs)))
    return Desired(
        state.project, tmp_path, state.commit, state.runs, state.allocations, state.upstreams
    )


def carry_out(state: Desired, scheduler: Sbatch, journal: Journal) -> Applier:
    actions = [
        Action(
            kind=ActionKind.SUBMIT,
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
    scheduler = Sbatch(tmp_path / "journal.sqlite")
    with Journal(scheduler.journal_path) as journal:
        applier = carry_out(state, scheduler, journal)
        records = {r.name: (r.status.value, r.job_id) for r in journal.records(PROJECT)}
    first = scheduler.seen[0]
    assert set(first) == set(state.runs) and {v for v in first.values()} == {("intent", None)}
    # The ids of the first three jobs are written once the third is sent.
    assert scheduler.seen[3]["prep"] == ("submitted", "101")
    assert scheduler.seen[2]["prep"] == ("intent", None)
    assert records == {name: ("submitted", job) for name, job in applier.result.submitted.items()}
    assert len(records) == 7


def test_intents_of_runs_never_sent_are_withdrawn(tmp_path: Path) -> None:
    state = sweep(tmp_path, 3)
    scheduler = Sbatch(tmp_path / "journal.sqlite", refuse={"prep"})
    with Journal(scheduler.journal_path) as journal:
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
    scheduler = Sbatch(tmp_path / "journal.sqlite", fail_at="r1")
    with Journal(scheduler.journal_path) as journal:
        with pytest.raises(TransientSchedulerError):
            carry_out(state, scheduler, journal)
        records = {r.name: (r.status.value, r.job_id) for r in journal.records(PROJECT)}
    assert records == {
        "prep": ("submitted", "101"),
        "r0": ("submitted", "102"),
        "r1": ("intent", None),
    }


@dataclass
class ConcurrentSbatch(Sbatch):
    """``Sbatch`` taking several submissions at once (as Slurm's adapter does): the first
    ``together`` runs named in it must all be in flight at the same time to be answered."""

    submissions_at_once: int = 3
    together: tuple[str, ...] = ()
    sent: list[tuple[str, tuple[str, ...]]] = field(default_factory=list)
    _lock: threading.Lock = field(default_factory=threading.Lock)
    _barrier: threading.Barrier | None = None

    def submit(self, request: SubmitRequest) -> str:
        if request.tag.name in self.together:
            if self._barrier is None:
                raise AssertionError("no barrier")
            self._barrier.wait(timeout=10)  # broken (and failing) unless all are in flight
        with self._lock:
            self.sent.append((request.tag.name, request.dependencies))
            return super().submit(request)


def concurrent(
    tmp_path: Path,
    together: tuple[str, ...] = (),
    fail_at: str | None = None,
    refuse: frozenset[str] = frozenset(),
) -> ConcurrentSbatch:
    scheduler = ConcurrentSbatch(
        tmp_path / "journal.sqlite", set(refuse), fail_at, together=together
    )
    scheduler._barrier = threading.Barrier(max(1, len(together)))
    return scheduler


def test_independent_submissions_are_in_flight_together_and_wait_for_their_upstream(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """r0, r1 and r2 are sent at once (each blocks until all three are in flight), only
    once prep's job id is known: each names it in its dependency. Every intent was on disk
    before the first sbatch, and the answers are reported in the plan's order."""
    monkeypatch.setattr(apply_module, "CONFIRM_EVERY", 2)
    state = sweep(tmp_path, 6)
    scheduler = concurrent(tmp_path, together=("r0", "r1", "r2"))
    with Journal(scheduler.journal_path) as journal:
        applier = carry_out(state, scheduler, journal)
        records = {r.name: (r.status.value, r.job_id) for r in journal.records(PROJECT)}
    prep = applier.result.submitted["prep"]
    assert scheduler.sent[0] == ("prep", ())
    assert sorted(scheduler.sent[1:]) == [(f"r{i}", (prep,)) for i in range(6)]
    first = scheduler.seen[0]
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
    scheduler = concurrent(tmp_path, together=("r0", "r1", "r2"), fail_at="r1")
    with Journal(scheduler.journal_path) as journal:
        with pytest.raises(TransientSchedulerError):
            carry_out(state, scheduler, journal)
        records = {r.name: (r.status.value, r.job_id) for r in journal.records(PROJECT)}
    assert {name for name, _ in scheduler.sent} == {"prep", "r0", "r1", "r2", "r3"}
    assert records["r1"] == ("intent", None)
    assert {records[name][0] for name in ("prep", "r0", "r2", "r3")} == {"submitted"}
    assert "r4" not in records  # never sent: withdrawn


def test_a_refusal_in_flight_skips_only_what_waits_for_it(tmp_path: Path) -> None:
    state = sweep(tmp_path, 3)
    scheduler = concurrent(tmp_path, refuse=frozenset({"prep"}))
    with Journal(scheduler.journal_path) as journal:
        applier = carry_out(state, scheduler, journal)
        records = journal.records(PROJECT)
    assert set(applier.result.skipped) == {"r0", "r1", "r2"}
    assert [(r.name, r.status) for r in records] == [("prep", SubmissionStatus.REFUSED)]
