"""The journal: what recon asked the scheduler to do and what came of it, in SQLite.

Intent is written before each ``sbatch``/``scancel`` and the outcome after, so a crash at
any point leaves a trace the next pass can read: an INTENT row without a job id means
"sbatch may or may not have run". The next pass finds the job by its tag, if there is one,
and ``record_adopted`` fills that row in, instead of a second submission. The journal also
keeps the run history (commit, spec hash, job ids, final states) longer than ``sacct`` does.

How it stays safe to use:

- Durable: every write is its own short transaction, committed (``synchronous=FULL``, so
  fsynced) before the method returns. The caller relies on the intent row being on disk
  before it calls sbatch.
- Concurrent: WAL mode lets readers run beside a writer; every write starts with
  ``BEGIN IMMEDIATE`` so that it waits (``busy_timeout``) for the write lock up front.
  A deferred transaction that reads first and then upgrades to a write gets SQLITE_BUSY at
  once in WAL mode, without waiting, which is the classic "database is locked".
  WAL needs shared memory between the processes, so they must run on one host: on a
  filesystem several hosts share (NFS, Lustre, GPFS...) the journal uses SQLite's
  rollback journal instead, whose locks the filesystem carries (``state.filesystem``).
- No hidden clock: every write takes ``now``; times are stored as ISO-8601 UTC text (fixed
  width, so they sort as text) and read back timezone-aware.
- Versioned: ``PRAGMA user_version`` is the schema version; migrations run on open.
- Ordered by row id, not by time: ``now`` comes from callers whose clocks may differ.
"""

from __future__ import annotations

import errno
import json
import os
import sqlite3
import time
from collections.abc import Collection, Iterator, Mapping, Sequence
from contextlib import contextmanager, suppress
from datetime import UTC, datetime
from pathlib import Path
from types import MappingProxyType, TracebackType
from typing import Any, Literal, NamedTuple, Self

from pydantic import BaseModel, ConfigDict

from reconciler.errors import JournalError
from reconciler.scheduler.states import ENDED, Health
from reconciler.scheduler.usage import JobUsage
from reconciler.state.filesystem import JournalMode, state_filesystem
from reconciler.state.records import (
    EndingKind,
    Rename,
    Renames,
    ScriptSent,
    SetupRecord,
    SubmissionRecord,
    SubmissionStatus,
)

# The states a job can end in; record_final accepts nothing else.
FINAL_HEALTHS = ENDED

