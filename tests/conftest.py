"""Fixtures every test directory shares, and the rule for tests that need real Slurm.

Every test marked `@pytest.mark.slurm`, wherever it lives (integration tests, the
contract suite's Slurm half), gets the session fixture `slurm_cluster`, which decides once
per session:

- in CI (env CI set) or with RECON_REQUIRE_SLURM=1 the cluster must be usable: if it is
  not up, `up` is tried once, and if that fails every slurm test fails with the reason;
- elsewhere, when the cluster is not up or we are not root, the tests are skipped with
  the command that runs them.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from reconciler.devcluster import lifecycle
from reconciler.devcluster.cli import this_cluster
from reconciler.devcluster.health import check_health
from reconciler.devcluster.spec import ClusterSpec
from reconciler.errors import DevClusterError
from tests.gitrepo import GitRepo

PROJECT = "project: demo\ndefaults:\n  partition: cpu\n  time: 1h\n"
HOW_TO_RUN = "sudo recon dev-cluster up && RECON_REQUIRE_SLURM=1 pytest -m slurm"


@pytest.fixture
def repo(tmp_path: Path) -> GitRepo:
    """A git repo holding a recon.yaml and nothing else yet."""
    git_repo = GitRepo(tmp_path / "repo")
    git_repo.write({"recon.yaml": PROJECT})
    return git_repo


def slurm_required() -> bool:
    return bool(os.environ.get("CI")) or os.environ.get("RECON_REQUIRE_SLURM") == "1"


@pytest.fixture(scope="session")
def slurm_cluster() -> ClusterSpec:
    """The running dev cluster's description (nodes, partitions, account)."""
    cluster = this_cluster()
    health = check_health(cluster)
    problems = list(health.problems)
    if os.geteuid() != 0:
        problems.append("the tests submit jobs as root and must run as root")
    if not problems:
        return cluster
    reason = "; ".join(problems)
    if not slurm_required():
        pytest.skip(f"Slurm dev cluster not usable ({reason}). To run these tests: {HOW_TO_RUN}")
    try:
        lifecycle.up(cluster, report=lambda _: None)
        failure = None
    except DevClusterError as error:
        failure = str(error)
    if failure is not None:
        pytest.fail(
            "the Slurm dev cluster is required here (CI or RECON_REQUIRE_SLURM=1) "
            f"and is not usable: {reason}\n`recon dev-cluster up` failed: {failure}",
            pytrace=False,
        )
    after = check_health(cluster)
    if not after.healthy:
        pytest.fail(
            "the Slurm dev cluster is still not healthy after `recon dev-cluster up`: "
            + "; ".join(after.problems),
            pytrace=False,
        )
    return cluster


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """Give every slurm-marked test the cluster fixture, first, before its own: a marker
    on a parameter (`pytest.param(..., marks=pytest.mark.slurm)`) counts too.

    A new list, not an insert: the parametrized items of one test function share one
    list, and the test's other parameters (the local backend) must not need a cluster."""
    for item in items:
        if not isinstance(item, pytest.Function):
            continue
        if item.get_closest_marker("slurm") and "slurm_cluster" not in item.fixturenames:
            item.fixturenames = ["slurm_cluster", *item.fixturenames]
