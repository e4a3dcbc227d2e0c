from __future__ import annotations

import multiprocessing
import sqlite3
import traceback
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta, timezone
from multiprocessing.synchronize import Barrier
from pathlib import Path

import pytest

from reconciler.errors import JournalError
from reconciler.scheduler.states import Health
from reconciler.state.journal import SCHEMA_VERSION, CancelRecord, Intent, Journal
from reconciler.state.records import Rename, ScriptSent, SubmissionRecord, SubmissionStatus

T0 = datetime(2025, 3, 1, 12, 0, tzinfo=UTC)
T1 = T0 + timedelta(minutes=1)
T2 = T0 + timedelta(minutes=2)


@pytest.fixture
def path(tmp_path: Path) -> Path:
    return tmp_path / "state" / "journal.sqlite"


@pytest.fixture
def journal(path: Path) -> Iterator[Journal]:
    with Journal(path) as opened:
        yield opened


def intent(journal: Journal, name: str = "train", spec_hash: str = "h1", now: datetime = T0) -> int:
    return journal.record_intent("demo", "run", name, spec_hash, "c0ffee", {"time": "1h"}, now)


def test_intent_round_trips_every_field(journal: Journal) -> None:
    fields = {"resources.gpus": "A100:2", "env.NOTE": "héllo", "nodes": 2, "flags": [1, None]}
    # Given in another zone, read back as the same instant, timezone-aware.
    now = datetime(2025, 3, 1, 14, 0, 0, 123456, tzinfo=timezone(timedelta(hours=2)))
    record_id = journal.record_intent("demo", "alloc", "pool", "h9", None, fields, now)

    assert journal.records("demo") == [
        SubmissionRecord(
            id=record_id,
            project="demo",
            kind="alloc",
            name="pool",
            spec_hash="h9",
            commit=None,
            job_id=None,
            status=SubmissionStatus.INTENT,
            spec_fields=fields,
            created_at=now,
            updated_at=now,
        )
    ]
    created = journal.records("demo")[0].created_at
    assert created.utcoffset() == timedelta(0)


def test_intent_is_on_disk_before_the_call_returns(journal: Journal, path: Path) -> None:
    intent(journal)
    # Another connection (as another process would) sees it at once.
    with Journal(path) as other:
        assert [record.name for record in other.records("demo")] == ["train"]


def test_submitted_fills_in_the_job(journal: Journal) -> None:
    record_id = intent(journal)
    journal.record_submitted(record_id, "101", T1)
    journal.record_submitted(record_id, "101", T2)  # repeated: no change

    [record] = journal.records("demo")
    assert (record.status, record.job_id, record.commit) == (
        SubmissionStatus.SUBMITTED,
        "101",
        "c0ffee",
    )
    assert (record.created_at, record.updated_at) == (T0, T1)
    assert job_ids_of(journal, "demo") == {"101"}
    assert job_ids_of(journal, "other") == set()


def test_submitted_refuses_a_second_job_for_one_record(journal: Journal) -> None:
    record_id = intent(journal)
    journal.record_submitted(record_id, "101", T1)
    with pytest.raises(ValueError, match="job 101"):
        journal.record_submitted(record_id, "102", T2)
    with pytest.raises(KeyError):
        journal.record_submitted(record_id + 1, "103", T2)


def test_refused_leaves_no_job(journal: Journal) -> None:
    record_id = intent(journal)
    journal.record_refused(record_id, "invalid partition specified: gpu", T1)

    [record] = journal.records("demo")
    assert (record.status, record.job_id) == (SubmissionStatus.REFUSED, None)
    assert record.reason == "invalid partition specified: gpu"
    assert job_ids_of(journal, "demo") == set()


def test_adopt_fills_the_intent_left_by_a_crash_after_sbatch(journal: Journal) -> None:
    record_id = intent(journal)
    other_hash = intent(journal, spec_hash="h2")

    adopted = journal.record_adopted("demo", "run", "train", "h1", "101", T1)

    assert adopted == record_id
    records = {record.id: record for record in journal.records("demo")}
    assert len(records) == 2
    assert records[record_id].status is SubmissionStatus.ADOPTED
    assert records[record_id].job_id == "101"
    # What the intent knew stays: the commit and the spec fields.
    assert (records[record_id].commit, records[record_id].spec_fields) == ("c0ffee", {"time": "1h"})
    assert records[other_hash].job_id is None


def test_adopt_without_intent_makes_a_new_record(journal: Journal) -> None:
    refused = intent(journal)
    journal.record_refused(refused, "no", T1)

    adopted = journal.record_adopted("demo", "run", "train", "h1", "101", T2)

    assert adopted != refused
    record = journal.records("demo")[-1]
    assert (record.id, record.status, record.job_id) == (adopted, SubmissionStatus.ADOPTED, "101")
    assert (record.commit, record.spec_fields, record.created_at) == (None, {}, T2)


