"""The cost ledger (engine/ledger/cost): each job counted once, in the way it was spent,
and what recon saved, from plain journal records."""

from __future__ import annotations

import json
from dataclasses import replace
from datetime import UTC, datetime, timedelta

import pytest

from reconciler.engine.ledger.cost import Saving, Spent, ledger
from reconciler.engine.plan.causes import Cause
from reconciler.report import cost as report
from reconciler.scheduler.render import SKIPPED
from reconciler.scheduler.states import Health
from reconciler.scheduler.usage import JobUsage
from reconciler.state.records import EndingKind, SubmissionRecord, SubmissionStatus

T0 = datetime(2026, 12, 2, 12, 0, tzinfo=UTC)
HOUR = 3600.0
_ids = iter(range(1, 10_000))


def job(
    name: str,
    health: Health | None,
    *,
    gpus: int = 0,
    cpus: int = 1,
    hours: float = 1.0,
    spec: str = "s1",
    commit: str = "c1",
    kind: str = "run",
    job_id: str | None = None,
    skipped: bool = False,
    idle_h: float = 0.0,
    wait_h: float = 0.0,
    limit_h: float | None = None,
    usage: bool = True,
    at: datetime = T0,
    freed: tuple[int, int] | None = None,
    freed_known: bool = True,
    ended: datetime | None = None,
) -> SubmissionRecord:
    """``freed``: the GPUs and CPUs its components still held when it was cancelled (all
    it held unless said); ``freed_known`` False: usage journalled before recon said it."""
    record_id = next(_ids)
    seconds = hours * HOUR
    held = JobUsage(
        ended=ended,
        elapsed_s=seconds,
        wait_s=wait_h * HOUR,
        gpus=gpus,
        cpus=cpus,
        gpu_s=gpus * seconds,
        cpu_s=cpus * seconds,
        idle_s=idle_h * HOUR,
        idle_gpu_s=gpus * idle_h * HOUR,
        idle_cpu_s=cpus * idle_h * HOUR,
        time_limit_s=None if limit_h is None else limit_h * HOUR,
        cancelled_gpus=(freed or (gpus, cpus))[0] if freed_known else None,
        cancelled_cpus=(freed or (gpus, cpus))[1] if freed_known else None,
    )
    return SubmissionRecord(
        id=record_id,
        project="p",
        kind="alloc" if kind == "alloc" else "run",
        name=name,
        spec_hash=spec,
        commit=commit,
        job_id=job_id or str(100 + record_id),
        status=SubmissionStatus.SUBMITTED,
        final_health=health,
        reason=SKIPPED if skipped else None,
        ending=EndingKind.SKIPPED if skipped else None,
        usage_json=json.dumps(held.to_json()) if usage and health is not None else None,
        created_at=at,
        updated_at=at,
    )


def test_each_way_of_spending_is_its_own_column() -> None:
    records = [
        job("train", Health.SUCCEEDED, gpus=4, hours=2, spec="old", commit="c1"),  # superseded
        job("train", Health.FAILED, gpus=4, hours=0.5, spec="new", commit="c2"),  # failed attempt
        job("train", Health.FAILED, gpus=4, hours=0.25, spec="new", commit="c2"),  # failed retry
        job("train", Health.SUCCEEDED, gpus=4, hours=3, spec="new", commit="c2"),  # current
        job("eval", Health.CANCELLED, gpus=1, hours=1, commit="c2"),  # cancelled
        job("warm", Health.CANCELLED, kind="alloc", gpus=2, hours=5, idle_h=4, commit="c2"),
    ]
    book = ledger(records, {"train": "new", "eval": "s1"})
    assert book.project.gpu == {
        Spent.SUPERSEDED: 8, Spent.FAILED: 3, Spent.CURRENT: 12, Spent.CANCELLED: 1,
        Spent.IDLE: 8, Spent.ALLOCATION_WORK: 2,
    }  # fmt: skip
    assert book.project.gpu_h == 34 and book.project.jobs == 6
    assert book.runs["train"].gpu_h == 23 and book.runs["train"].jobs == 4
    assert book.allocations["warm"].gpu == {Spent.IDLE: 8, Spent.ALLOCATION_WORK: 2}
    # per commit: what each commit's changes cost to converge
    assert (book.commits["c1"].gpu_h, book.commits["c2"].gpu_h) == (8, 26)


