"""What `recon cost` asks the cluster (engine/accounting): nothing when the journal has
no job running and none to back-fill; one observation for the running jobs' usage so
far; one accounting call for the jobs settled before recon read usage, written into the
journal once. The scheduler is the shipped scripted one: a call nothing was scripted
for fails the test."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from reconciler.desired.desired import Desired
from reconciler.desired.loader import load_desired, open_source
from reconciler.engine.accounting import account
from reconciler.engine.ledger.cost import Spent, ledger
from reconciler.errors import ObservationError
from reconciler.report import cost as report
from reconciler.scheduler.base import Held, JobRecord, Observation, ObservedJob
from reconciler.scheduler.states import Health, SlurmState
from reconciler.scheduler.testing import ScriptedScheduler
from reconciler.scheduler.usage import JobUsage
from reconciler.state.journal import Journal
from reconciler.state.paths import journal_path, tag_for
from tests.gitrepo import GitRepo

T0 = datetime(2026, 12, 2, 9, 0, tzinfo=UTC)
NOW = T0 + timedelta(hours=2)
TRAIN = (
    "kind: Run\nname: train\ncommand: 'python train.py > {outputs.model.path}'\n"
    "resources:\n  cpus: 8\n  gpus: 2\n  time: 4h\noutputs:\n  model: model.pt\n"
)


@pytest.fixture
def desired(tmp_path: Path) -> Desired:
    repo = GitRepo(tmp_path / "vision")
    repo.commit({"recon.yaml": "project: vision\n", "specs/train.yaml": TRAIN})
    return load_desired(open_source(repo.root, None, False))


def journalled(desired: Desired, *jobs: tuple[str, Health | None, JobUsage | None]) -> None:
    path = journal_path(desired)
    path.parent.mkdir(parents=True, exist_ok=True)
    spec = desired.runs["train"].spec_hash
    with Journal(path) as journal:
        for job_id, health, usage in jobs:
            record = journal.record_intent("vision", "run", "train", spec, desired.commit, {}, T0)
            journal.record_submitted(record, job_id, T0)
            if health is not None:
                journal.record_final(job_id, health, 0, None, T0, usage=usage)


def observed(desired: Desired, job_id: str, state: SlurmState, elapsed_s: int) -> ObservedJob:
    """A job of the run's as sacct lists it: 8 CPUs and 2 GPUs held ``elapsed_s`` so far."""
    tag = tag_for(desired, "run", "train", desired.runs["train"].spec_hash)
    start = T0 + timedelta(minutes=1)
    row = JobRecord(
        job_id=job_id,
        top_id=job_id,
        state=state,
        tag=tag,
        submit=T0,
        start=start,
        end=None if state is SlurmState.RUNNING else start + timedelta(seconds=elapsed_s),
        elapsed=timedelta(seconds=elapsed_s),
        held=Held(cpus=8, gpus=2),
        source="sacct",
    )
    return ObservedJob(job_id=job_id, tag=tag, rows=(row,))


def seen(*jobs: ObservedJob) -> Observation:
    return Observation(taken_at=NOW, jobs=jobs, complete=True)


def test_a_journal_with_nothing_open_asks_no_cluster(desired: Desired) -> None:
    used = JobUsage(
        elapsed_s=3600, gpus=2, cpus=8, gpu_s=7200, cpu_s=28800, started=T0,
        peak_memory_mb=512.0, cpu_time_s=3000.0,  # what it used, read with the rest
    )  # fmt: skip
    journalled(desired, ("101", Health.SUCCEEDED, used))
    scheduler = ScriptedScheduler()  # nothing scripted: any call fails the test
    accounted = account(desired, NOW, scheduler=scheduler)
    assert scheduler.calls == [] and accounted.live is None and accounted.not_reached is None


def test_a_running_job_is_counted_as_held_so_far_from_one_observation(desired: Desired) -> None:
    journalled(desired, ("201", None, None))
    scheduler = ScriptedScheduler(observe=seen(observed(desired, "201", SlurmState.RUNNING, 1800)))
    accounted = account(desired, NOW, scheduler=scheduler)
    assert scheduler.methods() == ["observe"]
    assert accounted.live is not None and accounted.live["201"].gpu_s == 3600
    book = ledger(accounted.records, {"train": "x"}, live=accounted.live)
    assert book.project.gpu == {Spent.RUNNING: 1.0} and book.project.cpu == {Spent.RUNNING: 4.0}
    assert (book.running, book.running_counted) == (0, 1)
    book.looked_at = accounted.looked_at
    text = report.as_text(book, "vision")
    assert text.startswith("Cost of project vision, from its journal and the cluster\n")
    assert ["running", "1.000", "4.000"] in [line.split() for line in text.splitlines()]
    assert "1 job still running counted as held so far (sacct's ElapsedRaw at 11:00:00" in text


