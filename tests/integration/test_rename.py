"""A run renamed with `renamed_from` while its job runs, on the real dev cluster: the job
is adopted under the new name (never cancelled, never submitted again), writes its
output through the old folder's path, and ends current under the new name. The local
backend's half is tests/local/test_rename.py."""

from __future__ import annotations

import pytest

from tests.integration.harness import Project, run_spec

pytestmark = pytest.mark.slurm

COMMAND = "sleep 15; echo made > {outputs.out.path}"


def test_a_renamed_run_whose_job_runs_is_adopted_and_ends_current(project: Project) -> None:
    project.repo.commit({"specs/a.yaml": run_spec("prep", COMMAND)}, message="prep")
    project.apply()
    project.wait_for(
        "prep's job to run",
        lambda: [job["state"] for job in project.job_of("prep")] == ["RUNNING"],
    )
    (job,) = project.job_of("prep")
    renamed = run_spec("prepare", COMMAND, extra="renamed_from: prep\n")
    project.repo.commit({"specs/a.yaml": renamed}, message="rename prep to prepare")

    planned = project.recon("plan", ".")
    assert planned.returncode == 0, planned.stderr
    assert "prep -> prepare: records, outputs and manifest carried over, no job; its live " in (
        planned.stdout
    )
    assert "Plan: 0 to submit, 0 to replace, 0 to cancel, 1 to move." in planned.stdout

    moved = project.apply()
    assert "moved prep -> prepare" in moved.stdout, moved.stdout
    assert "\nsubmitted " not in moved.stdout and "\ncancelled " not in moved.stdout
    assert [j["state"] for j in project.jobs()] == ["RUNNING"]  # the same job, still running

    waited = project.apply("--wait")
    assert "\nsubmitted " not in waited.stdout, waited.stdout
    assert [(j["id"], j["state"]) for j in project.jobs()] == [(job["id"], "COMPLETED")]
    assert (project.root / "runs/prepare/out.txt").read_text() == "made\n"
    status = project.recon("status", ".")
    assert f"prepare  current  succeeded  {job['id']}" in status.stdout, status.stdout
    again = project.recon("plan", ".", "--detailed-exitcode")
    assert again.returncode == 0, again.stdout


ALLOCATION = (
    "kind: Allocation\nname: {name}\n{renamed}resources:\n  partition: cpu\n  cpus: 1\n"
    "  memory: 200MiB\ntime_limit: 10m\nmin_remaining: 1m\n"
)
STEP = (
    "kind: Run\nname: inside\nallocation: {name}\ncommand: 'echo in > {{outputs.out.path}}'\n"
    "resources:\n  cpus: 1\n  memory: 100MiB\n  time: 2m\noutputs:\n  out: out.txt\n"
)


def test_a_renamed_allocation_keeps_its_held_job_and_runs_start_in_it(project: Project) -> None:
    project.repo.commit({"specs/w.yaml": ALLOCATION.format(name="pool", renamed="")})
    project.apply()
    project.wait_for(
        "the allocation to run", lambda: [j["state"] for j in project.job_of("pool")] == ["RUNNING"]
    )
    (job,) = project.job_of("pool")
    renamed = ALLOCATION.format(name="warm-pool", renamed="renamed_from: pool\n")
    project.repo.commit({"specs/w.yaml": renamed, "specs/r.yaml": STEP.format(name="warm-pool")})

    planned = project.recon("plan", ".")
    assert planned.returncode == 0, planned.stderr
    assert "pool -> warm-pool: records and setups carried over; its held job adopted, not " in (
        planned.stdout
    )
    moved = project.apply()
    assert "moved pool -> warm-pool" in moved.stdout, moved.stdout
    assert "\ncancelled " not in moved.stdout and "submitted warm-pool" not in moved.stdout
    waited = project.apply("--wait")
    assert "submitted warm-pool" not in waited.stdout, waited.stdout
    assert (project.root / "runs/inside/out.txt").read_text() == "in\n"
    # the one allocation job, still held: the step ran in it
    assert [(j["id"], j["state"]) for j in project.jobs() if j["run"] == "pool"] == [
        (job["id"], "RUNNING")
    ]
    status = project.recon("status", ".")
    assert "inside" in status.stdout and "current" in status.stdout, status.stdout
