from __future__ import annotations

from pathlib import Path

from reconciler.repository.checkout import code_dir, remote_url, snapshot_path
from tests.gitrepo import GitRepo


def test_remote_url_prefers_origin_and_is_none_without_remotes(repo: GitRepo) -> None:
    repo.commit()
    assert remote_url(repo.root) is None
    repo.git("remote", "add", "backup", "https://example.invalid/backup.git")
    repo.git("remote", "add", "origin", "https://example.invalid/lab/project.git")
    assert remote_url(repo.root) == "https://example.invalid/lab/project.git"


def test_a_commit_snapshot_holds_that_commits_files(repo: GitRepo, tmp_path: Path) -> None:
    first = repo.commit({"scripts/run.sh": "echo one\n"})
    repo.commit({"scripts/run.sh": "echo two\n"})
    state = tmp_path / "state"
    assert snapshot_path(repo.root, first, state) == state / "checkouts" / first
    code = code_dir(repo.root, first, state)
    assert (code / "scripts/run.sh").read_text() == "echo one\n"
    assert code_dir(repo.root, None, state) == repo.root.resolve()
