"""A failed rerun never destroys the last good output, on the real dev cluster: a rerun
that fails after writing half its outputs, and one SIGKILLed between two renames while it
published them (then rolled back by the next pass), leave the previous outputs the same
files, and the run reading them current. The project has a name of its own; its jobs are
cancelled when the test ends."""

from __future__ import annotations

import json
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest

from reconciler.scheduler.runfolder import published_marker, publishing_dir
from reconciler.state.provenance import read_manifest
from tests.gitrepo import GitRepo
from tests.integration.harness import Project
from tests.local.test_staged_outputs import MAKE, READ, killing_shim, on_path, published
from tests.projects import new_project_name

pytestmark = pytest.mark.slurm

RESOURCES = "resources: {cpus: 1, memory: 100MiB}"


@pytest.fixture
def project(tmp_path: Path) -> Iterator[Project]:
    """make and read, both current on the cluster, make's outputs saying v1."""
    name = new_project_name("staged")
    repo = GitRepo(tmp_path / "repo")
    repo.commit(
        {
            "recon.yaml": f"project: {name}\ndefaults:\n  partition: cpu\n  time: 10\n",
            "specs/make.yaml": _on_cluster(MAKE.replace("VERSION", "v1")),
            "specs/read.yaml": _on_cluster(READ),
        }
    )
    created = Project(repo, name)
    try:
        created.apply("--wait")
        yield created
    finally:
        created.cancel_all()


def _on_cluster(spec: str) -> str:
    return spec.replace("resources: {cpus: 1}", RESOURCES)


def statuses(project: Project) -> dict[str, dict[str, str]]:
    shown = project.recon("status", ".", "--format", "json")
    assert shown.returncode == 0, shown.stderr
    return {row["name"]: row for row in json.loads(shown.stdout)}


def test_a_rerun_that_fails_halfway_leaves_the_last_good_outputs(project: Project) -> None:
    before = published(project.root)
    assert {content for content, _, _ in before.values()} == {b"v1"}
    failing = MAKE.replace("VERSION", "half").replace(
        "  printf '%s' half > {outputs.table.path}/1.csv\n", "  exit 1\n"
    )
    project.repo.commit({"specs/make.yaml": _on_cluster(failing)})
    result = project.recon("apply", ".", "--auto-approve", "--wait")
    assert result.returncode == 1, result.stdout + result.stderr
    assert "failed make: failed: job" in result.stderr, result.stderr
    assert published(project.root) == before
    rows = statuses(project)
    assert (rows["make"]["health"], rows["read"]["sync"]) == ("failed", "current"), rows


def test_a_job_killed_between_two_renames_is_rolled_back_by_the_next_pass(
    project: Project,
) -> None:
    root = project.root
    before = published(root)
    shims = root.parent / "shims"
    count = killing_shim(shims, "mv", '"-T "*', at=3)  # the third rename
    killed = on_path(MAKE.replace("VERSION", "v2"), shims)
    project.repo.commit({"specs/make.yaml": _on_cluster(killed)})
    project.apply("make")
    run = root / "runs" / "make"
    project.wait_for("the killed job's end", lambda: count.exists() and _ended(project, "make"))
    assert (run / "report.txt").read_bytes() == b"v2"  # half published, as killed
    assert not (run / "table").exists()
    project.recon("apply", ".", "make", "--auto-approve")  # rolls back, then settles it
    assert published(root) == before
    assert not any(publishing_dir(run).iterdir())
    rows = statuses(project)
    assert (rows["make"]["health"], rows["read"]["sync"]) == ("failed", "current"), rows


def _ended(project: Project, run: str) -> bool:
    rows = statuses(project)
    return rows[run]["health"] in ("failed", "succeeded", "cancelled")


def test_a_job_killed_once_it_has_published_everything_is_a_success(project: Project) -> None:
    """Slurm says the job failed (SIGKILLed as it removed what it kept aside, after its
    last output was published); recon counts it a success of its spec, with its manifest."""
    root = project.root
    shims = root.parent / "shims"
    # the second removal of what it kept aside: after the last rename
    count = killing_shim(shims, "rm", "*.recon-previous*", at=2)
    killed = on_path(MAKE.replace("VERSION", "v2"), shims)
    project.repo.commit({"specs/make.yaml": _on_cluster(killed)})
    project.apply("make")
    run = root / "runs" / "make"
    project.wait_for("the killed job's end", lambda: count.exists() and _ended(project, "make"))
    assert count.read_text() == "2\n"
    assert {content for content, _, _ in published(root).values()} == {b"v2"}
    project.recon("apply", ".", "make", "--auto-approve")  # settles it
    rows = statuses(project)
    assert (rows["make"]["health"], rows["make"]["sync"]) == ("succeeded", "current"), rows
    manifest = read_manifest(run)
    assert manifest is not None
    state = subprocess.run(
        ["sacct", "-n", "-X", "-P", "-o", "State", "-j", manifest.job_id],
        capture_output=True,
        text=True,
        check=True,
    ).stdout.split()
    assert state and state[0] != "COMPLETED", state  # for Slurm, it did not succeed
    assert not any(published_marker(run, manifest.job_id).parent.iterdir())