# Migration N (1-based) takes the schema from version N-1 to N. Append only: a released
# migration is never edited, since journals out there are already at its version.
_MIGRATIONS: tuple[tuple[str, ...], ...] = (
    (
        """CREATE TABLE submissions (
            id INTEGER PRIMARY KEY AUTOINCREMENT,
            project TEXT NOT NULL,
            kind TEXT NOT NULL CHECK (kind IN ('run', 'alloc')),
            name TEXT NOT NULL,
            spec_hash TEXT NOT NULL,
            git_commit TEXT,
            job_id TEXT,
            status TEXT NOT NULL,
            final_health TEXT,
            exit_code INTEGER,
            reason TEXT,
            spec_fields TEXT NOT NULL DEFAULT '{}',
            created_at TEXT NOT NULL,
            updated_at TEXT NOT NULL
        )""",
        "CREATE INDEX submissions_by_name ON submissions (project, name)",
        # Not unique: Slurm recycles job ids (MaxJobId wrap, a reset controller).
        "CREATE INDEX submissions_by_job ON submissions (job_id)",
        """CREATE TABLE cancels (
            id INTEGER PRIMARY KEY AUTOINCREMENT,
            project TEXT NOT NULL,
            name TEXT NOT NULL,
            job_id TEXT NOT NULL,
            reason TEXT NOT NULL,
            created_at TEXT NOT NULL,
            done_at TEXT
        )""",
        "CREATE INDEX cancels_pending ON cancels (project) WHERE done_at IS NULL",
        """CREATE TABLE events (
            id INTEGER PRIMARY KEY AUTOINCREMENT,
            project TEXT NOT NULL,
            name TEXT,
            kind TEXT NOT NULL,
            message TEXT NOT NULL,
            created_at TEXT NOT NULL
        )""",
        "CREATE INDEX events_by_name ON events (project, name)",
    ),
    # 2: what a successful job read and made, so currency survives the job itself.
    (
        "ALTER TABLE submissions ADD COLUMN input_versions TEXT NOT NULL DEFAULT '{}'",
        "ALTER TABLE submissions ADD COLUMN output_versions TEXT NOT NULL DEFAULT '{}'",
    ),
    # 3: allocations' setup steps: started once per allocation job, and a failed setup is
    # remembered after the job itself is gone (the spec is not allocated again).
    (
        """CREATE TABLE setups (
            id INTEGER PRIMARY KEY AUTOINCREMENT,
            project TEXT NOT NULL,
            name TEXT NOT NULL,
            spec_hash TEXT NOT NULL,
            allocation_job TEXT NOT NULL,
            step_id TEXT,
            final_health TEXT,
            exit_code INTEGER,
            reason TEXT,
            created_at TEXT NOT NULL,
            updated_at TEXT NOT NULL
        )""",
        "CREATE INDEX setups_by_project ON setups (project, name)",
    ),
    # 4: the run's code each job was submitted with (committed file -> git blob id), so a
    # changed file reruns the run; '{}' on older records: their commit tells it.
    ("ALTER TABLE submissions ADD COLUMN code_versions TEXT NOT NULL DEFAULT '{}'",),
    # 5: how a job ended beyond its health (``EndingKind``), a column of its own: until
    # then it was told by the words its reason began with. Filled here, once, from the
    # reasons earlier releases wrote; nothing reads those words afterwards.
    (
        "ALTER TABLE submissions ADD COLUMN ending TEXT",
        """UPDATE submissions SET ending = CASE
            WHEN reason GLOB 'completed without its declared outputs*' THEN 'no_outputs'
            WHEN reason = 'timed out' OR reason GLOB 'timed out: *' THEN 'timeout'
            WHEN reason = 'node failed' OR reason GLOB 'node failed: *' THEN 'node_fail'
            WHEN reason = 'node failed to boot' OR reason GLOB 'node failed to boot: *'
                THEN 'boot_fail'
            WHEN reason = 'out of memory' OR reason GLOB 'out of memory: *'
                THEN 'out_of_memory'
            WHEN reason = 'preempted' OR reason GLOB 'preempted: *' THEN 'preempted'
            WHEN reason = 'deadline passed' OR reason GLOB 'deadline passed: *'
                THEN 'deadline'
            WHEN reason = 'held in special exit' OR reason GLOB 'held in special exit: *'
                THEN 'special_exit'
            WHEN reason GLOB 'Dependency*' THEN 'dependency'
        END
        WHERE final_health IN ('failed', 'cancelled') AND reason IS NOT NULL""",
    ),
    # 6: what each job held and for how long (``scheduler/usage.JobUsage`` as JSON), read
    # from the scheduler's rows when it is settled; NULL on older records: not known.
    # and why recon cancelled each job it cancelled (the action's ``Cause`` as a value:
    # a teardown, an idle release...), NULL on older cancels.
    (
        "ALTER TABLE submissions ADD COLUMN usage TEXT",
        "ALTER TABLE cancels ADD COLUMN cause TEXT",
    ),
    # 7: when the scheduler was asked for the usage of a job settled before recon read it
    # (``record_usages``, `recon cost`'s back-fill) and had no record of it: it is not
    # asked again. NULL: not asked, or found (its usage is then in ``usage``).
    ("ALTER TABLE submissions ADD COLUMN usage_sought_at TEXT",),
    # 8: whether a job's usage holds what it used (peak memory, CPU time: right-sizing,
    # ``engine/plan/sizes``): 1 once settled with them, or back-filled whether or not the
    # scheduler measured them; 0 on older usage (and usage settled without them), which
    # `recon cost` back-fills again (the whole usage, read anew) while the scheduler's
    # accounting still holds the job.
    ("ALTER TABLE submissions ADD COLUMN used_read INTEGER NOT NULL DEFAULT 0",),
    # 9: runs renamed (`renamed_from`, ``records.Rename``): the records and jobs of an old
    # name and hash are the new name's. The records themselves are not rewritten: a job
    # still running carries its old tag, and is known by this table.
    (
        """CREATE TABLE renames (
            id INTEGER PRIMARY KEY AUTOINCREMENT,
            project TEXT NOT NULL,
            kind TEXT NOT NULL CHECK (kind IN ('run', 'alloc')),
            old_name TEXT NOT NULL,
            old_hash TEXT NOT NULL,
            new_name TEXT NOT NULL,
            new_hash TEXT NOT NULL,
            inputs TEXT NOT NULL DEFAULT '[]',
            up_to INTEGER NOT NULL,
            created_at TEXT NOT NULL
        )""",
        "CREATE INDEX renames_by_project ON renames (project)",
    ),
    # 10: what a retry asked for beyond its spec (`on_oom`, `on_timeout`:
    # ``engine/plan/raises``), as JSON `{"memory_mb": 2048, "time_s": null}`, written with
    # the intent; NULL: as the spec declares (every submission before this, and most after).
    ("ALTER TABLE submissions ADD COLUMN raised TEXT",),
    # 11: facts journalled when they happen. The sha256 of the batch script a job is sent
    # and the #SBATCH options rendered in it (a JSON list), written with the intent before
    # sbatch: the manifest names that digest, not a script rendered again once the job
    # ended; NULL on older records (their manifests still render it again). And a success
    # that skipped its command is an ending of its own (``EndingKind.SKIPPED``): until
    # then it was told by its reason's words alone, read here once, as migration 5 did.
    (
        "ALTER TABLE submissions ADD COLUMN script_sha256 TEXT",
        "ALTER TABLE submissions ADD COLUMN sbatch_options TEXT",
        """UPDATE submissions SET ending = 'skipped'
        WHERE final_health = 'succeeded' AND reason = 'skipped: inputs unchanged'
        AND ending IS NULL""",
    ),
)
SCHEMA_VERSION = len(_MIGRATIONS)

_FROZEN = ConfigDict(frozen=True, extra="forbid")
_NO_CODE: Mapping[str, str] = MappingProxyType({})


class Intent(NamedTuple):
    """A submission recon is about to make: what ``record_intents`` writes ahead."""

    project: str
    kind: Literal["run", "alloc"]
    name: str
    spec_hash: str
    commit: str | None
    spec_fields: dict[str, Any]
    code_versions: Mapping[str, str] = _NO_CODE
    # what a retry asks for beyond its spec: `memory_mb`, `time_s` (None: as declared)
    raised: Mapping[str, int | None] | None = None
    # the batch script to be sent: its sha256 and #SBATCH options (None: no script)
    script: ScriptSent | None = None