def test_adopt_twice_changes_nothing(journal: Journal) -> None:
    first = journal.record_adopted("demo", "run", "train", "h1", "101", T0)
    again = journal.record_adopted("demo", "run", "train", "h1", "101", T1)

    assert again == first
    [record] = journal.records("demo")
    assert record.updated_at == T0


def test_adopting_a_submitted_job_keeps_its_record(journal: Journal) -> None:
    record_id = intent(journal)
    journal.record_submitted(record_id, "101", T1)

    assert journal.record_adopted("demo", "run", "train", "h1", "101", T2) == record_id
    [record] = journal.records("demo")
    assert (record.status, record.updated_at) == (SubmissionStatus.SUBMITTED, T1)


def test_a_recycled_job_id_under_another_run_is_a_new_job(journal: Journal) -> None:
    old = journal.record_adopted("demo", "run", "prepare", "h0", "101", T0)
    new = journal.record_adopted("demo", "run", "train", "h1", "101", T1)

    assert new != old
    assert journal.record_final("101", Health.SUCCEEDED, 0, None, T2)
    # The final state goes to the newest record with that job id.
    assert [(r.name, r.final_health) for r in journal.records("demo")] == [
        ("prepare", None),
        ("train", Health.SUCCEEDED),
    ]


def test_a_job_ends_on_the_record_its_tag_names_not_the_newest_with_its_id(
    journal: Journal,
) -> None:
    """Slurm lost prepare's job 101 and handed the id to train's, which train's record
    (adopted first, so older) holds: settle names that record."""
    holder = journal.record_adopted("demo", "run", "train", "h1", "101", T0)
    journal.record_adopted("demo", "run", "prepare", "h0", "101", T1)

    assert journal.record_final("101", Health.SUCCEEDED, 0, None, T2, record_id=holder)
    assert [(r.name, r.final_health) for r in journal.records("demo")] == [
        ("train", Health.SUCCEEDED),
        ("prepare", None),
    ]
    assert journal.record_final("101", Health.FAILED, 1, None, T2, record_id=999) is False


@pytest.mark.parametrize(
    ("health", "exit_code", "reason"),
    [
        (Health.SUCCEEDED, 0, None),
        (Health.FAILED, 137, "OUT_OF_MEMORY"),
        (Health.CANCELLED, None, "cancelled by recon: spec changed"),
    ],
)
def test_final_state_is_recorded_once(
    journal: Journal, health: Health, exit_code: int | None, reason: str | None
) -> None:
    journal.record_submitted(intent(journal), "101", T0)

    assert journal.record_final("101", health, exit_code, reason, T1)
    assert journal.record_final("101", health, exit_code, reason, T2)

    [record] = journal.records("demo")
    assert (record.final_health, record.exit_code, record.reason) == (health, exit_code, reason)
    assert record.updated_at == T1


def test_a_requeued_job_that_ends_again_gets_its_new_outcome(journal: Journal) -> None:
    journal.record_submitted(intent(journal), "101", T0)
    journal.record_final("101", Health.FAILED, 1, "NODE_FAIL", T1)
    journal.record_final("101", Health.SUCCEEDED, 0, None, T2)

    [record] = journal.records("demo")
    assert (record.final_health, record.exit_code, record.reason) == (Health.SUCCEEDED, 0, None)
    assert record.updated_at == T2


def test_final_state_of_an_unknown_job_is_a_no_op(journal: Journal) -> None:
    intent(journal)
    assert journal.record_final("999", Health.FAILED, 1, None, T1) is False
    assert journal.records("demo")[0].final_health is None


def test_final_state_must_be_final(journal: Journal) -> None:
    journal.record_submitted(intent(journal), "101", T0)
    with pytest.raises(ValueError, match="not a final state"):
        journal.record_final("101", Health.RUNNING, None, None, T1)


def test_a_cancel_cut_short_by_a_crash_stays_pending(path: Path) -> None:
    with Journal(path) as journal:
        finished = journal.record_cancel_intent("demo", "train", "101", "spec changed", T0)
        journal.record_cancel_done(finished, T1)
        cut_short = journal.record_cancel_intent("demo", "eval", "102", "pruned", T1)
        journal.record_cancel_intent("other", "eval", "103", "pruned", T1)
        # The process dies here, before scancel's outcome is written.

    with Journal(path) as reopened:
        assert reopened.pending_cancels("demo") == [
            CancelRecord(
                id=cut_short,
                project="demo",
                name="eval",
                job_id="102",
                reason="pruned",
                created_at=T1,
                done_at=None,
            )
        ]
        reopened.record_cancel_done(cut_short, T2)
        reopened.record_cancel_done(cut_short, T2)  # repeated: still done
        assert reopened.pending_cancels("demo") == []
        with pytest.raises(KeyError):
            reopened.record_cancel_done(cut_short + 100, T2)


