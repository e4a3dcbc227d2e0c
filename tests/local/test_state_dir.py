"""The state directory: owner-only, ignored by git, and refused when another user owns it."""

from __future__ import annotations

import os
import stat
from pathlib import Path

import pytest

from reconciler.engine.reconcile import Request, reconcile_once
from reconciler.errors import StateDirError
from reconciler.scheduler.local import LocalScheduler
from reconciler.state.directory import prepare_state_dir
from tests.cli import recon
from tests.gitrepo import GitRepo

SPEC = "kind: Run\nname: hello\ncommand: 'true'\nresources: {cpus: 1}\n"


def project(root: Path) -> GitRepo:
    repo = GitRepo(root)
    repo.commit({"recon.yaml": "project: quiet\nscheduler: local\n", "specs/a.yaml": SPEC})
    return repo


def mode(path: Path) -> int:
    return stat.S_IMODE(path.stat().st_mode)


def test_an_apply_leaves_nothing_for_git_add_and_nothing_others_can_read(tmp_path: Path) -> None:
    repo = project(tmp_path / "repo")
    state = repo.root / ".recon"
    scheduler = LocalScheduler(state, cpus=1)
    outcome = reconcile_once(Request(repo.root), scheduler=scheduler)
    try:
        assert outcome.applied is not None and outcome.applied.submitted
    finally:
        for job_id in outcome.applied.submitted.values() if outcome.applied else ():
            scheduler.cancel(job_id)
    assert mode(state) == 0o700
    assert mode(state / "journal.sqlite") == 0o600
    repo.git("add", "-A")
    staged = repo.git("diff", "--cached", "--name-only").splitlines()
    assert not [path for path in staged if path.startswith(".recon/")], staged


def test_a_group_readable_state_dir_is_made_owner_only(tmp_path: Path) -> None:
    state = tmp_path / "state"
    state.mkdir(mode=0o755)
    state.chmod(0o755)
    prepare_state_dir(state)
    assert mode(state) == 0o700 and (state / ".gitignore").read_text().endswith("*\n")


@pytest.mark.skipif(os.geteuid() != 0, reason="giving a folder to another user needs root")
def test_a_state_dir_another_user_owns_is_refused_with_what_to_do(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    repo = project(tmp_path / "repo")
    state = repo.root / ".recon"
    state.mkdir()
    os.chown(state, 65534, 65534)  # nobody
    with pytest.raises(StateDirError, match="belongs to nobody, not to you"):
        prepare_state_dir(state)
    result = recon(capsys, "apply", str(repo.root), "--auto-approve")
    assert result.code != 0 and "Traceback" not in result.err + result.out
    assert "set state_dir in recon.yaml" in result.err
    assert not (state / "journal.sqlite").exists()


def test_a_state_dir_that_cannot_be_made_says_so(tmp_path: Path) -> None:
    blocker = tmp_path / "file"
    blocker.write_text("")
    with pytest.raises(StateDirError, match="cannot make the state directory"):
        prepare_state_dir(blocker / "state")


def test_a_state_dir_whose_lock_holds_on_one_host_only_is_refused_by_apply(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """sshfs (and Lustre without `flock`) keep a lock per host: two login nodes' applies
    could both submit a run, so apply refuses before it makes anything; plan still reads."""
    from reconciler.state import filesystem

    repo = project(tmp_path / "repo")
    sshfs = filesystem.Mount("/mnt/remote", "fuse.sshfs", "ana@login2:/home", frozenset({"rw"}))
    monkeypatch.setattr(filesystem, "_mount", lambda path: sshfs)
    result = recon(capsys, "apply", str(repo.root), "--auto-approve")
    assert result.code == 1 and "Traceback" not in result.err + result.out
    said = "is on fuse.sshfs (/mnt/remote), its locks are not shared between the hosts"
    assert said in result.err
    assert "RECON_STATE_FILESYSTEM=local" in result.err
    state = repo.root / ".recon"  # the parse cache may be there: a plain file, no lock
    assert not (state / "journal.sqlite").exists() and not (state / "local").exists()
    planned = recon(capsys, "plan", str(repo.root))
    assert planned.code == 0 and "hello" in planned.out
    monkeypatch.setenv("RECON_STATE_FILESYSTEM", "local")
    applied = recon(capsys, "apply", str(repo.root), "--auto-approve", "--wait")
    assert applied.code == 0, applied.err