def test_a_run_that_left_the_repo_or_changed_spec_has_no_current_success() -> None:
    records = [job("gone", Health.SUCCEEDED), job("changed", Health.SUCCEEDED, spec="old")]
    book = ledger(records, {"changed": "new"})
    assert book.project.cpu == {Spent.SUPERSEDED: 2}


def test_a_newer_success_supersedes_the_older_and_skips_keep_the_one_they_matched() -> None:
    records = [
        job("a", Health.SUCCEEDED, hours=2),
        job("a", Health.SUCCEEDED, hours=3),  # rerun (inputs changed): this one is current
        job("a", Health.SUCCEEDED, hours=0.01, skipped=True),  # skipped: current too
    ]
    book = ledger(records, {"a": "s1"})
    assert book.project.cpu == {Spent.SUPERSEDED: 2, Spent.CURRENT: pytest.approx(3.01)}
    saved = book.saved[Saving.SKIPPED]
    assert saved.cpu_h == pytest.approx(2.99) and saved.jobs == 1  # valued at the last job


def test_a_skip_is_known_by_its_ending_not_the_words_of_its_reason() -> None:
    """A skip's reason reworded (or an earlier job's words that merely read like one)
    changes nothing the ledger counts: its ending says it skipped."""
    reworded = replace(job("a", Health.SUCCEEDED, hours=0.01, skipped=True), reason="übersprungen")
    words_only = replace(job("b", Health.SUCCEEDED, hours=3), reason=SKIPPED)
    records = [
        job("a", Health.SUCCEEDED, hours=3),
        reworded,
        job("b", Health.SUCCEEDED),
        words_only,
    ]
    book = ledger(records, {"a": "s1", "b": "s1"})
    assert book.project.cpu == {Spent.SUPERSEDED: 1, Spent.CURRENT: pytest.approx(6.01)}
    assert book.saved[Saving.SKIPPED].jobs == 1


def test_jobs_recon_cancelled_count_as_cancelled_whatever_their_health() -> None:
    het = job("het", Health.FAILED, gpus=2, hours=1, job_id="77")  # torn down: one half failed
    book = ledger([het], {"het": "s1"}, cancel_causes={"77": Cause.COMPONENT_FAILED})
    assert book.project.gpu == {Spent.CANCELLED: 2}


def test_a_run_inside_an_allocation_is_counted_once_in_the_allocations_time() -> None:
    records = [
        job("warm", Health.CANCELLED, kind="alloc", cpus=4, hours=2, idle_h=1.5, job_id="9"),
        job("step", Health.SUCCEEDED, cpus=1, hours=0.5, job_id="9.0", wait_h=0.1),
    ]
    book = ledger(records, {"step": "s1"})
    assert book.project.cpu_h == 8 and book.project.jobs == 2
    assert book.project.wait_h == pytest.approx(0.1)
    assert book.runs["step"].cpu == {Spent.CURRENT: 0.5} and book.in_allocation["step"] == "9.0"
    assert "step (in 9)" in report.as_text(book, "p")


def test_savings_each_estimated_as_said() -> None:
    records = [
        # an allocation released after idle_release with 3 of its 4 hours left, 2 GPUs
        job("warm", Health.CANCELLED, kind="alloc", gpus=2, hours=1, limit_h=4, job_id="5"),
        # a het job torn down after 1 h; the run's last success ran 3 h
        job("het", Health.SUCCEEDED, gpus=2, hours=3),
        job("het", Health.FAILED, gpus=2, hours=1, job_id="7", limit_h=10),
        # a coupled partner torn down with no success to value it at: not counted
        job("client", Health.CANCELLED, gpus=1, hours=1, job_id="8"),
    ]
    causes = {"5": Cause.IDLE, "7": Cause.COMPONENT_FAILED, "8": Cause.PARTNER_FAILED}
    book = ledger(records, {"het": "s1", "client": "s1"}, cancel_causes=causes)
    assert book.saved[Saving.IDLE_RELEASE].gpu_h == 6
    assert book.saved[Saving.TEARDOWN].gpu_h == 4 and book.saved[Saving.TEARDOWN].jobs == 1
    lines = report.as_text(book, "p")
    assert "6.000 GPU-h" in lines and "time left to its limit" in lines


