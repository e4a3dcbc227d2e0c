"""A prune can never empty a project by accident, on the local backend (the dev cluster's
half is tests/integration/test_prune_guard.py)."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.docs import Watched
from tests.gitrepo import GitRepo
from tests.local.test_engine import cancel_all, local_jobs, recon
from tests.projects import new_project_name


def sleeper(name: str) -> str:
    return f"kind: Run\nname: {name}\ncommand: sleep 120\nresources: {{cpus: 1}}\n"


@pytest.fixture
def project(tmp_path: Path) -> GitRepo:
    repo = GitRepo(tmp_path / "repo")
    repo.write({"recon.yaml": f"project: {new_project_name('lg')}\nscheduler: local\n"})
    return repo


def live(project: GitRepo) -> dict[str, str]:
    """run -> job id of the project's queued or running local jobs."""
    return {
        job["run"]: job["id"]
        for job in local_jobs(project)
        if job["health"] in ("pending", "running")
    }


def test_emptying_the_project_is_held_until_confirmed(project: GitRepo, tmp_path: Path) -> None:
    project.commit({"specs/a.yaml": sleeper("a"), "specs/b.yaml": sleeper("b")})
    try:
        assert recon(project, "apply", ".", "--auto-approve").returncode == 0
        before = live(project)
        assert before.keys() == {"a", "b"}
        project.remove("specs/a.yaml", "specs/b.yaml")
        project.commit(message="the specs are gone")

        planned = recon(project, "plan", ".", "--detailed-exitcode")
        assert planned.returncode == 2, planned.stderr  # the cluster does not match
        assert "Held: the commit declares no run or allocation, and the plan's prunes would " in (
            planned.stdout
        )
        refused = recon(project, "apply", ".", "--auto-approve")
        assert refused.returncode == 1, refused.stdout + refused.stderr
        assert "error: refused to apply: the commit declares no run or allocation" in (
            refused.stderr
        )
        assert "cancelled job" not in refused.stdout and live(project) == before

        saved = tmp_path / "confirmed.plan"
        made = recon(project, "plan", ".", "--allow-prune-all", "--out", str(saved))
        assert "confirmed with --allow-prune-all." in made.stdout, made.stdout
        applied = recon(project, "apply", str(saved), "--auto-approve")  # confirmed in the file
        assert applied.returncode == 0, applied.stdout + applied.stderr
        cancelled = {line.split()[0] for line in applied.stdout.split("cancelled job ")[1:]}
        assert cancelled == set(before.values()), applied.stdout
        assert live(project) == {}
    finally:
        cancel_all(project)


def test_a_renamed_run_is_carried_out(project: GitRepo) -> None:
    """The only live job's run renamed: one run out, one run in. The old job is
    cancelled and the new name submitted in one apply, with no confirmation."""
    project.commit({"specs/a.yaml": sleeper("a")})
    try:
        assert recon(project, "apply", ".", "--auto-approve").returncode == 0
        (old,) = live(project).values()
        project.commit({"specs/a.yaml": sleeper("renamed")})
        applied = recon(project, "apply", ".", "--auto-approve")
        assert applied.returncode == 0, applied.stdout + applied.stderr
        assert "Held" not in applied.stdout
        assert f"cancelled job {old}" in applied.stdout
        assert "submitted renamed" in applied.stdout
        assert live(project).keys() == {"renamed"}
    finally:
        cancel_all(project)


def test_within_the_limit_a_prune_needs_no_confirmation(project: GitRepo) -> None:
    project.commit({f"specs/{n}.yaml": sleeper(n) for n in ("a", "b", "c")})
    try:
        env = {"RECON_LOCAL_CPUS": "4"}
        assert recon(project, "apply", ".", "--auto-approve", env=env).returncode == 0
        before = live(project)
        project.remove("specs/a.yaml")
        project.commit(message="drop a")  # one of three: within 50%
        pruned = recon(project, "apply", ".", "--auto-approve", env=env)
        assert pruned.returncode == 0, pruned.stdout + pruned.stderr
        assert f"cancelled job {before['a']}" in pruned.stdout
        assert live(project).keys() == {"b", "c"}
    finally:
        cancel_all(project)


def test_a_watch_carries_out_a_rename_holds_an_emptied_commit_and_recovers(
    project: GitRepo,
) -> None:
    """Under `recon watch`: the only live run renamed is carried out (old job cancelled,
    new name submitted); a commit that declares nothing is held and logged, a second
    such commit logged again; the commit that brings a run back ends the hold."""
    project.commit({"specs/a.yaml": sleeper("a")})
    try:
        with Watched(project.root, ".", "--interval", "1s") as watch:
            watch.until(lambda line: " INFO    submitted " in line and "run=a " in line)
            (old,) = live(project).values()
            renamed = project.commit({"specs/a.yaml": sleeper("renamed")}, message="rename")
            watch.until(lambda line: " pass " in line and f"commit={renamed[:12]}" in line)
            project.remove("specs/a.yaml")
            first = project.commit(message="the specs are gone")
            watch.until(lambda line: " prune-refused " in line and first[:12] in line)
            again = project.commit({"NOTES": "still nothing\n"}, message="notes")
            watch.until(lambda line: " prune-refused " in line and again[:12] in line)
            fixed = project.commit({"specs/a.yaml": sleeper("renamed")}, message="fix")
            watch.until(lambda line: " pass " in line and f"commit={fixed[:12]}" in line)
            assert watch.stop() == 0
        log = "".join(watch.lines)
        assert f"cancelled commit={renamed[:12]} job_id={old}" in log, log
        assert f"submitted commit={renamed[:12]} run=renamed" in log, log
        assert log.count(" prune-refused ") == 2, log
        assert " INFO    cancelled " not in log.split(f"commit={first[:12]}", 1)[1], log
        assert live(project).keys() == {"renamed"}
    finally:
        cancel_all(project)
