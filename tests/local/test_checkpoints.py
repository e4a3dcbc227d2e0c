"""A checkpointing run on the local backend, end to end: its time limit's warning comes,
the command saves its progress and exits, and recon submits the next job, which resumes,
until the work is done: one output, written once, one job alive at any moment, no attempt
counted as a failure. The same run without a checkpoint times out until its timeout
budget is spent, and says so."""

from __future__ import annotations

import itertools
import json
import sqlite3
from collections.abc import Iterator
from pathlib import Path

import pytest

from reconciler.scheduler.local import LocalScheduler
from reconciler.state.paths import JOURNAL_FILE
from tests.gitrepo import GitRepo
from tests.local.serving import recon
from tests.local.test_cascade import jobs, statuses
from tests.projects import new_project_name

# 80 steps of 0.1 s (8 s of work) resumed from the checkpoint's count; a 5 s time limit
# warned 2 s before its end leaves about 3 s of work a job: 3 jobs or more.
COUNT = """kind: Run
name: count
resources: {cpus: 1, time: 5s}
command: |
  n=$(cat {checkpoint.path}/n 2>/dev/null || echo 0)
  echo "$SLURM_JOB_ID" >> {checkpoint.path}/jobs
  trap 'echo $n > "$RECON_CHECKPOINT_DIR/n"; exit 3' USR1 TERM
  while [ "$n" -lt 80 ]; do n=$((n + 1)); sleep 0.1 || true; done
  printf '%s' "$n" >> {outputs.report.path}
outputs:
  report: report.txt
"""
# The same work, started over by each job.
PLAIN = """kind: Run
name: count
resources: {cpus: 1, time: 5s}
command: |
  n=0
  while [ "$n" -lt 80 ]; do n=$((n + 1)); sleep 0.1; done
  printf '%s' "$n" >> {outputs.report.path}
outputs:
  report: report.txt
retries: {timeout: 1}
"""
CHECKPOINT = "checkpoint: {path: ckpt/, signal: USR1, before_end: 2s, max_requeues: 10}\n"


@pytest.fixture
def repo(tmp_path: Path) -> Iterator[GitRepo]:
    repo = GitRepo(tmp_path / "repo")
    yield repo
    if not (repo.root / ".recon" / "local" / "jobs").is_dir():
        return
    backend = LocalScheduler(repo.root / ".recon")
    for job_id, job in jobs(repo.root).items():  # whatever a failed test left queued
        if "ended" not in job:
            backend.cancel(str(job_id))


def test_a_run_that_outlives_its_time_limit_resumes_until_it_finishes(repo: GitRepo) -> None:
    repo.commit(
        {
            "recon.yaml": f"project: {new_project_name('ckpt')}\nscheduler: local\n",
            "specs/count.yaml": COUNT + CHECKPOINT,
        }
    )
    root = repo.root
    waited = recon(root, "apply", ".", "--auto-approve", "--wait", timeout=240)
    assert waited.returncode == 0, waited.stdout + waited.stderr
    run = root / "runs" / "count"
    assert (run / "report.txt").read_text() == "80"  # written once: appended, it says so
    ran = (run / "ckpt" / "jobs").read_text().split()
    assert len(ran) >= 3, ran
    # One job alive at any moment: each started after the one before ended.
    made = sorted(jobs(root).items())
    assert [str(job_id) for job_id, _ in made] == ran
    for (_, before), (_, after) in itertools.pairwise(made):
        assert before["ended"] <= after["started"], made
    row = statuses(root)["count"]
    assert (row["health"], row["sync"]) == ("succeeded", "current"), row
    # Every attempt before the last saved its checkpoint: a requeue, no failure.
    with_checkpoint = _endings(root)
    assert with_checkpoint[:-1] == ["checkpointed"] * (len(ran) - 1), with_checkpoint
    assert with_checkpoint[-1] is None
    assert "requeue" in waited.stdout, waited.stdout
    manifest = json.loads((run / ".recon-run" / "manifest.json").read_text())
    attempts = manifest.get("attempts")
    assert [a["job_id"] for a in attempts] == ran, manifest
    assert [a["ending"] for a in attempts] == [*(["checkpointed"] * (len(ran) - 1)), None]
    assert all(a["elapsed_s"] is not None for a in attempts)
    plan = recon(root, "plan", ".")
    assert "No changes" in plan.stdout, plan.stdout


def test_without_a_checkpoint_the_timeout_budget_is_spent(repo: GitRepo) -> None:
    repo.commit(
        {
            "recon.yaml": f"project: {new_project_name('nockpt')}\nscheduler: local\n",
            "specs/count.yaml": PLAIN,
        }
    )
    root = repo.root
    waited = recon(root, "apply", ".", "--auto-approve", "--wait", timeout=240)
    assert waited.returncode != 0
    assert not (root / "runs" / "count" / "report.txt").exists()
    row = statuses(root)["count"]
    assert row["health"] == "failed", row
    assert "no timeout retries left (retries.timeout: 1)" in row["reason"], row
    assert _endings(root) == ["timeout", "timeout"]


def _endings(root: Path) -> list[str | None]:
    with sqlite3.connect(root / ".recon" / JOURNAL_FILE) as db:
        rows = db.execute("SELECT ending FROM submissions ORDER BY CAST(job_id AS INTEGER)")
        return [ending for (ending,) in rows]