def test_records_of_a_project_oldest_first(journal: Journal) -> None:
    first = intent(journal, "train", "h1")
    other = intent(journal, "eval", "h7")
    second = intent(journal, "train", "h2")
    intent_elsewhere = journal.record_intent("other", "run", "train", "h1", None, {}, T0)

    assert [record.id for record in journal.records("demo")] == [first, other, second]
    assert [record.id for record in journal.records("other")] == [intent_elsewhere]
    assert journal.records("missing") == []


def test_events_newest_first_by_run_and_limited(journal: Journal) -> None:
    journal.log_event("demo", "actor", "teardown", "learner failed, so actor was cancelled", T0)
    journal.log_event("demo", None, "apply", "apply started", T1)
    journal.log_event("demo", "actor", "notify", "mail sent", T2)
    journal.log_event("other", "actor", "notify", "not this project", T2)

    assert [event.message for event in journal.events("demo")] == [
        "mail sent",
        "apply started",
        "learner failed, so actor was cancelled",
    ]
    [latest] = journal.events("demo", "actor", limit=1)
    assert (latest.kind, latest.name, latest.created_at) == ("notify", "actor", T2)
    assert [event.kind for event in journal.events("demo", "actor")] == ["notify", "teardown"]


def test_reopening_keeps_the_data(path: Path) -> None:
    with Journal(path) as journal:
        journal.record_submitted(intent(journal), "101", T1)
        journal.log_event("demo", "train", "note", "kept", T1)
        before = journal.records("demo")

    with Journal(path) as reopened:
        assert reopened.records("demo") == before
        assert [event.message for event in reopened.events("demo")] == ["kept"]


def test_an_empty_file_is_migrated_to_the_current_schema(path: Path) -> None:
    path.parent.mkdir(parents=True)
    path.write_bytes(b"")

    with Journal(path) as journal:
        intent(journal)

    with sqlite3.connect(path) as raw:
        assert raw.execute("PRAGMA user_version").fetchone() == (SCHEMA_VERSION,)
        assert raw.execute("PRAGMA journal_mode").fetchone() == ("wal",)
        tables = {
            row[0] for row in raw.execute("SELECT name FROM sqlite_master WHERE type='table'")
        }
    assert {"submissions", "cancels", "events"} <= tables


def test_a_garbage_file_says_where_it_is_and_what_to_do(path: Path) -> None:
    path.parent.mkdir(parents=True)
    path.write_bytes(b"this is not a database, just some text\n" * 200)

    with pytest.raises(JournalError) as caught:
        Journal(path)

    message = str(caught.value)
    assert str(path) in message
    assert "Move it aside" in message
    assert "adopts" in message


def test_a_journal_from_a_newer_recon_is_refused(path: Path) -> None:
    with Journal(path):
        pass
    with sqlite3.connect(path) as raw:
        raw.execute(f"PRAGMA user_version = {SCHEMA_VERSION + 1}")

    with pytest.raises(JournalError, match="upgrade recon"):
        Journal(path)


def test_naive_times_are_refused(journal: Journal) -> None:
    with pytest.raises(ValueError, match="timezone-aware"):
        intent(journal, now=datetime(2025, 3, 1, 12, 0))
    assert journal.records("demo") == []


PER_PROCESS = 200


def _write_many(path: Path, tag: str, start: Barrier, errors: multiprocessing.Queue[str]) -> None:
    try:
        # Both open a journal that does not exist yet at the same moment: the schema
        # migration and the switch to WAL race too.
        start.wait()
        with Journal(path) as journal:
            for index in range(PER_PROCESS):
                record_id = journal.record_intent(
                    "demo", "run", f"{tag}-{index}", "h", None, {"i": index}, T0
                )
                journal.record_submitted(record_id, f"{tag}{index}", T1)
    except BaseException:
        errors.put(traceback.format_exc())
        raise


def two_writers(path: Path) -> None:
    """Two spawned processes (they inherit the environment) write PER_PROCESS records
    each at once; both must end cleanly."""
    context = multiprocessing.get_context("spawn")
    start = context.Barrier(2)
    errors: multiprocessing.Queue[str] = context.Queue()
    workers = [context.Process(target=_write_many, args=(path, tag, start, errors)) for tag in "ab"]
    for worker in workers:
        worker.start()
    for worker in workers:
        worker.join(timeout=60)
    assert errors.empty(), errors.get()
    assert [worker.exitcode for worker in workers] == [0, 0]


