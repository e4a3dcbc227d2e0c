"""Integration tests run against the real Slurm dev cluster of this machine.

Every test marked `@pytest.mark.slurm` gets the session fixture `slurm_cluster` (see
tests/conftest.py): it fails, never skips, in CI or with RECON_REQUIRE_SLURM=1.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.gitrepo import GitRepo
from tests.integration.harness import Project
from tests.projects import new_project_name


@pytest.fixture
def project(tmp_path: Path) -> Iterator[Project]:
    """A temporary recon project (git repo) with a name of its own; its jobs are
    cancelled when the test ends."""
    name = new_project_name("cv")
    repo = GitRepo(tmp_path / "repo")
    repo.write({"recon.yaml": f"project: {name}\ndefaults:\n  partition: cpu\n  time: 10\n"})
    created = Project(repo, name)
    yield created
    created.cancel_all()
