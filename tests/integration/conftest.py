"""Integration tests run against the real Slurm dev cluster of this machine.

Every test marked `@pytest.mark.slurm` gets the session fixture `slurm_cluster` (see
tests/conftest.py): it fails, never skips, in CI or with RECON_REQUIRE_SLURM=1.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.gitrepo import GitRepo
from tests.integration.harness import Project


@pytest.fixture
def project(tmp_path: Path) -> Iterator[Project]:
    """A temporary recon project (git repo) with a name of its own; its jobs are
    cancelled when the test ends."""
    name = f"cv{uuid.uuid4().hex[:8]}"
    repo = GitRepo(tmp_path / "repo")
    repo.write({"recon.yaml": f"project: {name}\ndefaults:\n  partition: cpu\n  time: 10\n"})
    created = Project(repo, name)
    yield created
    created.cancel_all()