def test_two_processes_writing_at_once_lose_nothing(path: Path) -> None:
    two_writers(path)
    with Journal(path) as journal:
        records = journal.records("demo")
        job_ids = job_ids_of(journal, "demo")
    assert len(records) == 2 * PER_PROCESS
    assert {record.status for record in records} == {SubmissionStatus.SUBMITTED}
    assert job_ids == {f"{tag}{index}" for tag in "ab" for index in range(PER_PROCESS)}


def test_versions_of_a_successful_job_are_remembered(tmp_path: Path) -> None:
    from datetime import UTC, datetime

    from reconciler.state.journal import Journal

    now = datetime(2026, 11, 29, 12, tzinfo=UTC)
    with Journal(tmp_path / "j.sqlite") as journal:
        intent = journal.record_intent("p", "run", "train", "a" * 16, None, {}, now)
        journal.record_submitted(intent, "42", now)
        assert journal.record_versions("42", {"data": "d1"}, {"model": None}, now)
        assert not journal.record_versions("43", {}, {}, now)
    with Journal(tmp_path / "j.sqlite") as journal:
        (record,) = journal.records("p")
    assert record.input_versions == {"data": "d1"}
    assert record.output_versions == {"model": None}


def test_a_version_1_journal_is_migrated_with_its_rows(tmp_path: Path) -> None:
    import sqlite3

    from reconciler.state import journal as journal_module

    path = tmp_path / "old.sqlite"
    db = sqlite3.connect(path, isolation_level=None)
    for statement in journal_module._MIGRATIONS[0]:
        db.execute(statement)
    db.execute(
        "INSERT INTO submissions (project, kind, name, spec_hash, job_id, status, created_at,"
        " updated_at) VALUES ('p', 'run', 'a', ?, '7', 'submitted', ?, ?)",
        ("b" * 16, "2026-11-29T12:00:00+00:00", "2026-11-29T12:00:00+00:00"),
    )
    db.execute("PRAGMA user_version = 1")
    db.close()
    with journal_module.Journal(path) as journal:
        (record,) = journal.records("p")
    assert record.job_id == "7" and record.input_versions == {} and record.output_versions == {}


def test_a_setup_is_recorded_with_its_step_and_its_end(journal: Journal) -> None:
    first = journal.record_setup("demo", "warm", "h1", "12", T0)
    second = journal.record_setup("demo", "warm", "h1", "13", T1)
    journal.record_setup_step(first, "12.0", T1)
    journal.record_setup_end(first, Health.FAILED, 2, None, T2)
    journal.record_setup_end(second, Health.FAILED, None, "srun exited 1", T2)
    older, newer = journal.setups("demo")
    assert (older.allocation_job, older.step_id, older.final_health, older.exit_code) == (
        "12", "12.0", Health.FAILED, 2,
    )  # fmt: skip
    assert older.created_at == T0 and older.updated_at == T2
    assert (newer.step_id, newer.reason) == (None, "srun exited 1")
    assert journal.setups("other") == []


def test_a_setup_end_must_be_final_and_of_a_known_setup(journal: Journal) -> None:
    setup = journal.record_setup("demo", "warm", "h1", "12", T0)
    with pytest.raises(ValueError, match="not a final state"):
        journal.record_setup_end(setup, Health.RUNNING, None, None, T1)
    with pytest.raises(KeyError):
        journal.record_setup_step(setup + 1, "12.0", T1)


def test_a_version_2_journal_gains_the_setups_table(tmp_path: Path) -> None:
    from reconciler.state import journal as journal_module

    path = tmp_path / "old.sqlite"
    db = sqlite3.connect(path, isolation_level=None)
    for statements in journal_module._MIGRATIONS[:2]:
        for statement in statements:
            db.execute(statement)
    db.execute("PRAGMA user_version = 2")
    db.close()
    with journal_module.Journal(path) as journal:
        assert journal.setups("p") == []
        journal.record_setup("p", "warm", "h1", "12", T0)
        assert len(journal.setups("p")) == 1


def job_ids_of(journal: Journal, project: str) -> set[str]:
    return {r.job_id for r in journal.records(project) if r.job_id is not None}


def test_a_version_3_journal_gains_code_versions(tmp_path: Path) -> None:
    """A journal of the release before code versions: its records read with none, and
    new intents carry theirs."""
    from reconciler.state import journal as journal_module

    path = tmp_path / "old.sqlite"
    db = sqlite3.connect(path, isolation_level=None)
    for statements in journal_module._MIGRATIONS[:3]:
        for statement in statements:
            db.execute(statement)
    db.execute(
        "INSERT INTO submissions (project, kind, name, spec_hash, git_commit, job_id, status,"
        " created_at, updated_at) VALUES ('p', 'run', 'a', ?, 'c0ffee', '7', 'submitted', ?, ?)",
        ("b" * 16, "2026-11-29T12:00:00+00:00", "2026-11-29T12:00:00+00:00"),
    )
    db.execute("PRAGMA user_version = 3")
    db.close()
    with journal_module.Journal(path) as journal:
        code = {"scripts/train.py": "a" * 40}
        journal.record_intents([Intent("p", "run", "a", "b" * 16, "c1", {}, code)], T0)
        old, new = journal.records("p")
    assert (old.job_id, old.code_versions) == ("7", {})
    assert new.code_versions == code


