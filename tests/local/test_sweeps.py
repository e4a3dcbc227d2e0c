"""Sweeps on the local backend, in the default suite: the acceptance of issue #16 with real
processes for tasks (tests/integration/test_sweeps.py holds the same on Slurm)."""

from __future__ import annotations

import re
import signal
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from reconciler.scheduler.local import LocalScheduler
from tests.gitrepo import GitRepo
from tests.local.test_engine import cancel_all, local_jobs, recon
from tests.projects import new_project_name


@pytest.fixture
def project(tmp_path: Path) -> GitRepo:
    repo = GitRepo(tmp_path / "repo")
    repo.write({"recon.yaml": f"project: {new_project_name('ls')}\nscheduler: local\n"})
    return repo


WRITES = "echo lr={matrix.lr} seed=$RECON_MATRIX_SEED > {outputs.model.path}"


def sweep(command: str, seeds: str = "[0, 1, 2]", extra: str = "") -> str:
    return (
        "kind: Run\nname: train\nmatrix:\n  lr: [0.1, 0.2]\n"
        f"  seed: {seeds}\n{extra}resources: {{cpus: 1}}\n"
        f"command: '{command}'\noutputs:\n  model: model.txt\n"
    )


AGGREGATE = """\
kind: Run
name: aggregate
resources: {cpus: 1}
inputs:
  models: train.model
command: >-
  cat {inputs.models.paths} > {outputs.table.path};
  cat {inputs.models.list} >> {outputs.table.path}
outputs:
  table: table.txt
"""


def submitted(output: str) -> list[tuple[str, str]]:
    return re.findall(r"^submitted (\S+): job (\S+)$", output, re.MULTILINE)


def task_health(repo: GitRepo) -> dict[str, str]:
    """Every array task of the project's local backend: task id -> health."""
    scheduler = LocalScheduler(repo.root / ".recon", cpus=2)
    seen = scheduler.observe(datetime.now(UTC) - timedelta(days=1))
    return {task.job_id: task.health.value for job in seen.jobs for task in job.tasks().values()}


def apply(repo: GitRepo, *args: str) -> str:
    done = recon(repo, "apply", ".", "--auto-approve", *args)
    assert done.returncode == 0, done.stdout + done.stderr
    return done.stdout


def test_a_2x3_sweep_feeds_an_aggregate_then_one_seed_more_submits_only_its_members(
    project: GitRepo,
) -> None:
    project.commit({"specs/train.yaml": sweep(WRITES), "specs/aggregate.yaml": AGGREGATE})
    try:
        first = dict(submitted(apply(project, "--wait")))
        members = {run: job for run, job in first.items() if run.startswith("train[")}
        assert len(members) == 6
        assert len({job.partition("_")[0] for job in members.values()}) == 1  # one array
        table = (project.root / "runs" / "aggregate" / "table.txt").read_text().splitlines()
        assert sorted(table[:6]) == [f"lr={lr} seed={s}" for lr in (0.1, 0.2) for s in range(3)]
        assert len(table) == 12 and all(Path(path).exists() for path in table[6:])
        assert recon(project, "plan", ".", "--detailed-exitcode").returncode == 0
        status = recon(project, "status", ".").stdout
        assert re.search(r"train \(6 members\)\s+current\s+succeeded", status), status
        crate = recon(project, "export", "ro-crate", ".", "train", "--out", "crate").stdout
        assert "6 runs" in crate, crate  # one action per member

        project.commit({"specs/train.yaml": sweep(WRITES, seeds="[0, 1, 2, 3]")})
        plan = recon(project, "plan", ".").stdout
        assert "+ submit     train          2 of 8 members (1 array): not yet run" in plan, plan
        # The aggregate is queued behind them in the same apply, to read all eight.
        assert "~ may rerun  aggregate      after train (if its output changes)" in plan, plan
        second = submitted(apply(project, "--wait"))
        new = sorted(run for run, _ in second if run.startswith("train["))
        assert new == ["train[lr=0.1,seed=3]", "train[lr=0.2,seed=3]"]
        assert [run for run, _ in second if not run.startswith("train[")] == ["aggregate"]
        table = (project.root / "runs" / "aggregate" / "table.txt").read_text().splitlines()
        assert len(table) == 16  # the aggregate read all eight
        listed = recon(project, "status", ".", "train").stdout
        for run, job in members.items():  # the first six untouched
            assert re.search(rf"^{re.escape(run)}\s+current\s+succeeded\s+{job}\s", listed, re.M)
    finally:
        cancel_all(project)


def test_a_failing_member_is_retried_alone(project: GitRepo) -> None:
    fails = "if [ {matrix.seed} = 2 ] && [ {matrix.lr} = 0.1 ]; then exit 1; fi; " + WRITES
    project.commit({"specs/train.yaml": sweep(fails, extra="retries: 1\n")})
    try:
        done = recon(project, "apply", ".", "--auto-approve", "--wait")
        runs = [run for run, _ in submitted(done.stdout)]
        assert runs.count("train[lr=0.1,seed=2]") == 2, done.stdout  # first try and one retry
        assert len(runs) == 7 and len(set(runs)) == 6
        plan = recon(project, "plan", ".", "--members").stdout
        assert re.search(r"train\[lr=0\.1,seed=2\]\s+failed", plan), plan
    finally:
        cancel_all(project)


def test_removing_a_value_cancels_only_its_members(project: GitRepo) -> None:
    slow = WRITES + "; sleep 30"
    project.commit({"specs/train.yaml": sweep(slow)})
    try:
        first = dict(submitted(apply(project)))
        project.commit({"specs/train.yaml": sweep(slow).replace("lr: [0.1, 0.2]", "lr: [0.2]")})
        pruned = apply(project)
        cancelled = set(re.findall(r"^cancelled job (\S+)$", pruned, re.MULTILINE))
        assert cancelled == {job for run, job in first.items() if "lr=0.1" in run}, pruned
        health = task_health(project)
        # A task cancelled before it started is forgotten, as Slurm forgets it.
        assert all(health.get(job, "cancelled") == "cancelled" for job in cancelled)
        kept = [job for run, job in first.items() if "lr=0.2" in run]
        assert all(health[job] in ("pending", "running") for job in kept), health
    finally:
        cancel_all(project)


def test_a_crash_after_submitting_an_array_is_healed_by_adoption(project: GitRepo) -> None:
    project.commit({"specs/train.yaml": sweep(WRITES + "; sleep 30")})
    try:
        crashed = recon(
            project, "apply", ".", "--auto-approve", env={"RECON_FAULT_INJECT": "after-sbatch"}
        )
        assert crashed.returncode == -signal.SIGKILL, crashed.stdout + crashed.stderr
        healed = apply(project)
        assert healed.count("adopted job") == 6 and not submitted(healed), healed
        assert recon(project, "plan", ".", "--detailed-exitcode").returncode == 0
        assert len(local_jobs(project)) == 1  # one array: never submitted twice
    finally:
        cancel_all(project)
