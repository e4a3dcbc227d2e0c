"""Resources raised on retry on the real cluster (memory enforced by cgroup: docs/cli.md):
a run that allocates more memory than it asked for ends OUT_OF_MEMORY, is retried with
twice the memory and succeeds; plan and status show the raised value, the spec hash is
the same for both jobs, and a later plan says "No changes"."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time

import pytest

from tests.integration.harness import Project

pytestmark = pytest.mark.slurm

# 300 MiB written (so resident) under a 200 MiB limit; 400 MiB holds it.
HUNGRY = """\
kind: Run
name: hungry
command: >-
  python3 -c "import time; b = b'x' * (300 << 20); time.sleep(2)"
  && echo ok > {outputs.out.path}
resources:
  cpus: 1
  memory: 200MiB
retries: {out_of_memory: 1}
on_oom: {memory: x2, max: 1GiB}
outputs:
  out: out.txt
"""


def test_out_of_memory_is_retried_with_twice_the_memory(project: Project) -> None:
    project.repo.commit({"specs/hungry.yaml": HUNGRY})
    project.apply()
    deadline = time.monotonic() + 180
    planned = project.recon("plan", ".")
    while "retry with memory" not in planned.stdout:
        assert time.monotonic() < deadline, planned.stdout + str(project.jobs())
        time.sleep(3)
        planned = project.recon("plan", ".")
    assert "retry with memory 400MiB (x2 after out of memory)" in planned.stdout, planned.stdout
    waited = subprocess.run(
        [sys.executable, "-m", "reconciler", "apply", ".", "--auto-approve", "--wait"],
        cwd=project.root, env={**os.environ, "COLUMNS": "200"},
        capture_output=True, text=True, timeout=300,
    )  # fmt: skip
    assert waited.returncode == 0, waited.stdout + waited.stderr
    assert (project.root / "runs/hungry/out.txt").read_text() == "ok\n"
    # sacct records a job's end some seconds after squeue drops it (more under load).
    jobs: list[dict[str, str]] = []

    def both_ended() -> bool:
        jobs[:] = sorted(project.job_of("hungry"), key=lambda job: int(job["id"]))
        return [job["state"] for job in jobs] == ["OUT_OF_MEMORY", "COMPLETED"]

    project.wait_for("sacct to record both jobs' ends", both_ended)
    assert len({job["hash"] for job in jobs}) == 1, jobs  # the spec hash did not change
    asked = subprocess.run(
        ["sacct", "-n", "-X", "-P", "-j", jobs[1]["id"], "-o", "ReqMem"],
        capture_output=True, text=True, check=True,
    ).stdout.strip()  # fmt: skip
    assert asked == "400M", asked
    shown = project.recon("status", ".", "--format", "json")
    (row,) = json.loads(shown.stdout)
    assert (row["sync"], row["health"], row["how"]) == (
        "current", "succeeded", "with memory 400MiB, raised"
    ), row  # fmt: skip
    again = project.recon("plan", ".", "--detailed-exitcode")
    assert again.returncode == 0 and "No changes" in again.stdout, again.stdout