def test_the_inputs_a_failed_job_read_and_the_jobs_recon_cancelled(journal: Journal) -> None:
    record_id = intent(journal)
    journal.record_submitted(record_id, "42", T0)
    journal.record_final("42", Health.FAILED, 1, None, T1)
    assert journal.record_inputs("42", {"data": "d1", "gone": None}, T1)
    assert not journal.record_inputs("43", {}, T1)
    (record,) = journal.records("demo")
    assert record.input_versions == {"data": "d1", "gone": None}
    assert record.output_versions == {}
    cancel = journal.record_cancel_intent("demo", "train", "42", "replaced: as asked", T1)
    journal.record_cancel_intent("other", "train", "44", "prune", T1)
    assert journal.cancelled_jobs("demo") == frozenset({"42"})
    journal.record_cancel_done(cancel, T2)
    assert journal.cancelled_jobs("demo") == frozenset({"42"})


def test_a_version_4_journal_gains_each_jobs_ending_read_once_from_its_reason(
    tmp_path: Path,
) -> None:
    """The release before endings wrote how a job ended at the start of its reason; the
    migration fills the ending column from those words, and only for jobs that did not
    succeed."""
    from reconciler.state import journal as journal_module
    from reconciler.state.records import EndingKind

    path = tmp_path / "old.sqlite"
    db = sqlite3.connect(path, isolation_level=None)
    for statements in journal_module._MIGRATIONS[:4]:
        for statement in statements:
            db.execute(statement)
    rows = [
        ("1", "failed", "completed without its declared outputs: model, log"),
        ("2", "failed", "timed out: TimeLimit"),
        ("3", "failed", "timed out"),
        ("4", "failed", "node failed to boot: x"),
        ("5", "failed", "node failed"),
        ("6", "cancelled", "DependencyNeverSatisfied"),
        ("7", "failed", "NonZeroExitCode"),
        ("8", "succeeded", "skipped: inputs unchanged"),
        ("9", "succeeded", "Dependency"),
        ("10", "failed", None),
        ("11", None, None),
        ("12", "failed", "held in special exit (job requeued in held state)"),
        ("13", "failed", "out of memory: OutOfMemory"),
    ]
    for job_id, health, reason in rows:
        db.execute(
            "INSERT INTO submissions (project, kind, name, spec_hash, job_id, status,"
            " final_health, reason, created_at, updated_at)"
            " VALUES ('p', 'run', 'a', 'h', ?, 'submitted', ?, ?, ?, ?)",
            (job_id, health, reason, "2026-11-29T12:00:00+00:00", "2026-11-29T12:00:00+00:00"),
        )
    db.execute("PRAGMA user_version = 4")
    db.close()
    with journal_module.Journal(path) as journal:
        endings = {r.job_id: r.ending for r in journal.records("p")}
        reasons = {r.job_id: r.reason for r in journal.records("p")}
    # 8, a skip, is one since migration 11 (which reads its words once too)
    assert endings == {
        "1": EndingKind.NO_OUTPUTS, "2": EndingKind.TIMEOUT, "3": EndingKind.TIMEOUT,
        "4": EndingKind.BOOT_FAIL, "5": EndingKind.NODE_FAIL, "6": EndingKind.DEPENDENCY,
        "7": None, "8": EndingKind.SKIPPED, "9": None, "10": None, "11": None, "12": None,
        "13": EndingKind.OUT_OF_MEMORY,
    }  # fmt: skip
    assert reasons["2"] == "timed out: TimeLimit"  # the words stay, for people


def test_a_jobs_ending_is_recorded_beside_its_reason(journal: Journal) -> None:
    from reconciler.state.records import EndingKind

    journal.record_submitted(intent(journal), "101", T0)
    journal.record_final("101", Health.FAILED, None, "timed out", T1, ending=EndingKind.TIMEOUT)
    (record,) = journal.records("demo")
    assert (record.ending, record.reason) == (EndingKind.TIMEOUT, "timed out")
    # the same words with another ending is another outcome: written
    journal.record_final("101", Health.FAILED, None, "timed out", T2)
    (record,) = journal.records("demo")
    assert (record.ending, record.updated_at) == (None, T2)