class CancelRecord(BaseModel):
    """One scancel recon meant to make; ``done_at`` is None until its outcome is recorded."""

    model_config = _FROZEN

    id: int
    project: str
    name: str
    job_id: str
    reason: str
    created_at: datetime
    done_at: datetime | None


class JournalEvent(BaseModel):
    """A "why" message: a teardown's reason, a notification sent, ..."""

    model_config = _FROZEN

    id: int
    project: str
    name: str | None
    kind: str
    message: str
    created_at: datetime


class Journal:
    """The journal of one state directory. Open it, use it, close it (or use ``with``)."""

    def __init__(self, path: Path | str, *, busy_timeout: float = 30.0) -> None:
        self.path = Path(path)
        self._busy_timeout = busy_timeout
        with self._sqlite_errors():
            self._db = _connect(self.path, busy_timeout)

    def close(self) -> None:
        self._db.close()

    def __enter__(self) -> Self:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        self.close()

    # -- submissions ---------------------------------------------------------------------

    def record_intent(
        self,
        project: str,
        kind: Literal["run", "alloc"],
        name: str,
        spec_hash: str,
        commit: str | None,
        spec_fields: dict[str, Any],
        now: datetime,
    ) -> int:
        """Record that recon is about to submit; returns the record id for what follows."""
        intent = Intent(project, kind, name, spec_hash, commit, spec_fields)
        (record_id,) = self.record_intents([intent], now)
        return record_id

    def record_intents(self, intents: Sequence[Intent], now: datetime) -> list[int]:
        """Record several submissions recon is about to make, in one transaction (one
        fsync): a group written ahead of its sbatch calls. Returns their record ids."""
        stamp = _stamp(now)
        ids = []
        with self._transaction() as db:
            for intent in intents:
                cursor = db.execute(
                    "INSERT INTO submissions (project, kind, name, spec_hash, git_commit,"
                    " status, spec_fields, code_versions, raised, script_sha256,"
                    " sbatch_options, created_at, updated_at)"
                    " VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
                    (
                        intent.project,
                        intent.kind,
                        intent.name,
                        intent.spec_hash,
                        intent.commit,
                        SubmissionStatus.INTENT,
                        json.dumps(intent.spec_fields, sort_keys=True),
                        json.dumps(dict(intent.code_versions), sort_keys=True),
                        None if intent.raised is None else json.dumps(dict(intent.raised)),
                        None if intent.script is None else intent.script.sha256,
                        _options(intent.script),
                        stamp,
                        stamp,
                    ),
                )
                ids.append(_rowid(cursor))
        return ids

    def withdraw_intents(self, record_ids: Sequence[int]) -> None:
        """Forget intents no sbatch was ever sent for (an apply that stopped, or a run
        skipped because its upstream was not submitted). Any that has a job is kept."""
        with self._transaction() as db:
            db.executemany(
                "DELETE FROM submissions WHERE id = ? AND status = ? AND job_id IS NULL",
                [(record_id, SubmissionStatus.INTENT) for record_id in record_ids],
            )

    def record_submitted(self, record_id: int, job_id: str, now: datetime) -> None:
        """sbatch returned ``job_id`` for the intent ``record_id``. Repeating it is a no-op."""
        self.record_submissions([(record_id, job_id)], now)

    def record_submissions(self, submitted: Sequence[tuple[int, str]], now: datetime) -> None:
        """``record_submitted`` for several (intent, job id) pairs in one transaction."""
        with self._transaction() as db:
            for record_id, job_id in submitted:
                row = _submission(db, record_id)
                if row["status"] == SubmissionStatus.INTENT:
                    db.execute(
                        "UPDATE submissions SET status = ?, job_id = ?, updated_at = ?"
                        " WHERE id = ?",
                        (SubmissionStatus.SUBMITTED, job_id, _stamp(now), record_id),
                    )
                elif row["job_id"] != job_id:
                    raise ValueError(
                        f"submission {record_id} is {row['status']} with job {row['job_id']};"
                        f" it cannot also be job {job_id}"
                    )

    def record_refused(self, record_id: int, reason: str, now: datetime) -> None:
        """sbatch refused the intent ``record_id``: no job exists."""
        with self._transaction() as db:
            row = _submission(db, record_id)
            if row["status"] == SubmissionStatus.REFUSED:
                return
            if row["status"] != SubmissionStatus.INTENT:
                raise ValueError(
                    f"submission {record_id} is {row['status']} with job {row['job_id']};"
                    " it cannot be refused"
                )
            db.execute(
                "UPDATE submissions SET status = ?, reason = ?, updated_at = ? WHERE id = ?",
                (SubmissionStatus.REFUSED, reason, _stamp(now), record_id),
            )

    def record_adopted(
        self,
        project: str,
        kind: Literal["run", "alloc"],
        name: str,
        spec_hash: str,
        job_id: str,
        now: datetime,
        *,
        written_now: Collection[int] = (),
    ) -> int:
        """Record a job found on the cluster by its tag; returns its record id.

        A job already recorded under this same run and spec hash changes nothing (the id of
        its record comes back). Otherwise the newest INTENT without a job id for the same
        run and spec hash is filled in: that is a crash between sbatch and the journal
        write. Otherwise (a lost journal) a new ADOPTED record is made, with no commit and
        no spec fields. A job id known under another run is a recycled id, not this job.

        ``written_now``: the intents the calling pass wrote ahead of its own submissions.
        They are no crash's leftovers, and filling one would leave its submission's job
        with no record (a pass that adopts a failed job and retries its run).
        """
        stamp = _stamp(now)
        skipped = tuple(written_now)
        with self._transaction() as db:
            known = db.execute(
                "SELECT id FROM submissions WHERE project = ? AND kind = ? AND name = ?"
                " AND spec_hash = ? AND job_id = ? ORDER BY id DESC LIMIT 1",
                (project, kind, name, spec_hash, job_id),
            ).fetchone()
            if known is not None:
                return int(known["id"])
            intent = db.execute(
                "SELECT id FROM submissions WHERE project = ? AND kind = ? AND name = ?"
                " AND spec_hash = ? AND status = ? AND job_id IS NULL"
                f" AND id NOT IN ({', '.join('?' * len(skipped))}) ORDER BY id DESC LIMIT 1",
                (project, kind, name, spec_hash, SubmissionStatus.INTENT, *skipped),
            ).fetchone()
            if intent is not None:
                db.execute(
                    "UPDATE submissions SET status = ?, job_id = ?, updated_at = ? WHERE id = ?",
                    (SubmissionStatus.ADOPTED, job_id, stamp, intent["id"]),
                )
                return int(intent["id"])
            cursor = db.execute(
                "INSERT INTO submissions (project, kind, name, spec_hash, job_id, status,"
                " created_at, updated_at) VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
                (project, kind, name, spec_hash, job_id, SubmissionStatus.ADOPTED, stamp, stamp),
            )
        return _rowid(cursor)

    def record_final(
        self,
        job_id: str,
        health: Health,
        exit_code: int | None,
        reason: str | None,
        now: datetime,
        *,
        ending: EndingKind | None = None,
        record_id: int | None = None,
        usage: JobUsage | None = None,
    ) -> bool:
        """Record how a job ended (``ending``: beyond its health, as settle judged it;
        ``reason``: in words; ``usage``: what it held, when the scheduler said it); False
        (and nothing written) if the job id is unknown.

        Applies to the record ``record_id`` (settle names the one the job's tag matches:
        Slurm hands a lost job's id to a later job, maybe another run's), else to the
        newest record with that job id. The same outcome twice changes nothing; a
        different one replaces it, since a requeued job keeps its id and may end again,
        differently.
        """
        if health not in FINAL_HEALTHS:
            raise ValueError(f"{health} is not a final state; expected one of {FINAL_HEALTHS}")
        with self._transaction() as db:
            row = db.execute(
                "SELECT id, final_health, exit_code, reason, ending, usage FROM submissions"
                " WHERE job_id = ? AND (? IS NULL OR id = ?) ORDER BY id DESC LIMIT 1",
                (job_id, record_id, record_id),
            ).fetchone()
            if row is None:
                return False
            held = None if usage is None else json.dumps(usage.to_json())
            # Read in full only with its peak: a step's accounting can lag its job's end
            # (sacct lists the batch step running a moment after squeue's COMPLETED), so
            # usage without one is read again, once, by `recon cost`'s back-fill.
            measured = usage is not None and usage.peak_memory_mb is not None
            known = (row["final_health"], row["exit_code"], row["reason"], row["ending"])
            if known != (health, exit_code, reason, ending) or (held and held != row["usage"]):
                db.execute(
                    "UPDATE submissions SET final_health = ?, exit_code = ?, reason = ?,"
                    " ending = ?, usage = COALESCE(?, usage), used_read = used_read OR ?,"
                    " updated_at = ? WHERE id = ?",
                    (health, exit_code, reason, ending, held, measured, _stamp(now), row["id"]),
                )
        return True

    def record_versions(
        self,
        job_id: str,
        inputs: Mapping[str, str | None],
        outputs: Mapping[str, str | None],
        now: datetime,
    ) -> bool:
        """Record the versions a job's inputs had and its outputs came out with (digests;
        None for one that was missing). Applies to the newest record of the job id."""
        with self._transaction() as db:
            cursor = db.execute(
                "UPDATE submissions SET input_versions = ?, output_versions = ?, updated_at = ?"
                " WHERE id = (SELECT id FROM submissions WHERE job_id = ? ORDER BY id DESC"
                " LIMIT 1)",
                (json.dumps(dict(inputs)), json.dumps(dict(outputs)), _stamp(now), job_id),
            )
            return cursor.rowcount > 0

    def record_inputs(self, job_id: str, inputs: Mapping[str, str | None], now: datetime) -> bool:
        """Record the versions a failed job's inputs had, so that a failure counts against
        its retries only while they stay the same. Applies to the newest record of the id."""
        with self._transaction() as db:
            cursor = db.execute(
                "UPDATE submissions SET input_versions = ?, updated_at = ?"
                " WHERE id = (SELECT id FROM submissions WHERE job_id = ? ORDER BY id DESC"
                " LIMIT 1)",
                (json.dumps(dict(inputs)), _stamp(now), job_id),
            )
            return cursor.rowcount > 0

    def record_usages(
        self,
        found: Mapping[int, JobUsage],
        missing: Collection[int],
        now: datetime,
    ) -> None:
        """What jobs settled before recon read their usage (or what they used: peak
        memory, CPU time) held, back-filled from the scheduler's accounting, in one
        transaction: ``found`` (record id -> usage) is written where none is yet, or
        where the one there predates what they used; ``missing`` (record ids the
        scheduler had no record of) are stamped so that they are not asked for again."""
        stamp = _stamp(now)
        unread = "(usage IS NULL OR NOT used_read)"
        with self._transaction() as db:
            db.executemany(
                f"UPDATE submissions SET usage = ?, used_read = 1 WHERE id = ? AND {unread}",
                [(json.dumps(usage.to_json()), record_id) for record_id, usage in found.items()],
            )
            db.executemany(
                f"UPDATE submissions SET usage_sought_at = ? WHERE id = ? AND {unread}",
                [(stamp, record_id) for record_id in missing],
            )

    def script_sent(self, record_id: int) -> ScriptSent | None:
        """The batch script the submission ``record_id`` was sent, as its intent journalled
        it; None where none was (an allocation, or an earlier release's intent)."""
        with self._sqlite_errors():
            row = self._db.execute(
                "SELECT script_sha256, sbatch_options FROM submissions WHERE id = ?",
                (record_id,),
            ).fetchone()
        if row is None or row["script_sha256"] is None:
            return None
        options = row["sbatch_options"]
        return ScriptSent(
            row["script_sha256"], None if options is None else tuple(json.loads(options))
        )

    def records(self, project: str) -> list[SubmissionRecord]:
        """Every submission record of the project, oldest first, under the names and
        hashes of today (``renames``)."""
        records = self._submissions("WHERE project = ? ORDER BY id", (project,))
        return self.renames(project).records(records)

    # -- renames -------------------------------------------------------------------------

    def record_renames(self, project: str, renames: Sequence[Rename], now: datetime) -> None:
        """Carry the records and jobs of each old name and hash to the new ones, all in
        one transaction: a move is done whole or not at all. A rename already recorded is
        not recorded again."""
        known = {rename[:6] for rename in self._renames(project)}
        stamp = _stamp(now)
        with self._transaction() as db:
            (up_to,) = db.execute("SELECT COALESCE(MAX(id), 0) FROM submissions").fetchone()
            db.executemany(
                "INSERT INTO renames (project, kind, old_name, old_hash, new_name, new_hash,"
                " inputs, up_to, created_at) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)",
                [
                    (project, *rename[:5], json.dumps(rename.inputs), up_to, stamp)
                    for rename in renames
                    if rename[:6] not in known
                ],
            )

    def renames(self, project: str) -> Renames:
        """The project's renames, in the order they were made."""
        return Renames(self._renames(project))

    def _renames(self, project: str) -> list[Rename]:
        with self._sqlite_errors():
            rows = self._db.execute(
                "SELECT kind, old_name, old_hash, new_name, new_hash, inputs, up_to FROM renames"
                " WHERE project = ? ORDER BY id",
                (project,),
            ).fetchall()
        return [
            Rename(
                row["kind"],
                row["old_name"],
                row["old_hash"],
                row["new_name"],
                row["new_hash"],
                tuple((str(a), str(b), str(c)) for a, b, c in json.loads(row["inputs"])),
                row["up_to"],
            )
            for row in rows
        ]

    # -- cancels -------------------------------------------------------------------------

    def record_cancel_intent(
        self,
        project: str,
        name: str,
        job_id: str,
        reason: str,
        now: datetime,
        cause: str | None = None,
    ) -> int:
        """Record that recon is about to scancel ``job_id`` (``cause``: the action's, as a
        value); returns the cancel's id."""
        stamp = _stamp(now)
        with self._transaction() as db:
            cursor = db.execute(
                "INSERT INTO cancels (project, name, job_id, reason, created_at, cause)"
                " VALUES (?, ?, ?, ?, ?, ?)",
                (project, name, job_id, reason, stamp, cause),
            )
        return _rowid(cursor)

    def record_cancel_done(self, cancel_id: int, now: datetime) -> None:
        """scancel returned for ``cancel_id``. Repeating it keeps the first time."""
        stamp = _stamp(now)
        with self._transaction() as db:
            cursor = db.execute(
                "UPDATE cancels SET done_at = coalesce(done_at, ?) WHERE id = ?",
                (stamp, cancel_id),
            )
            if cursor.rowcount == 0:
                raise KeyError(f"no cancel {cancel_id} in the journal {self.path}")

    def cancelled_jobs(self, project: str) -> frozenset[str]:
        """The ids of every job recon itself meant to cancel (prune, teardown, replace,
        a held job's cleanup): such a job's end is recon's doing, not the run's."""
        with self._sqlite_errors():
            rows = self._db.execute(
                "SELECT DISTINCT job_id FROM cancels WHERE project = ?", (project,)
            ).fetchall()
        return frozenset(row["job_id"] for row in rows)

    def cancel_causes(self, project: str) -> dict[str, str]:
        """job id -> why recon cancelled it (the newest cancel's cause, as the planner's
        ``Cause`` value), for the cancels that recorded one."""
        with self._sqlite_errors():
            rows = self._db.execute(
                "SELECT job_id, cause FROM cancels WHERE project = ? AND cause IS NOT NULL"
                " ORDER BY id",
                (project,),
            ).fetchall()
        return {row["job_id"]: row["cause"] for row in rows}

    def pending_cancels(self, project: str) -> list[CancelRecord]:
        """Cancels whose outcome was never recorded (a crash mid-cancel), oldest first."""
        with self._sqlite_errors():
            rows = self._db.execute(
                "SELECT * FROM cancels WHERE project = ? AND done_at IS NULL ORDER BY id",
                (project,),
            ).fetchall()
        return [
            CancelRecord(
                id=row["id"],
                project=row["project"],
                name=row["name"],
                job_id=row["job_id"],
                reason=row["reason"],
                created_at=datetime.fromisoformat(row["created_at"]),
                done_at=None,
            )
            for row in rows
        ]

    # -- setups --------------------------------------------------------------------------

    def record_setup(
        self, project: str, name: str, spec_hash: str, allocation_job: str, now: datetime
    ) -> int:
        """Record that recon is about to start allocation ``name``'s setup in its job
        ``allocation_job``; returns the setup's id."""
        stamp = _stamp(now)
        with self._transaction() as db:
            cursor = db.execute(
                "INSERT INTO setups (project, name, spec_hash, allocation_job, created_at,"
                " updated_at) VALUES (?, ?, ?, ?, ?, ?)",
                (project, name, spec_hash, allocation_job, stamp, stamp),
            )
        return _rowid(cursor)

    def record_setup_step(self, setup_id: int, step_id: str, now: datetime) -> None:
        """The setup ``setup_id`` runs as step ``step_id``."""
        self._update_setup(setup_id, "step_id = ?", (step_id,), now)

    def record_setup_end(
        self,
        setup_id: int,
        health: Health,
        exit_code: int | None,
        reason: str | None,
        now: datetime,
    ) -> None:
        """How setup ``setup_id`` ended (or that srun refused it: failed, with the reason)."""
        if health not in FINAL_HEALTHS:
            raise ValueError(f"{health} is not a final state; expected one of {FINAL_HEALTHS}")
        self._update_setup(
            setup_id,
            "final_health = ?, exit_code = ?, reason = ?",
            (health, exit_code, reason),
            now,
        )

    def setups(self, project: str) -> list[SetupRecord]:
        """Every setup of the project's allocations, oldest first, under the names and
        hashes of today (``renames``)."""
        return self.renames(project).setups(self._setups(project))

    def _setups(self, project: str) -> list[SetupRecord]:
        with self._sqlite_errors():
            rows = self._db.execute(
                "SELECT * FROM setups WHERE project = ? ORDER BY id", (project,)
            ).fetchall()
        return [
            SetupRecord(
                id=row["id"],
                project=row["project"],
                name=row["name"],
                spec_hash=row["spec_hash"],
                allocation_job=row["allocation_job"],
                step_id=row["step_id"],
                final_health=None if row["final_health"] is None else Health(row["final_health"]),
                exit_code=row["exit_code"],
                reason=row["reason"],
                created_at=datetime.fromisoformat(row["created_at"]),
                updated_at=datetime.fromisoformat(row["updated_at"]),
            )
            for row in rows
        ]

    def _update_setup(
        self, setup_id: int, assignments: str, values: tuple[object, ...], now: datetime
    ) -> None:
        with self._transaction() as db:
            cursor = db.execute(
                f"UPDATE setups SET {assignments}, updated_at = ? WHERE id = ?",
                (*values, _stamp(now), setup_id),
            )
            if cursor.rowcount == 0:
                raise KeyError(f"no setup {setup_id} in the journal {self.path}")

    # -- events --------------------------------------------------------------------------

    def log_event(
        self, project: str, name: str | None, kind: str, message: str, now: datetime
    ) -> int:
        """Keep a "why" message about a run (or the whole project, with name None)."""
        stamp = _stamp(now)
        with self._transaction() as db:
            cursor = db.execute(
                "INSERT INTO events (project, name, kind, message, created_at)"
                " VALUES (?, ?, ?, ?, ?)",
                (project, name, kind, message, stamp),
            )
        return _rowid(cursor)

    def events(self, project: str, name: str | None = None, limit: int = 100) -> list[JournalEvent]:
        """The newest ``limit`` events of the project (or of one run), newest first."""
        where, params = "project = ?", [project]
        if name is not None:
            where, params = "project = ? AND name = ?", [project, name]
        with self._sqlite_errors():
            rows = self._db.execute(
                f"SELECT * FROM events WHERE {where} ORDER BY id DESC LIMIT ?", (*params, limit)
            ).fetchall()
        return [
            JournalEvent(
                id=row["id"],
                project=row["project"],
                name=row["name"],
                kind=row["kind"],
                message=row["message"],
                created_at=datetime.fromisoformat(row["created_at"]),
            )
            for row in rows
        ]

    # -- plumbing ------------------------------------------------------------------------

    def _submissions(self, clause: str, params: tuple[str, ...]) -> list[SubmissionRecord]:
        with self._sqlite_errors():
            rows = self._db.execute(
                f"SELECT {_RECORD_COLUMNS} FROM submissions {clause}", params
            ).fetchall()
        return [_record(row) for row in rows]

    @contextmanager
    def _transaction(self) -> Iterator[sqlite3.Connection]:
        """One write: take the write lock up front, commit (and fsync) before returning."""
        with self._sqlite_errors():
            self._db.execute("BEGIN IMMEDIATE")
            try:
                yield self._db
            except BaseException:
                if self._db.in_transaction:
                    self._db.execute("ROLLBACK")
                raise
            self._db.execute("COMMIT")

    @contextmanager
    def _sqlite_errors(self) -> Iterator[None]:
        """SQLite's errors as a JournalError that says what to do about them."""
        try:
            yield
        except sqlite3.Error as error:
            raise JournalError(_advice(self.path, error, self._busy_timeout)) from error
        except OSError as error:
            raise JournalError(
                f"the journal {self.path} cannot be created ({error}); check that its"
                " directory is writable or set state_dir in recon.yaml to one that is"
            ) from error


