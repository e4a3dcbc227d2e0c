"""A submission Slurm refuses ends `recon apply --wait` with the reason, and the run shows
as refused until the commit changes (on the real dev cluster: sbatch's own refusal)."""

from __future__ import annotations

import pytest

from tests.integration.harness import Project, run_spec

pytestmark = pytest.mark.slurm


def test_a_run_sbatch_refuses_ends_the_wait_and_shows_refused(project: Project) -> None:
    spec = run_spec("booked", "echo hi > {outputs.out.path}",
                    extra="  sbatch_extra: [--reservation=nosuch]\n")  # fmt: skip
    project.repo.commit({"specs/booked.yaml": spec})
    waited = project.recon("apply", ".", "--auto-approve", "--wait")
    assert waited.returncode == 1, waited.stdout + waited.stderr
    assert "refused booked:" in waited.stderr, waited.stderr
    assert "blocked booked: refused at submission:" in waited.stderr, waited.stderr
    assert "Requested reservation is invalid" in waited.stderr, waited.stderr
    shown = project.recon("plan", ".")
    assert shown.returncode == 0, shown.stdout + shown.stderr
    assert "blocked" in shown.stdout and "refused at submission" in shown.stdout, shown.stdout
    assert project.jobs() == []  # nothing was ever made
    # Fixed by a commit: submitted as usual.
    project.repo.commit({"specs/booked.yaml": run_spec("booked", "echo hi > {outputs.out.path}")})
    project.apply("--wait")
    assert [job["run"] for job in project.jobs()] == ["booked"]
