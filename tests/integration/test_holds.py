"""Pause by commit and the GPU-hour budget on the real dev cluster, under `recon watch`
(the local backend's half is tests/local/test_holds.py): a suspended or held pass submits
and cancels nothing, a running job goes on, and the commit that fixes it goes on. Each
test has a project of its own, whose jobs the harness cancels at the end."""

from __future__ import annotations

import time

import pytest

from tests.integration.harness import Project, run_spec
from tests.integration.test_watch import Watch

pytestmark = pytest.mark.slurm


def live(project: Project) -> set[str]:
    return {job["id"] for job in project.jobs() if job["state"] in ("RUNNING", "PENDING")}


def settings(project: Project, extra: str) -> dict[str, str]:
    return {
        "recon.yaml": f"project: {project.name}\ndefaults:\n  partition: cpu\n  time: 10\n" + extra
    }


def test_a_suspended_project_submits_and_cancels_nothing_until_resumed(project: Project) -> None:
    project.repo.commit({"specs/s.yaml": run_spec("s", "sleep 300")}, message="one sleeper")
    project.apply()
    project.wait_for("the job to run", lambda: len(live(project)) == 1)
    (old,) = live(project)
    # Suspended in the same commit that changes `s` (replaced at once: `update: replace`)
    # and adds `n`.
    suspended = project.repo.commit(
        {
            **settings(project, "suspend: true\n"),
            "specs/s.yaml": run_spec("s", "sleep 301", extra="update: replace\n"),
            "specs/n.yaml": run_spec("n", "true"),
        }
    )
    waited = project.recon("apply", ".", "--auto-approve", "--wait")
    assert waited.returncode == 1, waited.stdout + waited.stderr
    assert "error: not waiting: suspended: n, s (`suspend: true`" in waited.stderr
    watch = Watch(project)
    try:
        said = watch.wait_for("suspended", lambda line: line["commit"] == suspended)
        for _ in range(2):
            watch.wait_for("pass", lambda line: line["commit"] == suspended)
        assert live(project) == {old}
        status = project.recon("status", ".")
        assert status.stdout.splitlines()[1].startswith("SUSPENDED: n, s"), status.stdout
        resumed = project.repo.commit(settings(project, ""), message="resume")
        watch.wait_for("pass", lambda line: line["commit"] == resumed)
    finally:
        watch.stop()
    assert said["message"].startswith("suspended: n, s (`suspend: true` in recon.yaml")
    before = [line for line in watch.seen if line["commit"] == suspended]
    assert not [line for line in before if line["event"] in ("submitted", "cancelled")]
    done = {(line["event"], line.get("run") or line.get("job_id")) for line in watch.seen}
    assert {("cancelled", old), ("submitted", "s"), ("submitted", "n")} <= done, watch.seen


def gpu_run(name: str) -> str:
    return (
        f"kind: Run\nname: {name}\ncommand: 'true'\nresources:\n  partition: gpu\n"
        "  gpus: 1\n  cpus: 1\n  memory: 100MiB\n  time: 120\noutputs:\n  out: out.txt\n"
    )


def test_a_watch_holds_a_commit_over_budget_and_goes_on_after_the_fix(
    project: Project,
) -> None:
    """Two hours of one GPU never run (its time limit) against a budget of one: held,
    nothing submitted, `--wait` ends saying why; the commit that raises it goes on."""
    project.repo.commit(
        {**settings(project, "budget: {gpu_hours: 1}\n"), "specs/g.yaml": gpu_run("g")}
    )
    waited = project.recon("apply", ".", "--auto-approve", "--wait")
    assert waited.returncode == 1, waited.stdout + waited.stderr
    assert (
        "error: refused to apply: the plan's 1 GPU run (g) is forecast to take 2 GPU-hours: "
        "more than budget 1 GPU-hours per commit"
    ) in waited.stderr
    watch = Watch(project)
    try:
        refused = watch.wait_for("budget-refused")
        watch.wait_for("pass")
        watch.wait_for("pass")
        time.sleep(1)
        assert live(project) == set()
        status = project.recon("status", ".")
        assert status.stdout.splitlines()[1].startswith("HELD: the plan's 1 GPU run (g)")
        fixed = project.repo.commit(settings(project, "budget: {gpu_hours: 3}\n"))
        watch.wait_for("submitted", lambda line: line["run"] == "g" and line["commit"] == fixed)
    finally:
        watch.stop()
    assert "`recon apply --allow-over-budget`" in refused["message"]
    assert [line["event"] for line in watch.seen].count("budget-refused") == 1