class WriteStamps:
    """Whether anything was written to a journal between two looks, without reading it.

    ``stamp()`` names the journal's state: two equal stamps mean no transaction was
    committed to it in between, by any process. With the file's device and inode (a
    journal removed or replaced is another journal), and the mode it is used in:

    - WAL (a local disk): SQLite's ``PRAGMA data_version``, which changes whenever
      another connection commits, asked on a connection of its own kept open for that
      alone (it never writes; a WAL journal's header changes only at checkpoints);
    - the rollback journal (a filesystem several hosts share): the header's file change
      counter, which every commit increments, read from the file. No connection is kept
      open there: one would keep a recon from switching a WAL journal an earlier recon
      left back to the rollback journal (``_use_mode``).

    None: there is no journal. What `recon watch` needs to tell, every interval, that the
    100,000 records it holds in memory are still the journal's (engine/steady.py)."""

    def __init__(self) -> None:
        self._db: sqlite3.Connection | None = None
        self._opened: tuple[Path, int, int] | None = None  # path, device, inode

    def stamp(self, path: Path) -> tuple[str, int, int, int] | None:
        try:
            status = path.stat()
        except FileNotFoundError:
            self.close()
            return None
        mode = state_filesystem(path.parent).journal_mode
        with _errors_of(path):
            if mode == "delete":
                self.close()
                counter = _change_counter(path)
            else:
                counter = self._data_version(path, status.st_dev, status.st_ino)
        return mode, status.st_dev, status.st_ino, counter

    def _data_version(self, path: Path, device: int, inode: int) -> int:
        if self._db is None or self._opened != (path, device, inode):
            self.close()
            uri = f"{path.resolve().as_uri()}?mode=rw"  # never creates one
            self._db = sqlite3.connect(uri, uri=True, isolation_level=None)
            self._opened = (path, device, inode)
        (version,) = self._db.execute("PRAGMA data_version").fetchone()
        return int(version)

    def close(self) -> None:
        if self._db is not None:
            self._db.close()
        self._db = None
        self._opened = None