def test_a_teardown_saves_only_what_the_components_still_running_held() -> None:
    """A het job of 2 GPUs (its GPU half) and 1 CPU: the GPU half failed on its own, so
    the teardown freed only the CPU half, for the 2 h the last success ran beyond it."""
    records = [
        job("het", Health.SUCCEEDED, gpus=2, cpus=3, hours=3),
        job("het", Health.FAILED, gpus=2, cpus=3, hours=1, job_id="7", freed=(0, 1)),
        # the same, journalled before recon recorded what a cancel freed: not counted
        job("old", Health.SUCCEEDED, gpus=2, hours=3),
        job("old", Health.FAILED, gpus=2, hours=1, job_id="8", freed_known=False),
    ]
    causes = {"7": Cause.COMPONENT_FAILED, "8": Cause.COMPONENT_FAILED}
    book = ledger(records, {"het": "s1", "old": "s1"}, cancel_causes=causes)
    saved = book.saved[Saving.TEARDOWN]
    assert (saved.gpu_h, saved.cpu_h, saved.jobs) == (0, 2, 1)


def test_a_run_held_back_for_its_coupled_partner_saves_what_it_would_have_held_alone() -> None:
    """simulator (1 GPU) torn down at 10:00 when monitor failed; it waits, blocked, and is
    submitted with monitor's fix at 12:00: 2 h alone on 1 GPU not spent (its last success
    ran 4 h). A second teardown at 13:00 whose partner is still down at 13:30 (now): 0.5 h."""
    t = datetime(2026, 12, 2, tzinfo=UTC)
    records = [
        job("simulator", Health.SUCCEEDED, gpus=1, cpus=2, hours=4, at=t),
        job("monitor", Health.FAILED, at=t + timedelta(hours=8)),
        job("simulator", Health.CANCELLED, gpus=1, cpus=2, hours=1, job_id="20",
            at=t + timedelta(hours=9), ended=t + timedelta(hours=10)),
        job("monitor", Health.FAILED, at=t + timedelta(hours=12)),
        job("simulator", Health.CANCELLED, gpus=1, cpus=2, hours=1, job_id="21",
            at=t + timedelta(hours=12), ended=t + timedelta(hours=13)),
    ]  # fmt: skip
    causes = {"20": Cause.PARTNER_FAILED, "21": Cause.PARTNER_FAILED}
    partners = {"simulator": ["monitor"], "monitor": ["simulator"]}
    now = t + timedelta(hours=13, minutes=30)
    book = ledger(records, {}, cancel_causes=causes, partners=partners, now=now)
    saved = book.saved[Saving.COUPLED_WAIT]
    assert (saved.gpu_h, saved.cpu_h, saved.jobs) == (2.5, 5.0, 2)
    assert "held back until it ran again" in report.as_text(book, "p")
    # without a now, the wait still open is not counted; without a last success, none
    assert (
        ledger(records, {}, cancel_causes=causes, partners=partners)
        .saved[Saving.COUPLED_WAIT]
        .gpu_h
        == 2
    )
    assert (
        Saving.COUPLED_WAIT
        not in ledger(records[1:], {}, cancel_causes=causes, partners=partners, now=now).saved
    )


def test_running_jobs_and_jobs_without_usage_are_said_not_counted() -> None:
    records = [job("a", None), job("b", Health.SUCCEEDED, usage=False), job("c", Health.FAILED)]
    book = ledger(records, {})
    assert (book.running, book.unknown, book.project.jobs) == (1, 1, 1)
    text = report.as_text(book, "p")
    assert "1 job not ended yet" in text and "1 ended job with no usage" in text
    assert "No job of the project has ended" in report.as_text(ledger([], {}), "p")
    assert "No job of the project has ended" not in text


