"""The state directory's filesystem: read from mountinfo, and what it allows the journal
and the lock (state/filesystem.py)."""

from __future__ import annotations

import sqlite3
from datetime import UTC, datetime
from pathlib import Path

import pytest

from reconciler.errors import JournalError, StateDirError
from reconciler.state import filesystem
from reconciler.state.directory import prepare_state_dir
from reconciler.state.filesystem import (
    Mount,
    check_state_filesystem,
    judge,
    mount_of,
    parse_mountinfo,
    state_filesystem,
)
from reconciler.state.journal import Journal
from tests.unit.test_journal import PER_PROCESS, job_ids_of, two_writers

# Lines as /proc/self/mountinfo gives them for each kind (fields as in proc(5)).
MOUNTINFO = """\
27 1 254:0 / / rw,relatime - ext4 /dev/vda rw,discard
25 24 0:23 / /dev/shm rw,relatime - tmpfs tmpfs rw,size=24683568k
61 27 0:52 / /home rw,relatime shared:30 - nfs4 fs1:/export/home rw,vers=4.2,hard,sec=sys
62 27 0:53 / /lustre/scratch rw,relatime - lustre 10.0.0.1@o2ib:/scratch rw,flock,lazystatfs
63 27 0:54 / /lustre/local rw,relatime - lustre 10.0.0.1@o2ib:/local rw,localflock
64 27 0:55 / /lustre/plain rw,relatime - lustre 10.0.0.1@o2ib:/plain rw,lazystatfs
65 27 0:56 / /gpfs/projects rw,relatime - gpfs gpfs1 rw
66 27 0:57 / /mnt/remote rw,nosuid,nodev,relatime - fuse.sshfs ana@login2:/home/ana rw,user_id=1000
67 61 0:58 / /home/ana/my\\040lab rw,relatime - ext4 /dev/vdb rw
68 27 0:59 / /homework rw,relatime - xfs /dev/vdc rw
"""


@pytest.fixture
def mounts() -> list[Mount]:
    return parse_mountinfo(MOUNTINFO)


def kind_of(path: str, mounts: list[Mount]) -> tuple[str, bool, bool]:
    found = judge(mount_of(path, mounts))
    return found.fstype, found.shared, found.problem is None


def test_each_line_gives_its_mount_point_type_and_options(mounts: list[Mount]) -> None:
    home = mounts[2]
    assert (home.mount_point, home.fstype, home.source) == ("/home", "nfs4", "fs1:/export/home")
    assert {"vers=4.2", "hard", "relatime"} <= home.options
    assert "/home/ana/my lab" in {mount.mount_point for mount in mounts}  # \040 is a space
    assert len(mounts) == 10
    assert parse_mountinfo("not a mount line\n\n") == []


@pytest.mark.parametrize(
    ("path", "expected"),
    [
        ("/srv/repo/.recon", ("ext4", False, True)),
        ("/dev/shm/repo/.recon", ("tmpfs", False, True)),
        ("/home/ana/repo/.recon", ("nfs4", True, True)),
        ("/home", ("nfs4", True, True)),
        ("/homework/repo/.recon", ("xfs", False, True)),  # not under /home
        ("/home/ana/my lab/repo/.recon", ("ext4", False, True)),  # mounted over the NFS
        ("/lustre/scratch/ana/.recon", ("lustre", True, True)),  # flock: cluster-wide
        ("/lustre/local/ana/.recon", ("lustre", True, False)),  # localflock: per node
        ("/lustre/plain/ana/.recon", ("lustre", True, False)),  # no flock at all
        ("/gpfs/projects/lab/.recon", ("gpfs", True, True)),
        ("/mnt/remote/repo/.recon", ("fuse.sshfs", True, False)),
    ],
)
def test_the_mount_that_holds_a_path_decides(
    path: str, expected: tuple[str, bool, bool], mounts: list[Mount]
) -> None:
    assert kind_of(path, mounts) == expected


def test_a_later_mount_over_the_same_point_hides_the_earlier() -> None:
    stacked = parse_mountinfo(
        "61 27 0:52 / /data rw - ext4 /dev/vdb rw\n62 27 0:53 / /data rw - nfs fs1:/data rw\n"
    )
    assert kind_of("/data/x", stacked) == ("nfs", True, True)