def _change_counter(path: Path) -> int:
    """The file change counter of an SQLite database's header: 4 bytes at offset 24.

    Read outside SQLite, which drops this process's POSIX locks on the file when it is
    closed (see ``_create``): only in the rollback journal's mode, where a connection holds
    locks only within a transaction and none is open in this process between passes."""
    try:
        with path.open("rb") as file:
            header = file.read(28)
    except OSError as error:
        raise sqlite3.OperationalError(str(error)) from error
    return int.from_bytes(header[24:28], "big")


@contextmanager
def _errors_of(path: Path) -> Iterator[None]:
    try:
        yield
    except sqlite3.Error as error:
        raise JournalError(_advice(path, error, 0.0)) from error


def _connect(path: Path, busy_timeout: float) -> sqlite3.Connection:
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        _create(path)
        if not os.access(path, os.W_OK):
            raise PermissionError(errno.EACCES, "the journal cannot be written", str(path))
    except OSError as error:
        if error.errno in _READ_ONLY and path.is_file():
            return _read_only(path, busy_timeout)  # plan and status only read it
        raise
    # isolation_level=None: no implicit transactions, _transaction opens them explicitly.
    db = sqlite3.connect(path, timeout=busy_timeout, isolation_level=None)
    try:
        db.row_factory = sqlite3.Row
        _use_mode(db, path, state_filesystem(path.parent).journal_mode, busy_timeout)
        db.execute("PRAGMA synchronous = FULL")
        _migrate(db, path)
    except BaseException:
        db.close()
        raise
    return db