def test_filters_by_time_commit_and_name() -> None:
    records = [
        job("a", Health.SUCCEEDED, commit="c1", at=T0),
        job("b[i=1]", Health.SUCCEEDED, commit="c2", at=T0 + timedelta(days=2)),
        job("b[i=2]", Health.SUCCEEDED, commit="c2", at=T0 + timedelta(days=2)),
    ]
    specs = {"a": "s1", "b[i=1]": "s1", "b[i=2]": "s1"}
    assert ledger(records, specs, since=T0 + timedelta(days=1)).project.jobs == 2
    assert ledger(records, specs, commits={"c1"}).project.jobs == 1
    named = ledger(records, specs, names=["b"])  # a sweep's name: its members
    assert named.sweeps["b"].jobs == 2 and set(named.runs) == {"b[i=1]", "b[i=2]"}


def test_the_three_formats_say_the_same_figures() -> None:
    records = [job("t", Health.SUCCEEDED, gpus=2, hours=1.5), job("t", Health.FAILED, gpus=2)]
    book = ledger(records, {"t": "s1"})
    data = json.loads(report.as_json(book, "p"))
    assert data["total"]["gpu_hours_by"]["failed"] == 2
    assert data["runs"]["t"]["gpu_hours"] == 5
    assert "| t | 5.000 | 2.500 | 3.000 | 2.000 |" in report.as_markdown(book, "p")
    assert "current GPU-h" in report.as_text(book, "p")
    by_cpu = report.as_text(book, "p", report.Unit.cpu)
    assert "current CPU-h" in by_cpu


def test_each_jobs_usage_is_read_once_however_many_jobs(monkeypatch: pytest.MonkeyPatch) -> None:
    """The ledger is linear: one reading of each job's usage (the journal keeps it as
    text), whatever the number of runs and jobs (bench/cost.py times it at 10,000 runs)."""
    reads = [0]
    original = JobUsage.from_json.__func__  # type: ignore[attr-defined]

    def counted(cls: type[JobUsage], data: dict[str, object]) -> JobUsage:
        reads[0] += 1
        return original(cls, data)  # type: ignore[no-any-return]

    monkeypatch.setattr(JobUsage, "from_json", classmethod(counted))
    for runs in (10, 40):
        reads[0] = 0
        records = [
            job(f"r{i}", health, spec=spec)
            for i in range(runs)
            for health, spec in (
                (Health.SUCCEEDED, "old"),
                (Health.FAILED, "s1"),
                (Health.SUCCEEDED, "s1"),
            )
        ] + [job("r0", None)]
        book = ledger(records, {f"r{i}": "s1" for i in range(runs)})
        assert book.project.jobs == 3 * runs and reads[0] == 3 * runs


def test_a_job_that_saved_its_checkpoint_is_work_not_waste() -> None:
    def saved(hours: float, spec: str = "new") -> SubmissionRecord:
        made = job("train", Health.FAILED, gpus=2, hours=hours, spec=spec)
        return replace(made, ending=EndingKind.CHECKPOINTED)

    records = [
        saved(1, "old"),  # towards a success of a spec since changed
        job("train", Health.SUCCEEDED, gpus=2, hours=0.5, spec="old"),
        saved(1),  # towards the current success
        job("train", Health.FAILED, gpus=2, hours=1, spec="new"),  # a failure
        saved(1),
        job("train", Health.SUCCEEDED, gpus=2, hours=0.5, spec="new"),
        job("eval", Health.SUCCEEDED, gpus=1, hours=1),
        replace(job("eval", Health.FAILED, gpus=1, hours=2), ending=EndingKind.CHECKPOINTED),
    ]
    book = ledger(records, {"train": "new", "eval": "s1"})
    assert book.runs["train"].gpu == {Spent.SUPERSEDED: 3, Spent.CURRENT: 5, Spent.FAILED: 2}
    # eval's newest job saved its checkpoint and the run resumes: held so far, no failure
    assert book.runs["eval"].gpu == {Spent.CURRENT: 1, Spent.RUNNING: 2}
