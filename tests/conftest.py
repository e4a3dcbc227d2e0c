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

import contextlib
import fcntl
import os
import shutil
import subprocess
import time
from collections.abc import Iterator
from datetime import datetime
from pathlib import Path
from typing import Any

import freezegun
import pytest

from reconciler.devcluster import lifecycle
from reconciler.devcluster.cli import this_cluster
from reconciler.devcluster.health import check_health
from reconciler.devcluster.spec import ClusterSpec
from reconciler.errors import DevClusterError
from reconciler.scheduler.tag import Tag
from tests.gitrepo import GitRepo
from tests.plan_record import ENV as PLAN_RECORD_ENV
from tests.plan_record import Recorder
from tests.projects import MADE

PROJECT = "project: demo\ndefaults:\n  partition: cpu\n  time: 1h\n"
HOW_TO_RUN = "sudo recon dev-cluster up && RECON_REQUIRE_SLURM=1 pytest -m slurm"

# pytest times each phase with the functions of `_pytest.timing`, which freezegun would
# fake too while a fixture holds the clock frozen: `--durations` then printed the frozen
# clock's moves (a setup of 50 years, a call of the minutes a test ticked through).
freezegun.configure(extend_ignore_list=["_pytest.timing"])


@pytest.fixture
def repo(tmp_path: Path) -> GitRepo:
    """A git repo holding a recon.yaml and nothing else yet."""
    git_repo = GitRepo(tmp_path / "repo")
    git_repo.write({"recon.yaml": PROJECT})
    return git_repo


_RECORDER = Recorder(Path(os.environ[PLAN_RECORD_ENV])) if os.environ.get(PLAN_RECORD_ENV) else None


# How wide recon writes depends on COLUMNS (piped without it, lines are never wrapped),
# and pytest-xdist's workers start with COLUMNS=80 and LINES=24 where the command that
# started them had none: each worker gets the terminal variables of that command.
_TERMINAL = ("COLUMNS", "LINES")


@pytest.hookimpl(optionalhook=True)
def pytest_configure_node(node: Any) -> None:
    """In the command that starts pytest-xdist's workers: tell them its terminal."""
    node.workerinput["terminal"] = {name: os.environ.get(name) for name in _TERMINAL}


def pytest_configure(config: pytest.Config) -> None:
    """With RECON_PLAN_RECORD set, every plan the tests make is recorded
    (tests/plan_record.py). In a pytest-xdist worker, the terminal variables are those
    of the command that started it."""
    if _RECORDER is not None:
        _RECORDER.install()
    started_by: dict[str, str | None] = getattr(config, "workerinput", {}).get("terminal", {})
    for name, value in started_by.items():
        if value is None:
            os.environ.pop(name, None)
        else:
            os.environ[name] = value


def pytest_runtest_setup(item: pytest.Item) -> None:
    if _RECORDER is not None:
        _RECORDER.rebind()


def slurm_required() -> bool:
    return bool(os.environ.get("CI")) or os.environ.get("RECON_REQUIRE_SLURM") == "1"


@pytest.fixture(scope="session")
def slurm_cluster(tmp_path_factory: pytest.TempPathFactory) -> ClusterSpec:
    """The running dev cluster's description (nodes, partitions, account)."""
    cluster = this_cluster()
    problems = usable(cluster)
    if not problems:
        return cluster
    reason = "; ".join(problems)
    if not slurm_required():
        pytest.skip(f"Slurm dev cluster not usable ({reason}). To run these tests: {HOW_TO_RUN}")
    # Each pytest-xdist worker decides for itself: one `up` at a time (the folder above
    # the session's temporary folder is every worker's), and a worker that waited for
    # another's finds the cluster healthy.
    with one_at_a_time(tmp_path_factory.getbasetemp().parent / "dev-cluster-up.lock"):
        if not usable(cluster):
            return cluster
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


def usable(cluster: ClusterSpec) -> list[str]:
    """Why the tests cannot use the dev cluster now; empty when they can."""
    problems = list(check_health(cluster).problems)
    if os.geteuid() != 0:
        problems.append("the tests submit jobs as root and must run as root")
    return problems


@contextlib.contextmanager
def one_at_a_time(lock: Path) -> Iterator[None]:
    """Held by one process at a time (an exclusive lock on `lock`, released on exit)."""
    with lock.open("a") as held:
        fcntl.flock(held, fcntl.LOCK_EX)
        yield


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """Give every slurm-marked test the cluster fixture, first, before its own: a marker
    on a parameter (`pytest.param(..., marks=pytest.mark.slurm)`) counts too.

    A new list, not an insert: the parametrized items of one test function share one
    list, and the test's other parameters (the local backend) must not need a cluster.

    The slurm tests run first, each file's in its order: they spend their time waiting
    on Slurm, so with tests side by side (pytest-xdist) the tests that compute fill the
    cores meanwhile, and the longest waits do not come last."""
    for item in items:
        if not isinstance(item, pytest.Function):
            continue
        if item.get_closest_marker("slurm") and "slurm_cluster" not in item.fixturenames:
            item.fixturenames = ["slurm_cluster", *item.fixturenames]
    items.sort(key=lambda item: item.get_closest_marker("slurm") is None)


# Every recon job a test makes is the test's to cancel (the `project` fixtures cancel by
# their project's tag). The session's last step checks that they did: a recon-tagged job
# submitted since the session began and still queued or running is a leak, which holds
# a node of the shared dev cluster (an allocation, for its whole hour) for nothing.
_SESSION_STARTED = datetime.now().replace(microsecond=0)
_LIVE_STATES = "PENDING,RUNNING,SUSPENDED,CONFIGURING,REQUEUED,RESIZING"


def leaked_jobs(since: datetime) -> list[tuple[str, str]]:
    """(job id, tag) of the jobs of the projects this session's tests made, submitted
    since ``since``, that squeue still lists as queued or running."""
    if shutil.which("squeue") is None:
        return []
    listing = subprocess.run(
        ["squeue", "--me", "-h", "-t", _LIVE_STATES, "-o", "%i|%V|%k"],
        capture_output=True, text=True, check=False, timeout=30,
    )  # fmt: skip
    leaked = []
    for line in listing.stdout.splitlines():
        job_id, submitted, comment = [*line.split("|", 2), "", ""][:3]
        tag = Tag.parse(comment)
        try:
            recent = datetime.fromisoformat(submitted) >= since
        except ValueError:
            recent = False
        if tag is not None and recent and tag.project in MADE:
            leaked.append((job_id.split("+")[0].split("_")[0], tag.format()))
    return sorted(set(leaked))


def pytest_sessionfinish(session: pytest.Session, exitstatus: int) -> None:
    """Fail the run if a test left a recon job queued or running; cancel what it left."""
    leaked = leaked_jobs(_SESSION_STARTED)
    if leaked:  # a fixture's scancel may still be on its way: look once more
        time.sleep(5)
        leaked = leaked_jobs(_SESSION_STARTED)
    if not leaked:
        return
    for job_id, _ in leaked:
        subprocess.run(["scancel", job_id], capture_output=True, check=False, timeout=30)
    reporter = session.config.pluginmanager.get_plugin("terminalreporter")
    lines = [f"  job {job_id}: {tag}" for job_id, tag in leaked]
    message = "\n".join(
        ["tests left recon jobs queued or running on the dev cluster (now cancelled):", *lines]
    )
    if reporter is not None:
        reporter.write_line(message, red=True)
    session.exitstatus = pytest.ExitCode.TESTS_FAILED
