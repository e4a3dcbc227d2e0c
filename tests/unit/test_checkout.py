from __future__ import annotations

import os
import tarfile
from pathlib import Path

import pytest

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


def test_a_python_without_extraction_filters_snapshots_all_the_same(
    repo: GitRepo, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Python 3.11.2 (Debian 12's own) has no `filter` argument to extractall: a snapshot
    taken there holds the commit's files and links as on any other Python."""
    monkeypatch.delattr(tarfile, "tar_filter")
    extract = tarfile.TarFile.extractall

    def without_filters(self: tarfile.TarFile, path: str | Path = ".", **options: object) -> None:
        assert "filter" not in options, "Python 3.11.2 has no filter argument"
        extract(self, path)

    monkeypatch.setattr(tarfile.TarFile, "extractall", without_filters)
    (repo.root / "scratch").symlink_to("/scratch/lab")
    commit = repo.commit({"scripts/run.sh": "echo one\n"})
    code = code_dir(repo.root, commit, tmp_path / "state")
    assert (code / "scripts/run.sh").read_text() == "echo one\n"
    assert os.readlink(code / "scratch") == "/scratch/lab"