def test_a_version_5_journal_goes_on_with_its_jobs_usage_unknown(tmp_path: Path) -> None:
    """The release before accounting kept no usage: its records read on with none (not
    zero), a job it left running is settled with its usage, and nothing else changes."""
    from reconciler.scheduler.usage import JobUsage
    from reconciler.state import journal as journal_module

    path = tmp_path / "old.sqlite"
    db = sqlite3.connect(path, isolation_level=None)
    for statements in journal_module._MIGRATIONS[:5]:
        for statement in statements:
            db.execute(statement)
    for job_id, health in (("1", "succeeded"), ("2", None)):
        db.execute(
            "INSERT INTO submissions (project, kind, name, spec_hash, git_commit, job_id,"
            " status, final_health, created_at, updated_at)"
            " VALUES ('p', 'run', 'a', 'h', 'c1', ?, 'submitted', ?, ?, ?)",
            (job_id, health, "2026-11-29T12:00:00+00:00", "2026-11-29T12:00:00+00:00"),
        )
    db.execute("PRAGMA user_version = 5")
    db.close()
    held = JobUsage(elapsed_s=10, gpus=2, cpus=2, gpu_s=20, cpu_s=20, started=T0)
    with journal_module.Journal(path) as journal:
        old, _running = journal.records("p")
        assert (old.usage, old.final_health, old.commit) == (None, Health.SUCCEEDED, "c1")
        assert journal.record_final("2", Health.SUCCEEDED, 0, None, T1, usage=held)
        assert [r.usage for r in journal.records("p")] == [None, held]


def test_a_jobs_usage_is_recorded_once_and_not_wiped_by_a_later_word(journal: Journal) -> None:
    from reconciler.scheduler.usage import JobUsage

    held = JobUsage(elapsed_s=3, cpus=1, cpu_s=3, started=T0, ended=T1)
    journal.record_submitted(intent(journal), "101", T0)
    journal.record_final("101", Health.FAILED, 3, None, T1, usage=held)
    journal.record_final("101", Health.FAILED, 3, "NonZeroExitCode", T2)  # no rows now
    (record,) = journal.records("demo")
    assert (record.usage, record.reason) == (held, "NonZeroExitCode")


def test_a_version_6_journal_goes_on_and_back_fills_its_older_jobs_once(tmp_path: Path) -> None:
    """The release that first kept usage: its records and usage (without what a cancel
    freed) read on as they were; a job settled before it gets its usage back-filled, or
    is stamped as not found, each once, and so does one whose usage predates what jobs
    used (schema 8: read anew, whole)."""
    from reconciler.scheduler.usage import JobUsage
    from reconciler.state import journal as journal_module

    path = tmp_path / "old.sqlite"
    db = sqlite3.connect(path, isolation_level=None)
    for statements in journal_module._MIGRATIONS[:6]:
        for statement in statements:
            db.execute(statement)
    old_usage = '{"elapsed_s": 10.0, "gpus": 2, "gpu_s": 20.0, "started": null}'
    for job_id, usage in (("1", old_usage), ("2", None), ("3", None)):
        db.execute(
            "INSERT INTO submissions (project, kind, name, spec_hash, git_commit, job_id,"
            " status, final_health, usage, created_at, updated_at)"
            " VALUES ('p', 'run', 'a', 'h', 'c1', ?, 'submitted', 'succeeded', ?, ?, ?)",
            (job_id, usage, "2026-11-29T12:00:00+00:00", "2026-11-29T12:00:00+00:00"),
        )
    db.execute("PRAGMA user_version = 6")
    db.close()
    held = JobUsage(elapsed_s=5, cpus=1, cpu_s=5, started=T0)
    with journal_module.Journal(path) as journal:
        kept, two, three = journal.records("p")
        assert kept.usage == JobUsage(elapsed_s=10, gpus=2, gpu_s=20)
        assert kept.usage is not None and kept.usage.cancelled_gpus is None
        assert (two.usage, two.usage_sought, three.usage_sought) == (None, False, False)
        journal.record_usages({two.id: held, kept.id: held}, [three.id], T1)
        kept, two, three = journal.records("p")
        assert (kept.usage, two.usage) == (held, held)
        assert (kept.used_read, two.used_read, three.used_read) == (True, True, False)
        assert (two.usage_sought, three.usage, three.usage_sought) == (False, None, True)
        journal.record_usages({kept.id: JobUsage(elapsed_s=99)}, [], T2)
        assert journal.records("p")[0].usage == held  # read once: never overwritten


