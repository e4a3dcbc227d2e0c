"""Retry budgets on the real cluster: a job Slurm ends TIMEOUT draws from the timeout
budget, not from `failure`, end to end through `recon apply`.

Slurm's smallest time limit is a minute and slurmctld looks for jobs past theirs about
every 30 s, so this takes one to two minutes: one test.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from typing import Any

import pytest

from tests.integration.harness import Project

pytestmark = pytest.mark.slurm

# The first attempt leaves a mark in the run's folder (which outlives its attempts) and
# sleeps past its one-minute limit; the retry finds the mark and succeeds at once.
SPEC = """\
kind: Run
name: slow
command: 'if [ -e tried ]; then echo done > {outputs.out.path}; else touch tried; sleep 120; fi'
resources:
  cpus: 1
  memory: 100MiB
  time: "00:01:00"
retries: {failure: 0, timeout: 1}
outputs:
  out: out.txt
"""


def status_row(project: Project) -> dict[str, Any]:
    shown = project.recon("status", ".", "--format", "json")
    assert shown.returncode == 0, shown.stdout + shown.stderr
    (row,) = json.loads(shown.stdout)
    return dict(row)


def test_a_timeout_draws_from_the_timeout_budget_while_failure_is_0(project: Project) -> None:
    project.repo.commit({"specs/slow.yaml": SPEC})
    project.apply()
    (first,) = project.job_of("slow")

    # Up to the limit, then slurmctld's next look (about 30 s), then accounting's lag.
    deadline = time.monotonic() + 240
    row = status_row(project)
    while row["retry_budget"] is None:
        assert time.monotonic() < deadline, f"job {first['id']} did not time out: {row}"
        time.sleep(3)
        row = status_row(project)
    # Judged from the job's Slurm state before the journal settled it.
    assert row["retry_budget"] == {
        "kind": "timeout", "shared": False, "allowed": 1, "failed": 1
    }  # fmt: skip
    assert row["next"] == "retry" and row["cause"] == "retry"
    reason = row["reason"]
    assert reason.startswith(f"retry: attempt 2: job {first['id']} timed out after 00:01:"), reason
    assert reason.endswith("; 0 of 1 timeout retry left"), reason

    waited = subprocess.run(
        [sys.executable, "-m", "reconciler", "apply", ".", "--auto-approve", "--wait"],
        cwd=project.root,
        env={**os.environ, "COLUMNS": "200"},
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert waited.returncode == 0, waited.stdout + waited.stderr
    assert "0 of 1 timeout retry left" in waited.stdout, waited.stdout
    assert (project.root / "runs/slow/out.txt").read_text() == "done\n"
    states = sorted((int(job["id"]), job["state"]) for job in project.job_of("slow"))
    assert [state for _, state in states] == ["TIMEOUT", "COMPLETED"], states
    assert states[0][0] == int(first["id"])
    done = status_row(project)
    assert (done["sync"], done["health"], done["retry_budget"]) == ("current", "succeeded", None)