def _create(path: Path) -> None:
    """A new journal's file, owner-only from the first byte (SQLite gives its -wal and
    -shm files the same mode); an existing one is never opened here.

    Closing any descriptor of a file drops every POSIX lock the process holds on it, and
    SQLite's locks are POSIX locks: a journal opened and closed outside SQLite while this
    process kept a connection to it (`recon watch`'s write stamp, an apply's journal while
    its report reads the journal) let another process's closing connection take itself
    for the last one, checkpoint and remove the WAL under the kept connection, which then
    saw no later write or read 'file is not a database'."""
    with suppress(FileExistsError):
        os.close(os.open(path, os.O_RDWR | os.O_CREAT | os.O_EXCL, 0o600))


# The errors of a file or filesystem this process may read but not write.
_READ_ONLY = frozenset({errno.EROFS, errno.EACCES, errno.EPERM})


def _read_only(path: Path, busy_timeout: float) -> sqlite3.Connection:
    """The journal opened for reading only, where it cannot be written (a read-only state
    directory): any write through it fails with SQLite's own error. A journal in WAL mode
    cannot be opened so without its -shm file, which a read-only directory cannot get:
    then it is read as it stands (`immutable`), which a recon that closed it left whole."""
    for options in ("mode=ro", "immutable=1"):
        db = sqlite3.connect(f"{path.as_uri()}?{options}", uri=True, timeout=busy_timeout)
        try:
            db.execute("SELECT count(*) FROM sqlite_master").fetchone()
        except sqlite3.Error:
            db.close()
            continue
        db.row_factory = sqlite3.Row
        return db
    raise sqlite3.OperationalError(f"unable to open {path} for reading")