def test_a_version_7_journal_goes_on_and_its_usage_is_read_again_once(tmp_path: Path) -> None:
    """The release before what jobs used (schema 7, today's main before right-sizing):
    its usage reads on, without peak memory or CPU time, and its records are due for a
    back-fill (``accounting.unaccounted``) until one writes the usage anew or stamps
    the job as gone; a job settled from then on has its usage with them at once."""
    from reconciler.engine.accounting import unaccounted
    from reconciler.scheduler.usage import JobUsage
    from reconciler.state import journal as journal_module

    path = tmp_path / "old.sqlite"
    db = sqlite3.connect(path, isolation_level=None)
    for statements in journal_module._MIGRATIONS[:7]:
        for statement in statements:
            db.execute(statement)
    old_usage = '{"elapsed_s": 10.0, "cpus": 8, "cpu_s": 80.0, "cancelled_cpus": 0}'
    for job_id in ("1", "2"):
        db.execute(
            "INSERT INTO submissions (project, kind, name, spec_hash, git_commit, job_id,"
            " status, final_health, usage, created_at, updated_at)"
            " VALUES ('p', 'run', 'a', 'h', 'c1', ?, 'submitted', 'succeeded', ?, ?, ?)",
            (job_id, old_usage, "2026-11-29T12:00:00+00:00", "2026-11-29T12:00:00+00:00"),
        )
    db.execute("PRAGMA user_version = 7")
    db.close()
    read = JobUsage(elapsed_s=10, cpus=8, cpu_s=80, peak_memory_mb=900.0, cpu_time_s=12.5)
    with journal_module.Journal(path) as journal:
        one, two = journal.records("p")
        assert one.usage == JobUsage(elapsed_s=10, cpus=8, cpu_s=80, cancelled_cpus=0)
        assert one.usage is not None and one.usage.peak_memory_mb is None
        assert [r.job_id for r in unaccounted([one, two])] == ["1", "2"]
        journal.record_usages({one.id: read}, [two.id], T1)
        one, two = journal.records("p")
        assert (one.usage, one.used_read) == (read, True)
        assert (two.usage is not None, two.used_read, two.usage_sought) == (True, False, True)
        assert unaccounted([one, two]) == []
        intent = journal.record_intent("p", "run", "a", "h", "c2", {}, T1)
        journal.record_submitted(intent, "3", T1)
        journal.record_final("3", Health.SUCCEEDED, 0, None, T2, usage=read)
        assert journal.records("p")[-1].used_read
        # settled without a peak (the step's accounting lagged, or no gatherer): its
        # usage is kept and read again once by the back-fill
        intent = journal.record_intent("p", "run", "a", "h", "c2", {}, T1)
        journal.record_submitted(intent, "4", T1)
        lagged = JobUsage(elapsed_s=10, cpus=8, cpu_s=80)
        journal.record_final("4", Health.SUCCEEDED, 0, None, T2, usage=lagged)
        newest = journal.records("p")[-1]
        assert (newest.usage, newest.used_read) == (lagged, False)
        assert [r.job_id for r in unaccounted(journal.records("p"))] == ["4"]
        journal.record_usages({newest.id: lagged}, [], T2)
        assert unaccounted(journal.records("p")) == []


# -- renames -----------------------------------------------------------------------------


def test_records_read_under_the_names_they_were_renamed_to(journal: Journal) -> None:
    """A move records a rename, never rewrites a record: a run renamed twice reads under
    its last name, at the hash it has now; records of other hashes keep theirs."""
    for name, spec_hash, job_id in (("a", "h1", "1"), ("a", "h0", "2"), ("x", "h1", "3")):
        journal.record_submitted(intent(journal, name, spec_hash), job_id, T0)
    journal.record_renames("demo", [Rename("run", "a", "h1", "b", "h2")], T1)
    journal.record_renames("demo", [Rename("run", "b", "h2", "c", "h3")], T2)
    assert [(r.name, r.spec_hash) for r in journal.records("demo")] == [
        ("c", "h3"),
        ("a", "h0"),  # an older spec of the old name: history, not moved
        ("x", "h1"),
    ]
    assert journal.renames("demo").of("run", "a", "h1") == ("c", "h3")
    assert journal.renames("demo").of("alloc", "a", "h1") is None
    assert journal.renames("other").of("run", "a", "h1") is None


def test_a_rename_recorded_twice_is_recorded_once(journal: Journal) -> None:
    """A second apply of the same plan (a saved one, or a pass cut short after it wrote
    the move) finds it made."""
    rename = Rename("run", "a", "h1", "b", "h2")
    journal.record_renames("demo", [rename], T0)
    journal.record_renames("demo", [rename], T1)
    assert journal.renames("demo").made() == [rename._replace(up_to=0)]  # no record yet


