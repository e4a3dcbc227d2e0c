"""`recon plan` and `recon apply` converging the real dev cluster, run as a user would.

Each test owns a temporary git repo with a project name of its own, so its jobs are its
own; the fixture cancels whatever is left when the test ends.
"""

from __future__ import annotations

import re
import signal
import subprocess
import sys
from datetime import datetime
from functools import partial
from pathlib import Path

import pytest

from tests.integration.harness import Project, example_project, run_spec

pytestmark = pytest.mark.slurm

TIMEOUT = 90.0


def test_example_repo_queues_the_whole_dag_then_plans_nothing(tmp_path: Path) -> None:
    example = example_project(tmp_path, "ex")
    try:
        first = example.apply()
        # The five runs, the sweep's six members (one array), and the allocation
        # `interactive` the example declares.
        assert "Apply complete: 12 submitted" in first.stdout, first.stdout
        every = {"prepare", "train", "evaluate", "actor-learner", "interactive", "seeds", "compare"}
        # A job that ends within seconds (prepare) leaves squeue before slurmctld's
        # accounting pass (every ~5 s) puts it in sacct's window: for those seconds
        # neither lists it (docs/specs.md, "Runs inside an allocation"). The listing that
        # shows every run is the one compared.
        listed: dict[str, str] = {}

        def every_run_listed() -> bool:
            listed.clear()
            listed.update((job["run"], job["id"]) for job in example.jobs())
            return set(listed) == every

        example.wait_for("Slurm to list every run's job", every_run_listed)
        jobs = dict(listed)
        dependencies = _dependencies(jobs["evaluate"])
        looked = datetime.now().replace(microsecond=0)  # sacct prints local time, in seconds
        # Slurm drops a dependency from the field once it is fulfilled: prepare may have
        # completed already (it takes a second); it then counts as chained, if it ended
        # before the field was read. Its end reaches sacct some seconds later.
        for upstream in ("train", "prepare"):
            if jobs[upstream] in dependencies:
                continue
            job = jobs[upstream]
            example.wait_for(f"{upstream}'s end in sacct", partial(_has_ended, job))
            ended = _ended(job)
            assert ended is not None and ended <= looked, (upstream, dependencies, ended, looked)

        setup = example.apply()  # the allocation's setup, once it holds its node
        assert "> setup     interactive" in setup.stdout, setup.stdout
        again = example.recon("plan", ".", "--detailed-exitcode")
        assert again.returncode == 0, again.stdout + again.stderr
        assert "No changes" in again.stdout

        example.wait_for(
            "the DAG to finish",
            lambda: (
                {j["state"] for j in example.jobs() if j["run"] != "interactive"} == {"COMPLETED"}
            ),
        )
        assert (example.root / "runs" / "evaluate" / "metrics.json").exists()
        assert example.recon("plan", ".", "--detailed-exitcode").returncode == 0
    finally:
        example.cancel_all()


def _has_ended(job_id: str) -> bool:
    return _ended(job_id) is not None


def _ended(job_id: str) -> datetime | None:
    """When the job completed, as sacct tells it; None until it has, or while sacct does
    not know it yet."""
    shown = subprocess.run(
        ["sacct", "-X", "-n", "-P", "-j", job_id, "-o", "State,End"],
        capture_output=True, text=True, check=False,
    ).stdout.split()  # fmt: skip
    if len(shown) != 1 or not shown[0].startswith("COMPLETED|"):
        return None
    return datetime.fromisoformat(shown[0].partition("|")[2])


def _dependencies(job_id: str) -> list[str]:
    """The job ids in the job's `Dependency=afterok:12(unfulfilled),afterok:13(...)` field,
    which scontrol shows while it is queued."""
    shown = subprocess.run(
        ["scontrol", "show", "job", job_id], capture_output=True, text=True, check=False
    ).stdout
    field = re.search(r"\bDependency=(\S+)", shown)
    return re.findall(r"afterok:(\d+)", field.group(1)) if field else []


def test_comment_only_commit_plans_nothing(project: Project) -> None:
    project.repo.commit({"specs/a.yaml": run_spec("a", "sleep 30")})
    project.apply()
    project.repo.commit({"specs/a.yaml": "# only a comment\n" + run_spec("a", "sleep 30")})
    result = project.recon("plan", ".", "--detailed-exitcode")
    assert result.returncode == 0, result.stdout + result.stderr
    assert len(project.job_of("a")) == 1


def test_resource_change_replaces_a_pending_job(project: Project) -> None:
    held = "  sbatch_extra: ['--begin=now+3600']\n"
    project.repo.commit({"specs/a.yaml": run_spec("a", "true", extra=held)})
    project.apply()
    (old,) = project.job_of("a")
    assert old["state"] == "PENDING"
    changed = run_spec("a", "true", extra=held).replace("memory: 100MiB", "memory: 200MiB")
    project.repo.commit({"specs/a.yaml": changed})
    plan = project.recon("plan", ".", "--detailed-exitcode")
    assert plan.returncode == 2
    assert "replace" in plan.stdout and "resources.memory 100MiB -> 200MiB" in plan.stdout
    project.apply()
    project.wait_for(
        "the old job to be cancelled", lambda: _state(project, old["id"]) == "CANCELLED"
    )
    live = [j for j in project.job_of("a") if j["state"] == "PENDING"]
    assert len(live) == 1 and live[0]["hash"] != old["hash"]


