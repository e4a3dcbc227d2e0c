"""Faults a controller must survive, on the real dev cluster: accounting that lags behind
slurmctld, a controller that forgot jobs and handed their ids out again, a job whose
comment someone changed. None of these tests stops or kills a daemon (the trial harness,
bench/trials.py, does that, by command); each fault is made with ordinary Slurm commands
or at recon's own runner seam."""

from __future__ import annotations

import getpass
import json
import subprocess
from collections.abc import Mapping, Sequence
from datetime import UTC, datetime, timedelta

import pytest

from reconciler.engine.reconcile import Request, reconcile_once
from reconciler.scheduler.slurm.adapter import SlurmScheduler
from reconciler.scheduler.slurm.runner import run
from reconciler.scheduler.states import Health
from reconciler.scheduler.tag import Tag
from reconciler.state.journal import Journal
from tests.integration.harness import Project, run_spec

pytestmark = pytest.mark.slurm

HELD = "  sbatch_extra: ['--begin=now+3600']\n"  # queued for an hour: never runs here


def _journal(project: Project) -> Journal:
    return Journal(project.root / ".recon" / "journal.sqlite")


def _tag_of(project: Project, job: dict[str, str]) -> str:
    return Tag(
        project=project.name, deployment=job["deployment"], kind="run", name=job["run"],
        spec_hash=job["hash"],
    ).format()  # fmt: skip


def _scontrol(*args: str) -> None:
    subprocess.run(["scontrol", *args], capture_output=True, text=True, check=True)


class LaggingAccounting:
    """The real runner, except that sacct keeps reporting the batch steps it printed while
    the job ran: what sacct does for seconds after slurmdbd restarts, while squeue and the
    job's own row have moved on."""

    def __init__(self) -> None:
        self.steps_while_running: list[str] = []

    def capture(self) -> None:
        listing = self._sacct()
        self.steps_while_running = [line for line in listing if ".batch|" in line]

    def __call__(
        self, argv: Sequence[str], stdin: str | None = None, env: Mapping[str, str] | None = None
    ) -> subprocess.CompletedProcess[str]:
        result = run(argv, stdin, env)
        if argv[0] != "sacct" or result.returncode != 0:
            return result
        stale = {line.split("|", 1)[0]: line for line in self.steps_while_running}
        lines = [stale.get(line.split("|", 1)[0], line) for line in result.stdout.splitlines()]
        return subprocess.CompletedProcess(argv, 0, "\n".join(lines) + "\n", result.stderr)

    @staticmethod
    def _sacct() -> list[str]:
        from reconciler.scheduler.slurm import argv as slurm_argv
        from reconciler.scheduler.slurm.localtime import SystemLocalTime

        since = datetime.now(UTC).replace(hour=0, minute=0, second=0)
        result = run(slurm_argv.sacct(since, SystemLocalTime(), getpass.getuser()))
        return result.stdout.splitlines()


def test_a_finished_job_whose_batch_step_accounting_still_shows_running_is_not_settled(
    project: Project,
) -> None:
    project.repo.commit({"specs/a.yaml": run_spec("a", "sleep 15; echo done > {outputs.out.path}")})
    project.apply()
    (job,) = project.job_of("a")
    lagging = LaggingAccounting()
    batch = f"{job['id']}.batch|{job['id']}.batch|RUNNING|"  # this job's, not another's

    def batch_step_running() -> bool:
        lagging.capture()
        return any(s.startswith(batch) for s in lagging.steps_while_running)

    project.wait_for("the batch step to run", batch_step_running)
    project.wait_for("the job to end", lambda: _state_of(project, "a") == "COMPLETED")

    scheduler = SlurmScheduler(lagging)
    seen = [j.rows for j in scheduler.observe(datetime.now(UTC) - timedelta(hours=1)).jobs]
    outcome = reconcile_once(Request(project.root), scheduler=scheduler)  # no traceback
    (action,) = [a for a in outcome.plan.actions if a.target == "a"]
    # Not final until accounting agrees.
    assert action.outcome == "inflight", (action.reason, lagging.steps_while_running, seen)
    with _journal(project) as journal:
        (record,) = journal.records(project.name)
        assert record.final_health is None

    reconcile_once(Request(project.root), scheduler=SlurmScheduler())
    with _journal(project) as journal:
        (record,) = journal.records(project.name)
        assert (record.job_id, record.final_health) == (job["id"], Health.SUCCEEDED)


