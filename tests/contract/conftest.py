"""The contract suite's backends: every test here runs once per Scheduler implementation.

`local` always runs (a LocalScheduler of two CPUs in the test's own state directory);
`slurm` is marked `slurm`, so it gets the `slurm_cluster` fixture (tests/conftest.py):
skipped where no dev cluster runs, a failure in CI or with RECON_REQUIRE_SLURM=1.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from reconciler.scheduler.base import Scheduler
from reconciler.scheduler.local import LocalScheduler
from reconciler.scheduler.slurm import SlurmScheduler
from tests.contract.harness import Harness

LOCAL_CPUS = 2


@pytest.fixture(params=["local", pytest.param("slurm", marks=pytest.mark.slurm)])
def backend(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Harness]:
    """One test's view of one backend: a project name of its own, its own log directory;
    whatever it leaves alive is cancelled when it ends."""
    scheduler: Scheduler
    if request.param == "local":
        scheduler = LocalScheduler(tmp_path / "state", cpus=LOCAL_CPUS)
    else:
        scheduler = SlurmScheduler()
    workdir = tmp_path / "work"
    workdir.mkdir()
    harness = Harness(scheduler, workdir)
    yield harness
    harness.cancel_all()
