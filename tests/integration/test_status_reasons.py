"""`recon status` on the real cluster: a held job shows Slurm's own reason."""

from __future__ import annotations

import json
import subprocess

import pytest

from tests.integration.harness import Project, run_spec

pytestmark = pytest.mark.slurm


def test_a_held_job_shows_why_it_waits(project: Project) -> None:
    # --begin in an hour keeps the job pending however idle the cluster is.
    later = "  sbatch_extra: ['--begin=now+3600']\n"
    project.repo.commit({"specs/a.yaml": run_spec("a", "true", extra=later)})
    project.apply()
    (job,) = project.job_of("a")
    subprocess.run(["scontrol", "hold", job["id"]], check=True, capture_output=True)

    def reason() -> str | None:
        shown = project.recon("status", ".", "--format", "json")
        assert shown.returncode == 0, shown.stderr
        (row,) = json.loads(shown.stdout)
        assert row["health"] == "pending"
        waiting: str | None = row["waiting_for"]
        return waiting

    project.wait_for("squeue to show the hold", lambda: reason() in ("JobHeldAdmin", "JobHeldUser"))
    text = project.recon("status", ".", env={"COLUMNS": "100"})
    assert f"pending, held ({reason()})" in text.stdout, text.stdout