def test_a_job_ended_since_the_last_apply_is_judged_as_a_pass_would(desired: Desired) -> None:
    """Not written, and not counted as running: by how it ended, with its usage."""
    journalled(desired, ("202", None, None))
    job = observed(desired, "202", SlurmState.FAILED, 600)
    accounted = account(desired, NOW, scheduler=ScriptedScheduler(observe=seen(job)))
    (record,) = accounted.records
    assert record.final_health is Health.FAILED and accounted.live == {}
    book = ledger(accounted.records, {}, live=accounted.live)
    assert book.project.gpu == {Spent.FAILED: pytest.approx(600 * 2 / 3600)}
    with Journal(journal_path(desired)) as journal:  # nothing written
        assert journal.records("vision")[0].final_health is None


def test_offline_or_an_unreachable_cluster_says_what_the_figure_excludes(
    desired: Desired,
) -> None:
    journalled(desired, ("201", None, None), ("101", Health.SUCCEEDED, None))
    scheduler = ScriptedScheduler()
    offline = account(desired, NOW, offline=True, scheduler=scheduler)
    assert scheduler.calls == [] and offline.live is None
    book = ledger(offline.records, {}, live=offline.live)
    book.not_reached = offline.not_reached
    text = report.as_text(book, "vision", width=400)
    assert "1 job not ended yet: this figure excludes them (--offline: the cluster was not" in text
    assert "1 ended job with no usage in the journal" in text and "1 not asked for (--off" in text
    down = ScriptedScheduler(
        accounting=ObservationError("sacct failed, usage not read: slurmdbd down")
    )
    failed = account(desired, NOW, scheduler=down)
    assert failed.not_reached == (
        "the cluster could not be asked: sacct failed, usage not read: slurmdbd down"
    )
    assert failed.live is None and [r.usage for r in failed.records] == [None, None]


def test_jobs_settled_before_usage_was_read_are_back_filled_once(desired: Desired) -> None:
    journalled(desired, ("150", Health.SUCCEEDED, None), ("151", Health.FAILED, None))
    asked: list[tuple[Sequence[str], datetime, datetime]] = []

    def accounting(ids: Sequence[str], since: datetime, until: datetime) -> Observation:
        asked.append((ids, since, until))
        return seen(observed(desired, "150", SlurmState.COMPLETED, 3600))  # 151: gone

    accounted = account(desired, NOW, scheduler=ScriptedScheduler(accounting=accounting))
    assert (accounted.backfilled, accounted.not_found) == (1, 1)
    ((ids, since, until),) = asked  # one call for both, over their records' window
    assert list(ids) == ["150", "151"] and since < T0 < until
    book = ledger(accounted.records, {"train": desired.runs["train"].spec_hash})
    assert book.project.gpu == {Spent.CURRENT: 2.0}
    assert (book.unknown, book.unknown_gone) == (1, 1)
    again = ScriptedScheduler()  # done once: nothing is asked again
    assert account(desired, NOW, scheduler=again).backfilled == 0 and again.calls == []


def test_an_accounting_that_knows_none_of_the_jobs_stamps_none(desired: Desired) -> None:
    """It may be the wrong one (the local backend picked where Slurm is not installed):
    the jobs are asked again next time, not hidden for good."""
    journalled(desired, ("150", Health.SUCCEEDED, None))
    knows_none = ScriptedScheduler(accounting=seen())
    accounted = account(desired, NOW, scheduler=knows_none)
    assert (accounted.backfilled, accounted.not_found) == (0, 0)
    asked_again = ScriptedScheduler(accounting=seen())
    account(desired, NOW, scheduler=asked_again)
    assert asked_again.methods() == ["accounting"]


def test_a_partial_observation_is_said_beside_the_jobs_it_could_not_count(
    desired: Desired,
) -> None:
    journalled(desired, ("201", None, None))
    partial = Observation(
        taken_at=NOW, jobs=(), complete=False, problems=("sacct failed, only live jobs seen: x",)
    )
    accounted = account(desired, NOW, scheduler=ScriptedScheduler(observe=partial))
    book = ledger(accounted.records, {}, live=accounted.live)
    book.looked_at, book.not_reached = accounted.looked_at, accounted.not_reached
    text = report.as_text(book, "vision", width=400)
    assert "1 job not ended yet: queued, or not in sacct's accounting yet (sacct failed" in text