def _use_mode(db: sqlite3.Connection, path: Path, mode: JournalMode, busy_timeout: float) -> None:
    """Put the journal in ``mode``: WAL on a local disk (the mode is then kept in the
    file), the rollback journal on a filesystem several hosts share
    (``state.filesystem``), where a WAL journal an earlier recon left is switched back.

    The switch reads, then takes the write lock. SQLite does not call the busy handler for
    such an upgrade when another connection waits for the lock too (it could deadlock), so
    two processes opening a new journal at once get SQLITE_BUSY at once: retry it here
    until the busy timeout. Leaving WAL needs every other connection closed, and SQLite
    answers the mode it kept rather than an error when one is open: that is retried too,
    and a journal still in WAL at the end is refused rather than shared between hosts.
    """
    deadline = time.monotonic() + busy_timeout
    while True:
        try:
            kept = str(db.execute(f"PRAGMA journal_mode = {mode.upper()}").fetchone()[0])
            if mode == "wal" or kept.lower() == mode:
                return
        except sqlite3.OperationalError as error:
            if error.sqlite_errorname != "SQLITE_BUSY":
                raise
        if time.monotonic() >= deadline:
            raise JournalError(
                f"the journal {path} is in WAL mode, which is unsafe on a filesystem several "
                f"hosts share, and another process kept it open for {busy_timeout:g}s, so it "
                "could not be switched back; run recon again once the other recon command "
                "(on this host) has finished"
            )
        time.sleep(0.01)