def test_a_shared_filesystem_takes_the_rollback_journal_a_local_one_wal(
    mounts: list[Mount],
) -> None:
    assert judge(mount_of("/home/ana/.recon", mounts)).journal_mode == "delete"
    assert judge(mount_of("/srv/.recon", mounts)).journal_mode == "wal"


def test_the_variable_overrides_what_mountinfo_says(mounts: list[Mount]) -> None:
    sshfs = mount_of("/mnt/remote/.recon", mounts)
    assert judge(sshfs, "local").problem is None and not judge(sshfs, "local").shared
    assert judge(mount_of("/srv/.recon", mounts), "shared").journal_mode == "delete"


def test_this_machine_is_read_from_its_own_mountinfo(tmp_path: Path) -> None:
    # /dev/shm is a tmpfs on Linux: a real lookup, through a folder that does not exist yet.
    found = state_filesystem(Path("/dev/shm") / tmp_path.name / "not-yet" / ".recon")
    assert (found.fstype, found.mount_point, found.shared) == ("tmpfs", "/dev/shm", False)


def test_a_bad_override_says_what_it_takes(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("RECON_STATE_FILESYSTEM", "nfs")
    with pytest.raises(StateDirError, match=r"'local' .* or 'shared'"):
        state_filesystem(tmp_path)


def test_a_state_dir_whose_lock_is_per_host_is_refused_saying_what_to_do(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, mounts: list[Mount]
) -> None:
    local_flock = mount_of("/lustre/local/x", mounts)
    monkeypatch.setattr(filesystem, "_mount", lambda path: local_flock)
    state = tmp_path / ".recon"
    with pytest.raises(StateDirError) as refused:
        prepare_state_dir(state)
    message = str(refused.value)
    assert "lustre (/lustre/local), mounted with localflock" in message
    assert "Set state_dir in recon.yaml" in message and "RECON_STATE_FILESYSTEM=local" in message
    assert not state.exists()  # refused before anything is made
    monkeypatch.setenv("RECON_STATE_FILESYSTEM", "local")
    prepare_state_dir(state)  # every command on one host: allowed
    assert check_state_filesystem(state).journal_mode == "wal"


def journal_mode(path: Path) -> str:
    db = sqlite3.connect(path)
    try:
        return str(db.execute("PRAGMA journal_mode").fetchone()[0])
    finally:
        db.close()


def test_on_a_shared_filesystem_the_journal_keeps_no_shared_memory(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("RECON_STATE_FILESYSTEM", "shared")
    path = tmp_path / "state" / "journal.sqlite"
    with Journal(path) as journal:
        journal.record_intent("demo", "run", "train", "h1", None, {}, _now())
        assert not path.with_name("journal.sqlite-shm").exists()
        assert not path.with_name("journal.sqlite-wal").exists()
    assert journal_mode(path) == "delete"


def test_a_wal_journal_an_earlier_recon_left_is_switched_back_with_its_rows(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = tmp_path / "state" / "journal.sqlite"
    with Journal(path) as journal:  # local: WAL, as every earlier release made it
        journal.record_intent("demo", "run", "train", "h1", None, {}, _now())
    assert journal_mode(path) == "wal"
    monkeypatch.setenv("RECON_STATE_FILESYSTEM", "shared")
    with Journal(path) as journal:
        assert [record.name for record in journal.records("demo")] == ["train"]
    assert journal_mode(path) == "delete"


def test_a_wal_journal_held_open_elsewhere_is_refused_not_shared(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = tmp_path / "state" / "journal.sqlite"
    with Journal(path) as other:
        monkeypatch.setenv("RECON_STATE_FILESYSTEM", "shared")
        with pytest.raises(JournalError, match=r"WAL mode, which is unsafe .* run recon again"):
            Journal(path, busy_timeout=0.2)
        assert other.records("demo") == []
    assert journal_mode(path) == "wal"


def test_two_processes_writing_a_rollback_journal_at_once_lose_nothing(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("RECON_STATE_FILESYSTEM", "shared")  # spawned workers inherit it
    path = tmp_path / "state" / "journal.sqlite"
    two_writers(path)
    with Journal(path) as journal:
        assert len(job_ids_of(journal, "demo")) == 2 * PER_PROCESS
    assert journal_mode(path) == "delete"


def _now() -> datetime:
    return datetime(2025, 3, 1, 12, 0, tzinfo=UTC)
