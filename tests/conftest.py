from __future__ import annotations

from pathlib import Path

import pytest

from tests.gitrepo import GitRepo

PROJECT = "project: demo\ndefaults:\n  partition: cpu\n  time: 1h\n"


@pytest.fixture
def repo(tmp_path: Path) -> GitRepo:
    """A git repo holding a recon.yaml and nothing else yet."""
    git_repo = GitRepo(tmp_path / "repo")
    git_repo.write({"recon.yaml": PROJECT})
    return git_repo
