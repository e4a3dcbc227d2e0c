"""Two deployments of one project on the real dev cluster: each acts on its own jobs only.

A deployment is one project in one place. Two clones of one repo, applied one after the
other or at the same moment, each get their own jobs; neither adopts, prunes or tears
down the other's, and each plan names the other's live jobs in one note. A clone whose
journal is lost adopts its own jobs again, and only those.
"""

from __future__ import annotations

import subprocess
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

from tests.gitrepo import GitRepo
from tests.integration.harness import Project, run_spec
from tests.projects import new_project_name

pytestmark = pytest.mark.slurm

RUNS = 4


@pytest.fixture
def clones(tmp_path: Path) -> Iterator[tuple[Project, Project]]:
    """Two clones of one repo: one project name, `RUNS` sleeping runs, prune on."""
    name = new_project_name("dp")
    origin = GitRepo(tmp_path / "a")
    specs = {f"specs/r{i}.yaml": run_spec(f"r{i}", "sleep 120") for i in range(RUNS)}
    origin.commit(
        {"recon.yaml": f"project: {name}\nprune: true\ndefaults:\n  partition: cpu\n  time: 10\n"}
        | specs
    )
    subprocess.run(["git", "clone", "-q", str(origin.root), str(tmp_path / "b")], check=True)
    first, second = Project(origin, name), Project(GitRepo(tmp_path / "b"), name)
    yield first, second
    first.cancel_all()  # by the project's tag: both clones' jobs


def by_deployment(project: Project) -> dict[str, list[str]]:
    """Run names of the project's live jobs, by the deployment that submitted them."""
    found: dict[str, list[str]] = {}
    for job in project.jobs():
        if job["state"].split()[0] in ("PENDING", "RUNNING"):
            found.setdefault(job["deployment"], []).append(job["run"])
    return {key: sorted(runs) for key, runs in found.items()}


def test_two_clones_applied_one_after_the_other_each_get_their_own_jobs(
    clones: tuple[Project, Project],
) -> None:
    first, second = clones
    first.apply()
    planned = second.recon("plan", ".")
    assert planned.returncode == 0, planned.stderr
    assert "= adopt" not in planned.stdout
    assert f"{RUNS} live jobs of project {first.name} belong to another deployment" in (
        planned.stdout
    ), planned.stdout
    assert str(first.root.resolve()) in planned.stdout  # where they run from

    applied = second.apply()
    assert "adopted job" not in applied.stdout and applied.stdout.count("submitted r") == RUNS
    owners = by_deployment(first)
    expected = sorted(f"r{i}" for i in range(RUNS))
    assert len(owners) == 2 and all(runs == expected for runs in owners.values()), owners

    # The second clone drops a run and prunes: only its own job of that run goes.
    second.repo.remove("specs/r0.yaml")
    second.repo.commit()
    pruned = second.apply()
    assert pruned.stdout.count("cancelled job") == 1, pruned.stdout
    second.wait_for("the prune", lambda: sorted(map(len, by_deployment(first).values())) == [
        RUNS - 1, RUNS
    ])  # fmt: skip
    assert first.recon("plan", ".", "--detailed-exitcode").returncode == 0


def test_two_clones_applied_at_the_same_moment_each_get_one_job_per_run(
    clones: tuple[Project, Project],
) -> None:
    first = clones[0]
    with ThreadPoolExecutor(2) as pool:
        results = list(pool.map(lambda p: p.recon("apply", ".", "--auto-approve"), clones))
    assert all(r.returncode == 0 for r in results), [r.stderr for r in results]
    owners = by_deployment(first)
    expected = sorted(f"r{i}" for i in range(RUNS))
    assert len(owners) == 2 and all(runs == expected for runs in owners.values()), owners
    for clone in clones:
        again = clone.recon("plan", ".", "--detailed-exitcode")
        assert again.returncode == 0, again.stdout


def test_a_clone_that_lost_its_journal_adopts_its_own_jobs_only(
    clones: tuple[Project, Project],
) -> None:
    first, second = clones
    first.apply()
    second.apply()
    for journal in (second.root / ".recon").glob("journal.sqlite*"):
        journal.unlink()  # the journal only: its queued jobs still need their snapshots
    adopted = second.apply()
    assert adopted.stdout.count("adopted job") == RUNS, adopted.stdout
    assert "submitted r" not in adopted.stdout and "cancelled job" not in adopted.stdout
    assert second.recon("plan", ".", "--detailed-exitcode").returncode == 0
    owners = by_deployment(first)
    assert sorted(map(len, owners.values())) == [RUNS, RUNS], owners
