"""The contract suite's backends: every test here runs once per Scheduler implementation,
and once per double the other tests stand in for one with, so a double cannot drift from
what Slurm does.

- `local`: a LocalScheduler of two CPUs in the test's own state directory; always runs.
- `slurm`: marked `slurm`, so it gets the `slurm_cluster` fixture (tests/conftest.py):
  skipped where no dev cluster runs, a failure in CI or with RECON_REQUIRE_SLURM=1.
- `simcluster`: the scripted cluster of the fault histories (tests/simcluster.py), moved on
  once per look while a test waits, every running job ending as its script ends.
- `scripted`: the shipped ScriptedStepScheduler (reconciler/scheduler/testing.py), every
  method scripted with the simcluster's: it has no behaviour of its own, so what the
  contract checks of it is that it carries every method's arguments and answers through.

What a backend does not do at all is said on the test, with the reason, by
``@pytest.mark.beyond(<backend>=<reason>)``; the test is then skipped there with that reason
(`-ra` lists it). A reason given for `simcluster` holds for `scripted` too.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from reconciler.scheduler.local import LocalScheduler
from reconciler.scheduler.slurm import SlurmScheduler
from tests.contract.harness import Harness, scripted_over, simulated

LOCAL_CPUS = 2
BACKENDS = ("local", "slurm", "simcluster", "scripted")
DOUBLES = ("simcluster", "scripted")


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line(
        "markers",
        "beyond(**reasons): backends (local, slurm, simcluster, scripted) that do not do what "
        "the test pins, each with the reason",
    )


def beyond_reason(item: pytest.Item, backend: str) -> str | None:
    """Why the test does not run on ``backend``, or None when it does."""
    marker = item.get_closest_marker("beyond")
    if marker is None:
        return None
    unknown = set(marker.kwargs) - set(BACKENDS)
    assert not unknown, f"beyond() names no backend {unknown}"
    reason = marker.kwargs.get(backend)
    if reason is None and backend == "scripted":
        reason = marker.kwargs.get("simcluster")
    return reason if reason is None else str(reason)


@pytest.fixture(params=["local", pytest.param("slurm", marks=pytest.mark.slurm), *DOUBLES])
def backend(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Harness]:
    """One test's view of one backend: a project name of its own, its own log directory;
    whatever it leaves alive is cancelled when it ends."""
    kind = str(request.param)
    reason = beyond_reason(request.node, kind)
    if reason is not None:
        pytest.skip(f"{kind} does not: {reason}")
    workdir = tmp_path / "work"
    workdir.mkdir()
    if kind == "local":
        harness = Harness(LocalScheduler(tmp_path / "state", cpus=LOCAL_CPUS), workdir)
    elif kind == "slurm":
        harness = Harness(SlurmScheduler(), workdir)
    else:
        cluster = simulated()
        scheduler = cluster if kind == "simcluster" else scripted_over(cluster)
        harness = Harness(scheduler, workdir, kind=kind, cluster=cluster)
    yield harness
    harness.cancel_all()