def test_a_version_8_journal_goes_on_with_no_renames(tmp_path: Path) -> None:
    """The release before renames (schema 8, today's main): its records read as they
    were, and a rename is recorded beside them."""
    from reconciler.state import journal as journal_module

    path = tmp_path / "old.sqlite"
    db = sqlite3.connect(path, isolation_level=None)
    for statements in journal_module._MIGRATIONS[:8]:
        for statement in statements:
            db.execute(statement)
    db.execute(
        "INSERT INTO submissions (project, kind, name, spec_hash, git_commit, job_id,"
        " status, created_at, updated_at)"
        " VALUES ('p', 'run', 'a', 'h', 'c1', '1', 'submitted', ?, ?)",
        ("2026-11-29T12:00:00+00:00", "2026-11-29T12:00:00+00:00"),
    )
    db.execute("PRAGMA user_version = 8")
    db.close()
    with journal_module.Journal(path) as journal:
        (record,) = journal.records("p")
        assert (record.name, record.spec_hash, record.job_id) == ("a", "h", "1")
        assert not journal.renames("p")
        journal.record_renames("p", [Rename("run", "a", "h", "b", "h2")], T1)
        (record,) = journal.records("p")
        assert (record.name, record.spec_hash, record.job_id) == ("b", "h2", "1")


def test_a_version_10_journal_goes_on_its_skips_typed_and_its_scripts_unknown(
    tmp_path: Path,
) -> None:
    """The release before facts journalled when they happen (schema 10): its skipped
    successes read as skipped (their words read once, by migration 11) and nothing else
    does, its records have no script digest (their manifests render it again), and an
    intent written after the upgrade keeps its script's digest and options."""
    from reconciler.state import journal as journal_module
    from reconciler.state.records import EndingKind

    path = tmp_path / "old.sqlite"
    db = sqlite3.connect(path, isolation_level=None)
    for statements in journal_module._MIGRATIONS[:10]:
        for statement in statements:
            db.execute(statement)
    rows = [
        ("1", "succeeded", "skipped: inputs unchanged", None),
        ("2", "succeeded", None, None),
        ("3", "failed", "skipped: inputs unchanged", None),  # words alone: not a skip
        ("4", "failed", "timed out", "timeout"),
        ("5", None, None, None),
    ]
    for job_id, health, reason, ending in rows:
        db.execute(
            "INSERT INTO submissions (project, kind, name, spec_hash, job_id, status,"
            " final_health, reason, ending, created_at, updated_at)"
            " VALUES ('p', 'run', 'a', 'h', ?, 'submitted', ?, ?, ?, ?, ?)",
            (job_id, health, reason, ending, *("2026-12-06T12:00:00+00:00",) * 2),
        )
    db.execute("PRAGMA user_version = 10")
    db.close()
    with journal_module.Journal(path) as journal:
        old = journal.records("p")
        options = ("--job-name=a", "--time=1:00")
        sent = ScriptSent("f" * 64, options)
        (new,) = journal.record_intents([Intent("p", "run", "a", "h", "c1", {}, script=sent)], T1)
        scripts = [journal.script_sent(record.id) for record in old]
        assert journal.script_sent(new) == sent
    assert [(r.job_id, r.ending, r.skipped) for r in old] == [
        ("1", EndingKind.SKIPPED, True), ("2", None, False), ("3", None, False),
        ("4", EndingKind.TIMEOUT, False), ("5", None, False),
    ]  # fmt: skip
    assert old[0].reason == "skipped: inputs unchanged"  # the words stay, for people
    assert scripts == [None] * 5


def test_a_rename_carries_the_gathered_version_its_records_read(journal: Journal) -> None:
    """A run gathering a renamed sweep: the version its success read names the old
    members; the move carries it to the one the new names give, and only that one."""
    journal.record_submitted(intent(journal, "gather", "h1"), "1", T0)
    journal.record_final("1", Health.SUCCEEDED, 0, None, T1)
    journal.record_versions("1", {"ms": "old-names", "raw": "old-names"}, {}, T1)
    carried = ("ms", "old-names", "new-names")
    journal.record_renames("demo", [Rename("run", "gather", "h1", "gather", "h2", (carried,))], T2)
    (record,) = journal.records("demo")
    assert (record.spec_hash, record.input_versions) == (
        "h2",
        {"ms": "new-names", "raw": "old-names"},
    )
    assert journal.renames("demo").made()[0].inputs == (carried,)


def test_a_record_of_the_old_name_written_after_the_move_is_its_own(journal: Journal) -> None:
    """A run of the old name added again (a rename reverted): its records are not the
    renamed run's, and a job of it is not retagged."""
    journal.record_submitted(intent(journal, "a", "h1"), "1", T0)
    journal.record_renames("demo", [Rename("run", "a", "h1", "b", "h2")], T1)
    journal.record_submitted(intent(journal, "a", "h1", T2), "2", T2)
    assert [(r.name, r.spec_hash, r.job_id) for r in journal.records("demo")] == [
        ("b", "h2", "1"),
        ("a", "h1", "2"),
    ]