def _state(project: Project, job_id: str) -> str:
    return next((j["state"].split()[0] for j in project.jobs() if j["id"] == job_id), "")


@pytest.mark.parametrize("policy", ["defer", "replace"])
def test_change_on_a_running_job_follows_the_update_policy(project: Project, policy: str) -> None:
    spec = run_spec("a", "sleep 120", extra=f"update: {policy}\n")
    project.repo.commit({"specs/a.yaml": spec})
    project.apply()
    (old,) = project.job_of("a")
    project.wait_for("the job to run", lambda: _state(project, old["id"]) == "RUNNING")
    project.repo.commit({"specs/a.yaml": spec.replace("sleep 120", "sleep 121")})
    result = project.apply()
    if policy == "defer":
        assert "No changes" in result.stdout
        assert _state(project, old["id"]) == "RUNNING"
        assert len(project.job_of("a")) == 1
    else:
        project.wait_for(
            "the old job to be cancelled", lambda: _state(project, old["id"]) == "CANCELLED"
        )
        assert len(project.job_of("a")) == 2


def test_removed_run_is_cancelled_and_its_outputs_stay(project: Project) -> None:
    spec = run_spec("a", "echo made > {outputs.out.path}; sleep 120")
    # b runs too: a's job is then one of two live jobs, within the prune limit (the only
    # live job would take --allow-prune-all, tests/integration/test_prune_guard.py).
    project.repo.commit({"specs/a.yaml": spec, "specs/b.yaml": run_spec("b", "sleep 120")})
    project.apply()
    (job,) = project.job_of("a")
    output = project.root / "runs" / "a" / ".recon-staging" / "out.txt"  # until published
    project.wait_for("the output", output.exists)
    project.repo.remove("specs/a.yaml")
    project.repo.commit(message="drop a")
    result = project.apply()
    assert "cancelled job" in result.stdout
    project.wait_for("the cancel", lambda: _state(project, job["id"]) == "CANCELLED")
    assert output.read_text() == "made\n"  # what the cancelled job wrote stays, unpublished
    assert not (project.root / "runs" / "a" / "out.txt").exists()


def test_crash_between_sbatch_and_the_journal_is_healed_by_adoption(project: Project) -> None:
    project.repo.commit({"specs/a.yaml": run_spec("a", "sleep 60")})
    crashed = project.recon(
        "apply", ".", "--auto-approve", env={"RECON_FAULT_INJECT": "after-sbatch"}
    )
    assert crashed.returncode == -signal.SIGKILL
    assert len(project.job_of("a")) == 1
    healed = project.apply()
    assert "adopted job" in healed.stdout and "submitted" not in healed.stdout.split("Apply")[0]
    again = project.recon("plan", ".", "--detailed-exitcode")
    assert again.returncode == 0, again.stdout
    jobs = project.job_of("a")
    assert len(jobs) == 1, jobs  # exactly one job per (run, spec hash)


def test_two_applies_at_once_submit_once(project: Project) -> None:
    project.repo.commit({f"specs/r{i}.yaml": run_spec(f"r{i}", "sleep 30") for i in range(5)})
    command = [
        sys.executable,
        "-m",
        "reconciler",
        "apply",
        ".",
        "--auto-approve",
        "--lock-timeout",
        "60",
    ]
    both = [
        subprocess.Popen(
            command, cwd=project.root, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
        )
        for _ in range(2)
    ]
    outputs = [process.communicate(timeout=120) for process in both]
    assert [process.returncode for process in both] == [0, 0], outputs
    jobs = project.jobs()
    assert sorted(job["run"] for job in jobs) == [f"r{i}" for i in range(5)]


def test_a_second_apply_without_waiting_exits_with_the_lock_code(project: Project) -> None:
    project.repo.commit({"specs/a.yaml": run_spec("a", "true")})
    from reconciler.state.lock import project_lock

    with project_lock(project.root / ".recon", 0):
        result = project.recon("apply", ".", "--auto-approve")
    assert result.returncode == 3, result.stderr
    assert "lock" in result.stderr
    assert project.jobs() == []


def test_saved_plan_refused_once_stale(project: Project, tmp_path: Path) -> None:
    project.repo.commit({"specs/a.yaml": run_spec("a", "true")})
    saved = tmp_path / "plan.json"
    assert project.recon("plan", ".", "--out", str(saved)).returncode == 0
    project.repo.commit({"specs/b.yaml": run_spec("b", "true")})
    stale = project.recon("apply", str(saved), "--auto-approve")
    assert stale.returncode == 1 and "stale" in stale.stderr.lower(), stale.stderr
    assert project.jobs() == []

    fresh = tmp_path / "fresh.json"
    assert project.recon("plan", ".", "--out", str(fresh)).returncode == 0
    applied = project.recon("apply", str(fresh), "--auto-approve")
    assert applied.returncode == 0, applied.stderr
    assert "Apply complete: 2 submitted" in applied.stdout
    # sacct stores a job's comment only once it ends: wait until both show.
    project.wait_for("both jobs", lambda: sorted(j["run"] for j in project.jobs()) == ["a", "b"])
