"""The journal's write stamps (state.journal.WriteStamps): equal exactly when nothing was
committed to the journal in between, in either of the modes recon keeps it in."""

from __future__ import annotations

import shutil
import subprocess
import sys
from datetime import UTC, datetime
from pathlib import Path

import pytest

from reconciler.state.journal import Journal, WriteStamps

NOW = datetime(2026, 12, 2, 12, 0, tzinfo=UTC)


@pytest.fixture(params=["local", "shared"])
def journal_file(
    request: pytest.FixtureRequest, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> Path:
    """A journal in WAL mode (a local disk) or with the rollback journal (shared)."""
    monkeypatch.setenv("RECON_STATE_FILESYSTEM", request.param)
    path = tmp_path / "state" / "journal.sqlite"
    Journal(path).close()
    return path


def test_a_commit_changes_the_stamp_and_a_read_does_not(journal_file: Path) -> None:
    stamps = WriteStamps()
    first = stamps.stamp(journal_file)
    with Journal(journal_file) as journal:  # another connection, as another process's
        journal.records("p")
        assert stamps.stamp(journal_file) == first
        journal.log_event("p", None, "note", "written", NOW)
        second = stamps.stamp(journal_file)
        assert second != first
        journal.log_event("p", None, "note", "again", NOW)
        assert stamps.stamp(journal_file) not in (first, second)
    assert stamps.stamp(journal_file) == stamps.stamp(journal_file)
    stamps.close()


def test_a_replaced_journal_is_another_and_a_missing_one_has_none(journal_file: Path) -> None:
    stamps = WriteStamps()
    before = stamps.stamp(journal_file)
    copy = journal_file.with_name("copy.sqlite")
    shutil.copyfile(journal_file, copy)
    copy.replace(journal_file)  # same content, another file
    assert stamps.stamp(journal_file) != before
    journal_file.unlink()
    assert stamps.stamp(journal_file) is None
    stamps.close()


def test_no_connection_is_kept_on_a_shared_filesystem(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A WAL journal an earlier recon left is switched back to the rollback journal when
    the state directory is shared, which needs every other connection closed."""
    path = tmp_path / "journal.sqlite"
    monkeypatch.setenv("RECON_STATE_FILESYSTEM", "local")
    Journal(path).close()  # left in WAL mode
    monkeypatch.setenv("RECON_STATE_FILESYSTEM", "shared")
    stamps = WriteStamps()
    stamps.stamp(path)
    with Journal(path, busy_timeout=0.5) as journal:  # switches; fails while one is open
        journal.log_event("p", None, "note", "written", NOW)
    stamps.close()


def _write_from_another_process(path: Path, text: str) -> None:
    """An event logged by another recon process, which then closes the journal."""
    script = (
        "import sys\n"
        "from datetime import UTC, datetime\n"
        "from pathlib import Path\n"
        "from reconciler.state.journal import Journal\n"
        "with Journal(Path(sys.argv[1])) as journal:\n"
        "    journal.log_event('p', None, 'note', sys.argv[2], datetime.now(UTC))\n"
    )
    subprocess.run([sys.executable, "-c", script, str(path), text], check=True)


def test_a_connection_kept_open_goes_on_seeing_other_processes_writes(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """`recon watch` keeps a connection open across passes (its write stamp) while its
    passes open and close the journal, and cron's applies write and close it. Opening the
    journal file outside SQLite and closing it dropped every SQLite lock this process held
    on it (POSIX locks are per process and file): an apply closing its connection then
    took itself for the last one, checkpointed and removed the WAL under the kept
    connection, which from then on saw neither the stamp change nor the new records (or
    read 'file is not a database')."""
    monkeypatch.setenv("RECON_STATE_FILESYSTEM", "local")
    path = tmp_path / "state" / "journal.sqlite"
    Journal(path).close()
    stamps = WriteStamps()
    with Journal(path) as kept:  # as an apply's journal, open for its whole pass
        first = stamps.stamp(path)
        Journal(path).close()  # a pass's own read of the journal, in this process
        _write_from_another_process(path, "one")
        assert Path(f"{path}-wal").exists(), "the WAL was removed under open connections"
        second = stamps.stamp(path)
        assert second != first
        _write_from_another_process(path, "two")
        assert stamps.stamp(path) not in (first, second)
        assert sorted(event.message for event in kept.events("p")) == ["one", "two"]
    stamps.close()