def _migrate(db: sqlite3.Connection, path: Path) -> None:
    if _version(db, path) == SCHEMA_VERSION:
        return  # the common case, without taking the write lock
    db.execute("BEGIN IMMEDIATE")
    try:
        # Again under the lock: another process may have migrated it meanwhile.
        version = _version(db, path)
        for statements in _MIGRATIONS[version:]:
            for statement in statements:
                db.execute(statement)
        db.execute(f"PRAGMA user_version = {SCHEMA_VERSION}")
        db.execute("COMMIT")
    except BaseException:
        if db.in_transaction:
            db.execute("ROLLBACK")
        raise


def _version(db: sqlite3.Connection, path: Path) -> int:
    version = int(db.execute("PRAGMA user_version").fetchone()[0])
    if version > SCHEMA_VERSION:
        raise JournalError(
            f"the journal {path} has schema version {version}, newer than this recon knows"
            f" ({SCHEMA_VERSION}); upgrade recon to the version that wrote it"
        )
    return version


def _advice(path: Path, error: sqlite3.Error, busy_timeout: float) -> str:
    code = error.sqlite_errorname
    if code in {"SQLITE_NOTADB", "SQLITE_CORRUPT"}:
        return (
            f"the journal {path} is not a readable SQLite database ({error}). Move it aside"
            f" (mv {path} {path}.broken) and run recon again: it adopts the project's jobs"
            " from the cluster by their tags; only the older run history stays in the moved"
            " file"
        )
    if code in {"SQLITE_BUSY", "SQLITE_LOCKED"}:
        return (
            f"the journal {path} stayed locked by another process for {busy_timeout:g}s"
            f" ({error}); try again when the other recon command has finished"
        )
    return (
        f"the journal {path} cannot be used ({error}); check that it and its directory are"
        " readable and writable and that the disk is not full"
    )


def _submission(db: sqlite3.Connection, record_id: int) -> sqlite3.Row:
    row: sqlite3.Row | None = db.execute(
        "SELECT status, job_id FROM submissions WHERE id = ?", (record_id,)
    ).fetchone()
    if row is None:
        raise KeyError(f"no submission {record_id} in the journal")
    return row


# What a record holds: every column but the script sent (``Journal.script_sent``).
_RECORD_COLUMNS = (
    "id, project, kind, name, spec_hash, git_commit, job_id, status, final_health,"
    " exit_code, reason, ending, spec_fields, input_versions, output_versions,"
    " code_versions, usage, usage_sought_at, used_read, raised, created_at, updated_at"
)


def _options(script: ScriptSent | None) -> str | None:
    return None if script is None or script.options is None else json.dumps(script.options)


def _record(row: sqlite3.Row) -> SubmissionRecord:
    health, ending = row["final_health"], row["ending"]
    return SubmissionRecord(
        id=row["id"],
        project=row["project"],
        kind=row["kind"],
        name=row["name"],
        spec_hash=row["spec_hash"],
        commit=row["git_commit"],
        job_id=row["job_id"],
        status=SubmissionStatus(row["status"]),
        final_health=None if health is None else Health(health),
        exit_code=row["exit_code"],
        reason=row["reason"],
        ending=None if ending is None else EndingKind(ending),
        spec_fields=_mapping(row["spec_fields"]),
        input_versions=_mapping(row["input_versions"]),
        output_versions=_mapping(row["output_versions"]),
        code_versions=_mapping(row["code_versions"]),
        usage_json=row["usage"],
        usage_sought=row["usage_sought_at"] is not None,
        used_read=bool(row["used_read"]),
        raised=None if row["raised"] is None else json.loads(row["raised"]),
        created_at=datetime.fromisoformat(row["created_at"]),
        updated_at=datetime.fromisoformat(row["updated_at"]),
    )


def _mapping(text: str) -> dict[str, Any]:
    """A JSON object column; the empty one (most of them in some columns) without the
    parser: a pass reads four per record, 10,000 records a pass."""
    return {} if text == "{}" else json.loads(text)


def _rowid(cursor: sqlite3.Cursor) -> int:
    assert cursor.lastrowid is not None  # an INSERT always sets it
    return cursor.lastrowid


def _stamp(now: datetime) -> str:
    # A naive datetime would be read as local time by astimezone: a hidden clock setting.
    if now.utcoffset() is None:
        raise ValueError(f"now must be timezone-aware, got {now!r}")
    return now.astimezone(UTC).isoformat(timespec="microseconds")