def test_runs_waiting_for_jobs_slurm_does_not_show_are_no_match(project: Project) -> None:
    project.repo.commit(
        {"specs/a.yaml": run_spec("a", "true", extra=HELD), "specs/b.yaml": run_spec("b", "true")}
    )
    project.apply("a")
    planned = project.recon("plan", ".", "--format", "json")
    (b,) = [a for a in json.loads(planned.stdout)["actions"] if a["target"] == "b"]
    now = datetime.now(UTC)
    with _journal(project) as journal:
        # A job slurmctld accepted, then lost in a crash: the journal has it, Slurm does not.
        intent = journal.record_intent(project.name, "run", "b", b["spec_hash"], None, {}, now)
        journal.record_submitted(intent, "99999990", now)
    result = project.recon("plan", ".", "--detailed-exitcode")
    assert result.returncode == 2, result.stdout + result.stderr
    assert "job 99999990 was submitted but the scheduler does not show it yet" in result.stdout
    assert result.stdout.rstrip().endswith(
        "No changes to the cluster; 1 run waits for jobs the scheduler does not show yet."
    )


def test_a_journaled_id_slurm_shows_with_another_runs_tag_is_resubmitted_at_once(
    project: Project,
) -> None:
    project.repo.commit(
        {
            "specs/a.yaml": run_spec("a", "true", extra=HELD),
            "specs/b.yaml": run_spec("b", "true", extra=HELD),
        }
    )
    project.apply()
    (a_job,) = project.job_of("a")
    (b_job,) = project.job_of("b")
    # What a restarted slurmctld did: a's job is gone and its id now holds a job of b's.
    _scontrol("update", f"jobid={a_job['id']}", f"comment={_tag_of(project, b_job)}")
    plan = project.recon("plan", ".", "--detailed-exitcode")
    assert plan.returncode == 2, plan.stdout + plan.stderr
    assert f"{a_job['id']} was lost: Slurm now shows that id as recon2:" in plan.stdout
    applied = project.apply()
    assert "submitted a: job" in applied.stdout and "submitted b" not in applied.stdout
    assert len(project.job_of("a")) == 1 and project.job_of("a")[0]["id"] != a_job["id"]


def test_a_job_whose_comment_was_changed_is_still_its_runs_job_by_id(project: Project) -> None:
    project.repo.commit({"specs/a.yaml": run_spec("a", "true", extra=HELD)})
    project.apply()
    (job,) = project.job_of("a")
    try:
        _scontrol("update", f"jobid={job['id']}", "comment=moved by an operator")
        plan = project.recon("plan", ".", "--detailed-exitcode")
        assert plan.returncode == 0, plan.stdout + plan.stderr
        assert f"in progress: job {job['id']} pending" in plan.stdout
        assert f"Job {job['id']} of run a no longer carries its recon tag" in plan.stdout
        applied = project.apply()
        assert "submitted" not in applied.stdout, applied.stdout
        assert project.job_of("a") == []  # found by tag: none; by id: the one job
    finally:
        subprocess.run(["scancel", job["id"]], capture_output=True, check=False)


def test_a_failed_run_held_in_special_exit_is_retried_after_cancelling_the_held_job(
    project: Project,
) -> None:
    spec = run_spec("a", "sleep 120").replace("kind: Run\n", "kind: Run\nretries: 1\n")
    project.repo.commit({"specs/a.yaml": spec})
    project.apply()
    (held,) = project.job_of("a")
    project.wait_for("the job to run", lambda: _state_of(project, "a") == "RUNNING")
    _scontrol("requeuehold", "state=SpecialExit", held["id"])
    project.wait_for(
        "special exit",
        lambda: "SPECIAL_EXIT" in _squeue_state(held["id"]),
    )
    plan = project.recon("plan", ".")
    assert f"job {held['id']} held in special exit" in plan.stdout, plan.stdout
    assert f"(cancels job {held['id']})" in plan.stdout, plan.stdout
    applied = project.apply()
    assert f"cancelled job {held['id']}" in applied.stdout, applied.stdout
    assert "submitted a: job" in applied.stdout
    project.wait_for(
        "the held job to be cancelled", lambda: _squeue_state(held["id"]) in ("", "CANCELLED")
    )
    _scontrol_quiet("release", held["id"])  # what an operator might do later: nothing runs
    live = [j for j in project.job_of("a") if j["state"] in ("PENDING", "RUNNING")]
    assert [j["id"] for j in live] != [] and held["id"] not in [j["id"] for j in live]


def test_status_says_a_held_job_is_held_with_slurms_reason(project: Project) -> None:
    project.repo.commit(
        {"specs/a.yaml": run_spec("a", "true", extra="  sbatch_extra: ['--hold']\n")}
    )
    project.apply()
    status = project.recon("status", ".", "--format", "json")
    (row,) = json.loads(status.stdout)
    assert (row["health"], row["how"]) == ("pending", "held (JobHeldUser)")
    assert row["reason"].endswith(f"in progress: job {row['job_id']} held (JobHeldUser)")


def _state_of(project: Project, run_name: str) -> str:
    return next((job["state"] for job in project.job_of(run_name)), "")


def _squeue_state(job_id: str) -> str:
    return subprocess.run(
        ["squeue", "-h", "-j", job_id, "-o", "%T"], capture_output=True, text=True, check=False
    ).stdout.strip()


def _scontrol_quiet(*args: str) -> None:
    subprocess.run(["scontrol", *args], capture_output=True, text=True, check=False)
