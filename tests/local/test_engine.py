"""The engine's whole pipeline on the local backend, in the default suite: a real git repo,
a real journal and real processes (no Slurm needed), driven through the `recon` command.

Crash safety is proven here as on the cluster: SIGKILL between the submission and the
journal write, then an apply that adopts the job instead of submitting a second one;
`apply --wait` follows a small DAG to the end, settling each job (outputs checked,
manifests written) on the way.
"""

from __future__ import annotations

import hashlib
import json
import os
import signal
import subprocess
import sys
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from reconciler.scheduler.local import LocalScheduler
from tests.gitrepo import GitRepo
from tests.projects import new_project_name

SPEC = """\
kind: Run
name: {name}
command: '{command}'
resources: {{cpus: 1}}
{inputs}outputs:
  out: out.txt
"""


@pytest.fixture
def project(tmp_path: Path) -> GitRepo:
    repo = GitRepo(tmp_path / "repo")
    repo.write({"recon.yaml": f"project: {new_project_name('le')}\nscheduler: local\n"})
    return repo


def recon(
    repo: GitRepo, *args: str, env: dict[str, str] | None = None
) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "reconciler", *args],
        cwd=repo.root, capture_output=True, text=True, timeout=120,
        env={"PATH": "/usr/bin:/bin", "HOME": str(repo.root), "RECON_LOCAL_CPUS": "2",
             # A worktree's tests run its own code, not the installed package's.
             "PYTHONPATH": os.environ.get("PYTHONPATH", ""), **(env or {})},
    )  # fmt: skip


def local_jobs(repo: GitRepo) -> list[dict[str, str]]:
    """Every job of the project's local backend: id, run, health."""
    scheduler = LocalScheduler(repo.root / ".recon", cpus=2)
    seen = scheduler.observe(_long_ago())
    return [
        {"id": job.job_id, "run": job.tag.name, "health": job.health.value} for job in seen.jobs
    ]


def _long_ago() -> datetime:
    return datetime.now(UTC) - timedelta(days=1)


def cancel_all(repo: GitRepo) -> None:
    scheduler = LocalScheduler(repo.root / ".recon", cpus=2)
    for job in local_jobs(repo):
        scheduler.cancel(job["id"])


def test_a_crash_between_submission_and_journal_is_healed_by_adoption(project: GitRepo) -> None:
    project.commit({"specs/a.yaml": SPEC.format(name="a", command="sleep 30", inputs="")})
    try:
        crashed = recon(project, "apply", ".", "--auto-approve",
                        env={"RECON_FAULT_INJECT": "after-sbatch"})  # fmt: skip
        assert crashed.returncode == -signal.SIGKILL, crashed.stdout + crashed.stderr
        assert [job["run"] for job in local_jobs(project)] == ["a"]
        planned = recon(project, "plan", ".")
        assert "= adopt" in planned.stdout and "+ submit" not in planned.stdout, planned.stdout
        healed = recon(project, "apply", ".", "--auto-approve")
        assert "adopted job" in healed.stdout and "submitted a" not in healed.stdout
        again = recon(project, "plan", ".", "--detailed-exitcode")
        assert again.returncode == 0, again.stdout
        assert [job["run"] for job in local_jobs(project)] == ["a"]  # one job, ever
    finally:
        cancel_all(project)


def test_apply_wait_follows_a_dag_to_the_end_and_settles_each_job(project: GitRepo) -> None:
    project.commit(
        {
            "specs/a.yaml": SPEC.format(name="a", command="echo made > {outputs.out.path}",
                                        inputs=""),
            "specs/b.yaml": SPEC.format(
                name="b", command="cat {inputs.src.path} > {outputs.out.path}",
                inputs="inputs:\n  src: a.out\n",
            ),
        }
    )  # fmt: skip
    started = time.monotonic()
    try:
        done = recon(project, "apply", ".", "--auto-approve", "--wait")
        assert done.returncode == 0, done.stdout + done.stderr
        assert "All runs done." in done.stdout
    finally:
        cancel_all(project)
    assert time.monotonic() - started < 60
    assert (project.root / "runs/b/out.txt").read_text() == "made\n"
    for run in ("a", "b"):
        manifest = json.loads((project.root / f"runs/{run}/.recon-run/manifest.json").read_text())
        assert manifest["health"] == "succeeded"
        # The manifest names the bytes the job ran: the script the local backend was given.
        submitted = project.root / ".recon/local/jobs" / manifest["job_id"] / "script"
        assert manifest["script_sha256"] == hashlib.sha256(submitted.read_bytes()).hexdigest()
    status = json.loads(recon(project, "status", ".", "--format", "json").stdout)
    assert {row["name"]: row["sync"] for row in status} == {"a": "current", "b": "current"}
